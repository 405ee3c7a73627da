package awsinfra

import (
	"context"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
)

// policyDoc is the part of an IAM policy document the tests read.
type policyDoc struct {
	Statement []struct {
		Effect    string
		Action    any
		Resource  any
		Condition map[string]map[string][]string
	}
}

func strs(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, s := range v {
			out = append(out, s.(string))
		}
		return out
	}
	return nil
}

// TestWeightsPolicy: moto does not enforce IAM, so the documents are held
// to what they must grant: the reader gets objects under the fleet's prefix
// and a listing limited to it; the writer may also put (and abort and list
// multipart uploads); neither may delete, and nothing reaches past the
// prefix or the bucket.
func TestWeightsPolicy(t *testing.T) {
	for _, write := range []bool{false, true} {
		raw, err := WeightsPolicy("aws", "acme-weights", "qwen/", write)
		if err != nil {
			t.Fatal(err)
		}
		var doc policyDoc
		if err := json.Unmarshal([]byte(raw), &doc); err != nil {
			t.Fatal(err)
		}
		var objectActions []string
		listed := false
		for _, s := range doc.Statement {
			if s.Effect != "Allow" {
				t.Errorf("statement %+v is not an Allow", s)
			}
			res := strs(s.Resource)
			acts := strs(s.Action)
			for _, a := range acts {
				if strings.Contains(a, "Delete") || strings.Contains(a, "*") {
					t.Errorf("write=%v grants %s", write, a)
				}
			}
			switch {
			case slices.Equal(res, []string{"arn:aws:s3:::acme-weights/qwen/*"}):
				objectActions = append(objectActions, acts...)
			case slices.Equal(res, []string{"arn:aws:s3:::acme-weights"}) && slices.Equal(acts, []string{"s3:ListBucket"}):
				listed = slices.Equal(s.Condition["StringLike"]["s3:prefix"], []string{"qwen/*"})
			default:
				t.Errorf("write=%v: statement on %v grants %v beyond the prefix", write, res, acts)
			}
		}
		want := []string{"s3:GetObject"}
		if write {
			want = append(want, "s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts")
		}
		if !slices.Equal(objectActions, want) || !listed {
			t.Errorf("write=%v: object actions %v (want %v), listing limited to the prefix: %v", write, objectActions, want, listed)
		}
	}
}

// TestWeightsRoleName: within IAM's 64 characters for the longest names,
// the same for the same fleet, different for any other.
func TestWeightsRoleName(t *testing.T) {
	long := strings.Repeat("c", 100)
	seen := map[string]bool{}
	for _, n := range []string{
		WeightsRoleName(long, "us-west-2", "llmd", long, true),
		WeightsRoleName("prod", "us-west-2", "llmd", "qwen", false),
		WeightsRoleName("prod", "us-west-2", "llmd", "qwen", true),
		WeightsRoleName("prod", "us-east-1", "llmd", "qwen", false),
		WeightsRoleName("prod", "us-west-2", "team-b", "qwen", false),
	} {
		if len(n) > 64 || seen[n] {
			t.Errorf("role name %q: %d characters, seen before %v", n, len(n), seen[n])
		}
		seen[n] = true
	}
	if WeightsRoleName("prod", "us-west-2", "llmd", "qwen", false) != WeightsRoleName("prod", "us-west-2", "llmd", "qwen", false) {
		t.Error("the role name is not deterministic")
	}
}

// TestWeightsAccess, against the stand-in's EKS Pod Identity and moto's IAM:
// the reader's and the writer's roles carry their policies and a trust for
// EKS Pod Identity, each service account is bound to its role, a second run
// changes nothing, another fleet's same-named role is refused, and the
// delete removes both roles and both associations (twice is fine).
func TestWeightsAccess(t *testing.T) {
	c, standIn := standInClients(t)
	ctx := context.Background()
	if _, err := c.EKS.CreateCluster(ctx, &eks.CreateClusterInput{Name: aws.String("prod"), RoleArn: aws.String("arn:aws:iam::123456789012:role/prod-eks"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: []string{"subnet-1", "subnet-2"}}}); err != nil {
		t.Fatal(err)
	}
	spec := WeightsAccessSpec{Cluster: "prod", Namespace: "llmd", Fleet: "qwen", Bucket: "acme-weights", Prefix: "qwen/",
		ReaderServiceAccount: "qwen-weights-reader", WriterServiceAccount: "qwen-weights-writer", Tags: map[string]string{"env": "test"}}
	got, err := c.EnsureWeightsAccess(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct {
		write bool
		arn   string
		sa    string
	}{{false, got.ReaderRoleARN, "llmd/qwen-weights-reader"}, {true, got.WriterRoleARN, "llmd/qwen-weights-writer"}} {
		name := WeightsRoleName("prod", c.Config.Region, "llmd", "qwen", w.write)
		role, err := c.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		trust, _ := url.QueryUnescape(aws.ToString(role.Role.AssumeRolePolicyDocument))
		if aws.ToString(role.Role.Arn) != w.arn || !strings.Contains(trust, "pods.eks.amazonaws.com") || !strings.Contains(trust, "sts:TagSession") {
			t.Errorf("role %s: ARN %s (want %s), trust %s", name, aws.ToString(role.Role.Arn), w.arn, trust)
		}
		if tags := fromIAMTags(role.Role.Tags); tags[fleetTag] != "llmd/qwen" || tags[OwnerTag] != "prod" || tags["env"] != "test" {
			t.Errorf("role %s tags %v", name, tags)
		}
		pol, err := c.IAM.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: aws.String(name), PolicyName: aws.String(weightsPolicyName)})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := WeightsPolicy("aws", "acme-weights", "qwen/", w.write)
		if doc, _ := url.QueryUnescape(aws.ToString(pol.PolicyDocument)); doc != want {
			t.Errorf("role %s policy %s, want %s", name, doc, want)
		}
		if a := standIn.PodIdentityAssociations("prod")[w.sa]; a != w.arn {
			t.Errorf("%s bound to %q, want %s", w.sa, a, w.arn)
		}
	}
	again, err := c.EnsureWeightsAccess(ctx, spec)
	if err != nil || again != got {
		t.Errorf("a second run: %+v %v, want %+v", again, err, got)
	}
	if _, err := c.IAM.TagRole(ctx, &iam.TagRoleInput{RoleName: aws.String(WeightsRoleName("prod", c.Config.Region, "llmd", "qwen", false)),
		Tags: iamTags(map[string]string{fleetTag: "someone/else"})}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EnsureWeightsAccess(ctx, spec); err == nil || !strings.Contains(err.Error(), "not owned by") {
		t.Errorf("a role tagged for another fleet was adopted: %v", err)
	}
	if _, err := c.IAM.TagRole(ctx, &iam.TagRoleInput{RoleName: aws.String(WeightsRoleName("prod", c.Config.Region, "llmd", "qwen", false)),
		Tags: iamTags(map[string]string{fleetTag: "llmd/qwen"})}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := c.DeleteWeightsAccess(ctx, spec); err != nil {
			t.Fatal(err)
		}
	}
	for _, write := range []bool{false, true} {
		if _, err := c.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(WeightsRoleName("prod", c.Config.Region, "llmd", "qwen", write))}); !isNotFound(err) {
			t.Errorf("role left after delete: %v", err)
		}
	}
	if a := standIn.PodIdentityAssociations("prod"); len(a) != 0 {
		t.Errorf("associations left after delete: %v", a)
	}
}
