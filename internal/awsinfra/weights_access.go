package awsinfra

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
)

// fleetTag names the fleet ("<namespace>/<name>") a fleet's IAM roles
// belong to, beside the cluster's OwnerTag.
const fleetTag = "llmd.dev/fleet"

// WeightsAccessSpec is one fleet's access to its weights in S3: its pods
// read the fleet's key prefix, its staging Job writes it, each through a
// role of its own bound by EKS Pod Identity to its service account.
type WeightsAccessSpec struct {
	// Cluster is the EKS cluster the fleet runs on; Namespace and Fleet name it.
	Cluster, Namespace, Fleet string
	// Bucket and Prefix are where the fleet's revisions live ("qwen/").
	Bucket, Prefix string
	// ReaderServiceAccount and WriterServiceAccount are the pods' and the
	// staging Job's service accounts.
	ReaderServiceAccount, WriterServiceAccount string
	// Tags are the fleet's own tags for its roles.
	Tags map[string]string
}

// WeightsAccess is what EnsureWeightsAccess made: the roles' ARNs. The
// router reading the tokenizer files binds its own service account to the
// reader's role (BindServiceAccount).
type WeightsAccess struct {
	ReaderRoleARN, WriterRoleARN string
}

// weightsPolicyName is the inline policy's name on both roles.
const weightsPolicyName = "llmd-weights"

// WeightsRoleName is the IAM role of a fleet's reader (write false) or
// writer. IAM role names are account-wide and at most 64 characters: the
// name carries as much of the cluster and fleet names as fits and a digest
// of cluster, region, namespace and fleet, so two fleets never share one.
func WeightsRoleName(cluster, region, namespace, fleet string, write bool) string {
	sum := sha256.Sum256([]byte(cluster + "\x00" + region + "\x00" + namespace + "\x00" + fleet))
	head := cluster + "-" + fleet
	if len(head) > 38 {
		head = head[:38]
	}
	kind := "reader"
	if write {
		kind = "writer"
	}
	return head + "-" + hex.EncodeToString(sum[:4]) + "-weights-" + kind
}

// WeightsPolicy is the inline policy of a fleet's reader (write false) or
// writer role: objects under the prefix only, and listing only with a key
// prefix inside it (the s3:prefix condition key; Amazon S3 User Guide,
// "Policy condition keys for Amazon S3", and "Controlling access to a
// bucket with user policies", whose examples limit ListBucket to a folder
// this way). The streamer lists the revision's *.safetensors and reads
// them with ranged GETs; HeadObject is authorised by s3:GetObject. The
// writer may also put objects and abort and list its multipart uploads
// (boto3's upload_file splits large files). No role may delete: a
// revision under a running pod is never removed by the fleet.
func WeightsPolicy(partition, bucket, prefix string, write bool) (string, error) {
	bucketARN := "arn:" + partition + ":s3:::" + bucket
	objects := bucketARN + "/" + prefix + "*"
	actions := []string{"s3:GetObject"}
	if write {
		actions = append(actions, "s3:PutObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts")
	}
	doc := map[string]any{
		"Version": "2012-10-17",
		"Statement": []map[string]any{
			{"Sid": "ObjectsUnderPrefix", "Effect": "Allow", "Action": actions, "Resource": objects},
			{"Sid": "ListPrefix", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucketARN,
				"Condition": map[string]any{"StringLike": map[string]any{"s3:prefix": []string{prefix + "*"}}}},
		},
	}
	b, err := json.Marshal(doc)
	return string(b), err
}

// EnsureWeightsAccess makes (or adopts, when its tags say it is this
// fleet's) the reader's and the writer's roles with their policies, and
// binds each to its service account. It must run before the pods and the
// Job are created: EKS injects Pod Identity credentials when a pod starts.
func (c *Clients) EnsureWeightsAccess(ctx context.Context, spec WeightsAccessSpec) (WeightsAccess, error) {
	partition, err := c.callerPartition(ctx)
	if err != nil {
		return WeightsAccess{}, err
	}
	var out WeightsAccess
	for _, w := range []struct {
		write bool
		sa    string
		arn   *string
	}{{false, spec.ReaderServiceAccount, &out.ReaderRoleARN}, {true, spec.WriterServiceAccount, &out.WriterRoleARN}} {
		name := WeightsRoleName(spec.Cluster, c.Config.Region, spec.Namespace, spec.Fleet, w.write)
		tags := c.tagSet(spec.Cluster, spec.Tags, "weights-role")
		tags[fleetTag] = spec.Namespace + "/" + spec.Fleet
		arn, err := c.ensureOwnedRole(ctx, ownedRole{name: name, owner: "fleet " + tags[fleetTag] + " of cluster " + spec.Cluster,
			service: "pods.eks.amazonaws.com", description: "llmd fleet " + tags[fleetTag] + " weights in s3://" + spec.Bucket + "/" + spec.Prefix, tags: tags})
		if err != nil {
			return out, err
		}
		policy, err := WeightsPolicy(partition, spec.Bucket, spec.Prefix, w.write)
		if err != nil {
			return out, err
		}
		// PutRolePolicy replaces a policy of that name, so a new bucket or
		// prefix takes effect on the same role.
		if _, err := c.IAM.PutRolePolicy(ctx, &iam.PutRolePolicyInput{RoleName: aws.String(name), PolicyName: aws.String(weightsPolicyName),
			PolicyDocument: aws.String(policy)}); err != nil {
			return out, fmt.Errorf("putting the weights policy on IAM role %s: %w", name, err)
		}
		if err := c.BindServiceAccount(ctx, spec.Cluster, spec.Namespace, w.sa, arn, spec.Tags); err != nil {
			return out, err
		}
		*w.arn = arn
	}
	return out, nil
}

// DeleteWeightsAccess removes the fleet's associations and roles; those
// already gone are fine, and a role another fleet owns is left alone.
func (c *Clients) DeleteWeightsAccess(ctx context.Context, spec WeightsAccessSpec) error {
	for _, sa := range []string{spec.ReaderServiceAccount, spec.WriterServiceAccount} {
		if err := c.UnbindServiceAccount(ctx, spec.Cluster, spec.Namespace, sa); err != nil {
			return err
		}
	}
	for _, write := range []bool{false, true} {
		name := WeightsRoleName(spec.Cluster, c.Config.Region, spec.Namespace, spec.Fleet, write)
		got, err := c.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(name)})
		if isNotFound(err) {
			continue
		}
		if err != nil {
			return fmt.Errorf("finding IAM role %s: %w", name, err)
		}
		if fromIAMTags(got.Role.Tags)[fleetTag] != spec.Namespace+"/"+spec.Fleet {
			continue
		}
		if err := c.deleteRole(ctx, spec.Cluster, name); err != nil {
			return err
		}
	}
	return nil
}

// BindServiceAccount makes the EKS Pod Identity association of one service
// account with roleARN: created when missing, pointed at roleARN when it
// names another role.
func (c *Clients) BindServiceAccount(ctx context.Context, cluster, namespace, serviceAccount, roleARN string, userTags map[string]string) error {
	have, err := c.findPodIdentity(ctx, cluster, namespace, serviceAccount)
	if err != nil {
		return err
	}
	switch {
	case have == nil:
		_, err := c.EKS.CreatePodIdentityAssociation(ctx, &eks.CreatePodIdentityAssociationInput{ClusterName: aws.String(cluster),
			Namespace: aws.String(namespace), ServiceAccount: aws.String(serviceAccount), RoleArn: aws.String(roleARN),
			Tags: c.tagSet(cluster, userTags, "pod-identity-"+serviceAccount)})
		if err != nil && !isCode(err, "ResourceInUseException") {
			return fmt.Errorf("associating IAM role %s with service account %s/%s of cluster %s (EKS Pod Identity): %w",
				roleARN, namespace, serviceAccount, cluster, err)
		}
	case have.RoleARN != roleARN:
		c.logf(ctx, "pointing a Pod Identity association at its role", map[string]any{"service_account": namespace + "/" + serviceAccount, "from": have.RoleARN, "to": roleARN})
		if _, err := c.EKS.UpdatePodIdentityAssociation(ctx, &eks.UpdatePodIdentityAssociationInput{ClusterName: aws.String(cluster),
			AssociationId: aws.String(have.ID), RoleArn: aws.String(roleARN)}); err != nil {
			return fmt.Errorf("updating EKS Pod Identity association %s of cluster %s: %w", have.ID, cluster, err)
		}
	}
	return nil
}

// UnbindServiceAccount deletes the service account's Pod Identity
// association, if any.
func (c *Clients) UnbindServiceAccount(ctx context.Context, cluster, namespace, serviceAccount string) error {
	have, err := c.findPodIdentity(ctx, cluster, namespace, serviceAccount)
	if err != nil || have == nil {
		return err
	}
	if _, err := c.EKS.DeletePodIdentityAssociation(ctx, &eks.DeletePodIdentityAssociationInput{ClusterName: aws.String(cluster),
		AssociationId: aws.String(have.ID)}); err != nil && !isNotFound(err) {
		return fmt.Errorf("deleting EKS Pod Identity association %s of cluster %s: %w", have.ID, cluster, err)
	}
	return nil
}
