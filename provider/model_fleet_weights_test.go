package provider

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	batchv1 "k8s.io/api/batch/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/awsinfra"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// TestAccModelFleetS3Weights: cluster, fleet and router in one apply with
// the weights in the cluster's S3 bucket (model_bucket, passed as is). The pods stream s3://<bucket>/<path>/<commit>
// under the reader's service account, the staging Job writes under the
// writer's; each service account is bound by EKS Pod Identity (the stand-in's
// associations) to a role of the fleet whose policy covers its prefix only,
// and the router's to the reader's role; a new commit rolls the pods to its
// own prefix with the same roles (the framework's plan after each apply
// must be empty); destroy removes roles and associations.
func TestAccModelFleetS3Weights(t *testing.T) {
	g := newInClusterGround(t, "s3w", 2, 1)
	const cluster, ns = "acc-s3w", "llmd-s3w"
	const commit1, commit2 = "a09a35458c702b33eeacc393d103063234e8bc28", "bb46c15ee4bb56c5b63245ef50fd7637234d6f75"
	cfg := func(commit string) string {
		return g.config(cluster, "  addons = { monitoring = { enabled = false } }\n  model_bucket = { force_destroy = true }", fmt.Sprintf(`
resource "llmd_model_fleet" "test" {
  cluster   = llmd_inference_cluster.test.kubernetes
  name      = "qwen"
  namespace = %q
  replicas  = 2
  storage   = llmd_inference_cluster.test.model_bucket
  model = {
    path   = "qwen2.5-7b-instruct"
    source = "hf://Qwen/Qwen2.5-7B-Instruct@%s"
  }
}

resource "llmd_prefix_router" "test" {
  cluster = llmd_inference_cluster.test.kubernetes
  fleet   = llmd_model_fleet.test.router_target
  name    = "router"
  image   = %q
}
`, ns, commit, devRouterImage))
	}
	ctx := context.Background()
	reader := awsinfra.WeightsRoleName(cluster, testenv.Region, ns, "qwen", false)
	writer := awsinfra.WeightsRoleName(cluster, testenv.Region, ns, "qwen", true)
	roleARN := func(name string) (string, error) {
		got, err := g.aws.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: awssdk.String(name)})
		if err != nil {
			return "", err
		}
		return awssdk.ToString(got.Role.Arn), nil
	}
	var bucket string
	served := func(commit string) error {
		dep, err := g.c.Client.AppsV1().Deployments(ns).Get(ctx, "qwen", metav1.GetOptions{})
		if err != nil {
			return err
		}
		pod := dep.Spec.Template.Spec
		want := "s3://" + bucket + "/qwen2.5-7b-instruct/" + commit
		if pod.Containers[0].Args[0] != want || pod.ServiceAccountName != "qwen-weights-reader" {
			return fmt.Errorf("pods serve %s as %q, want %s as qwen-weights-reader", pod.Containers[0].Args[0], pod.ServiceAccountName, want)
		}
		jobs, err := g.c.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: "llmd.dev/fleet=qwen"})
		if err != nil {
			return err
		}
		var live []batchv1.Job
		for _, j := range jobs.Items {
			if j.DeletionTimestamp == nil {
				live = append(live, j)
			}
		}
		if len(live) != 1 || live[0].Spec.Template.Spec.ServiceAccountName != "qwen-weights-writer" {
			return fmt.Errorf("staging Jobs %d, the live one's service account %q", len(live), live[0].Spec.Template.Spec.ServiceAccountName)
		}
		readerARN, err := roleARN(reader)
		if err != nil {
			return err
		}
		writerARN, err := roleARN(writer)
		if err != nil {
			return err
		}
		assoc := g.standIn.PodIdentityAssociations(cluster)
		for sa, arn := range map[string]string{ns + "/qwen-weights-reader": readerARN, ns + "/qwen-weights-writer": writerARN, "llmd-s3w/router": readerARN} {
			if assoc[sa] != arn {
				return fmt.Errorf("service account %s bound to %q, want %s (associations %v)", sa, assoc[sa], arn, assoc)
			}
		}
		pol, err := g.aws.IAM.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: awssdk.String(reader), PolicyName: awssdk.String("llmd-weights")})
		if err != nil {
			return err
		}
		doc, _ := url.QueryUnescape(awssdk.ToString(pol.PolicyDocument))
		if !strings.Contains(doc, "arn:aws:s3:::"+bucket+"/qwen2.5-7b-instruct/*") || strings.Contains(doc, "PutObject") {
			return fmt.Errorf("reader policy %s", doc)
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(*terraform.State) error {
			for _, name := range []string{reader, writer} {
				if _, err := roleARN(name); err == nil {
					return fmt.Errorf("IAM role %s left after destroy", name)
				}
			}
			if a := g.standIn.PodIdentityAssociations(cluster); len(a) != 0 {
				return fmt.Errorf("associations left after destroy: %v", a)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: cfg(commit1),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(fleetRes, tfjsonpath.New("router_target").AtMapKey("s3_region"), knownvalue.StringExact(testenv.Region)),
					statecheck.ExpectKnownValue(fleetRes, tfjsonpath.New("router_target").AtMapKey("s3_reader_role"), knownvalue.StringExact(reader)),
					statecheck.ExpectKnownValue(fleetRes, tfjsonpath.New("router_target").AtMapKey("claim_name"), knownvalue.StringExact("")),
				},
				Check: func(s *terraform.State) error {
					// The cluster's bucket, passed as is.
					bucket = s.RootModule().Resources["llmd_inference_cluster.test"].Primary.Attributes["model_bucket.bucket"]
					tok := s.RootModule().Resources[fleetRes].Primary.Attributes["router_target.tokenizer_path"]
					if bucket == "" || tok != "s3://"+bucket+"/qwen2.5-7b-instruct/"+commit1+"/tokenizer.json" {
						return fmt.Errorf("bucket %q, tokenizer_path %q", bucket, tok)
					}
					return served(commit1)
				},
			},
			{
				Config:           cfg(commit2),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(fleetRes, plancheck.ResourceActionUpdate)}},
				Check:            func(*terraform.State) error { return served(commit2) },
			},
		},
	})
}
