package awsinfra

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
)

// bookkeeping reports tags the provider sets for its own use (owner, part,
// Name, Kubernetes subnet roles); tag updates never touch them.
func bookkeeping(key string) bool {
	return key == "Name" || strings.HasPrefix(key, "llmd.dev/") || strings.HasPrefix(key, "kubernetes.io/")
}

func withoutBookkeeping(tags map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range tags {
		if !bookkeeping(k) {
			out[k] = v
		}
	}
	return out
}

// syncNetworkTags brings the tags of every EC2 part the cluster owns to the
// default tags plus the resource's tags.
func (c *Clients) syncNetworkTags(ctx context.Context, spec ClusterSpec) error {
	parts, err := c.ownedEC2(ctx, spec.Name)
	if err != nil {
		return err
	}
	want := c.AllTags(spec.Tags)
	for _, p := range parts {
		set, remove := tagDiff(withoutBookkeeping(p.Tags), want)
		if len(set) > 0 {
			if _, err := c.EC2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{p.ID}, Tags: ec2Tags(set)}); err != nil {
				return fmt.Errorf("tagging %s %s: %w", p.Kind, p.ID, err)
			}
		}
		if len(remove) > 0 {
			keys := make([]ec2types.Tag, 0, len(remove))
			for _, k := range remove {
				keys = append(keys, ec2types.Tag{Key: aws.String(k)})
			}
			if _, err := c.EC2.DeleteTags(ctx, &ec2.DeleteTagsInput{Resources: []string{p.ID}, Tags: keys}); err != nil {
				return fmt.Errorf("untagging %s %s: %w", p.Kind, p.ID, err)
			}
		}
	}
	return nil
}

// syncRoleTags does the same for the cluster's IAM roles.
func (c *Clients) syncRoleTags(ctx context.Context, spec ClusterSpec) error {
	want := c.AllTags(spec.Tags)
	for _, name := range allRoleNames(spec.Name, c.Config.Region) {
		got, err := c.IAM.ListRoleTags(ctx, &iam.ListRoleTagsInput{RoleName: aws.String(name)})
		if isNotFound(err) {
			continue // a role of a part that is off (the FSx CSI driver's, Karpenter's)
		}
		if err != nil {
			return fmt.Errorf("reading tags of IAM role %s: %w", name, err)
		}
		set, remove := tagDiff(withoutBookkeeping(fromIAMTags(got.Tags)), want)
		if len(set) > 0 {
			if _, err := c.IAM.TagRole(ctx, &iam.TagRoleInput{RoleName: aws.String(name), Tags: iamTags(set)}); err != nil {
				return fmt.Errorf("tagging IAM role %s: %w", name, err)
			}
		}
		if len(remove) > 0 {
			if _, err := c.IAM.UntagRole(ctx, &iam.UntagRoleInput{RoleName: aws.String(name), TagKeys: remove}); err != nil {
				return fmt.Errorf("untagging IAM role %s: %w", name, err)
			}
		}
	}
	return nil
}

// roleARN is the ARN of an IAM role by name.
func (c *Clients) roleARN(ctx context.Context, name string) (string, error) {
	got, err := c.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(name)})
	if err != nil {
		return "", fmt.Errorf("finding IAM role %s: %w", name, err)
	}
	return aws.ToString(got.Role.Arn), nil
}
