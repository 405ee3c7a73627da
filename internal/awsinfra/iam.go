package awsinfra

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
)

// Roles are the IAM roles of a cluster: one EKS assumes for the control
// plane, one the nodes' EC2 instances assume.
type Roles struct {
	ClusterRoleARN string
	NodeRoleARN    string
}

// roleSpec is one IAM role with its trust and managed policies.
type roleSpec struct {
	suffix   string
	service  string
	policies []string
}

// The managed policies EKS documents for the cluster role and for managed node groups.
var (
	clusterRole = roleSpec{suffix: "-eks", service: "eks.amazonaws.com", policies: []string{"AmazonEKSClusterPolicy"}}
	nodeRole    = roleSpec{suffix: "-node", service: "ec2.amazonaws.com",
		policies: []string{"AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy", "AmazonEC2ContainerRegistryReadOnly"}}
)

// RoleNames are the IAM role names a cluster called name in region uses. IAM
// role names are account-wide, so they carry the cluster name and the region:
// a same-named cluster in another region has roles of its own. The longest
// name (38 + 1 + 14 + 8 characters; Karpenter's, in karpenterRoleNames,
// and EKS Auto Mode's node role, 10 for the suffix) stays within IAM's 64.
// The FSx CSI driver's role exists only while the driver is on.
func RoleNames(name, region string) []string {
	return []string{roleName(name, region, clusterRole), roleName(name, region, nodeRole), roleName(name, region, fsxCSIRole)}
}

func roleName(cluster, region string, rs roleSpec) string { return cluster + "-" + region + rs.suffix }

// allRoleNames are RoleNames and the roles of Karpenter and of EKS Auto
// Mode, which a cluster has only in those compute modes.
func allRoleNames(name, region string) []string {
	return append(append(RoleNames(name, region), karpenterRoleNames(name, region)...), roleName(name, region, autoModeNodeRole))
}

// ownsRole reports whether a role's tags make it this cluster's in this region.
func (c *Clients) ownsRole(tags map[string]string, owner string) bool {
	return tags[OwnerTag] == owner && tags[regionTag] == c.Config.Region
}

func (c *Clients) ensureRoles(ctx context.Context, spec ClusterSpec) (Roles, error) {
	var r Roles
	err := parallel(
		func() (err error) { r.ClusterRoleARN, err = c.ensureClusterRole(ctx, spec); return err },
		func() (err error) { r.NodeRoleARN, err = c.ensureRole(ctx, spec, nodeRole); return err },
	)
	return r, err
}

// ensureRole finds the role by its deterministic name and adopts it only if it
// carries this cluster's owner tag: a same-named role of someone else is an
// error, never silently taken over.
func (c *Clients) ensureRole(ctx context.Context, spec ClusterSpec, rs roleSpec) (string, error) {
	name := roleName(spec.Name, c.Config.Region, rs)
	arn, err := c.ensureOwnedRole(ctx, ownedRole{name: name, owner: spec.Name, service: rs.service,
		description: "llmd inference cluster " + spec.Name, tags: c.tagSet(spec.Name, spec.Tags, "role"+rs.suffix)})
	if err != nil {
		return "", err
	}
	partition, err := c.callerPartition(ctx)
	if err != nil {
		return arn, err
	}
	for _, p := range rs.policies {
		// Attaching an attached policy is a no-op, so an adopted role needs no check first.
		if _, err := c.IAM.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: aws.String(name),
			PolicyArn: aws.String("arn:" + partition + ":iam::aws:policy/" + p)}); err != nil {
			return arn, fmt.Errorf("attaching %s to IAM role %s: %w", p, name, err)
		}
	}
	return arn, nil
}

// ownedRole is an IAM role the provider makes for a service to assume,
// named deterministically and tagged with its owner (tags carry OwnerTag
// and the region, as tagSet makes them).
type ownedRole struct {
	name, owner, service, description string
	tags                              map[string]string
}

// ensureOwnedRole finds the role by its name and adopts it only if its tags
// are the ones this owner gives it (OwnerTag, the region and, for a part of
// the owner such as a fleet, the part's tags): a same-named role of someone
// else is an error, never silently taken over. Missing, it is created with
// a trust policy for the service (sts:AssumeRole and sts:TagSession, which
// EKS Pod Identity needs: EKS user guide, "Create a Pod Identity association").
func (c *Clients) ensureOwnedRole(ctx context.Context, r ownedRole) (string, error) {
	got, err := c.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(r.name)})
	switch {
	case err == nil:
		tags := fromIAMTags(got.Role.Tags)
		for k, v := range r.tags {
			if (k == OwnerTag || k == regionTag || k == fleetTag) && tags[k] != v {
				return "", fmt.Errorf("IAM role %s exists but is not owned by %s in %s (tag %s=%q, want %q): rename it or delete the role",
					r.name, r.owner, c.Config.Region, k, tags[k], v)
			}
		}
		c.adopted(ctx, "IAM role", r.name)
		return aws.ToString(got.Role.Arn), nil
	case isNotFound(err):
		created, err := c.IAM.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(r.name), AssumeRolePolicyDocument: aws.String(serviceTrust(r.service)),
			Description: aws.String(r.description), Tags: iamTags(r.tags)})
		if err != nil {
			return "", fmt.Errorf("creating IAM role %s: %w", r.name, err)
		}
		return aws.ToString(created.Role.Arn), nil
	default:
		return "", fmt.Errorf("finding IAM role %s: %w", r.name, err)
	}
}

// serviceTrust is the trust policy of a role the service assumes, with
// session tags (EKS Pod Identity and EKS Auto Mode tag their sessions).
func serviceTrust(service string) string {
	return fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"%s"},"Action":["sts:AssumeRole","sts:TagSession"]}]}`, service)
}

// deleteRoles removes the cluster's roles (Karpenter's included), detaching
// policies and instance profiles first; a role already gone is fine, and a
// role not owned by the cluster is left alone.
func (c *Clients) deleteRoles(ctx context.Context, owner string) error {
	jobs := []func() error{}
	for _, name := range allRoleNames(owner, c.Config.Region) {
		jobs = append(jobs, func() error { return c.deleteRole(ctx, owner, name) })
	}
	return parallel(jobs...)
}

func (c *Clients) deleteRole(ctx context.Context, owner, name string) error {
	got, err := c.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(name)})
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("finding IAM role %s: %w", name, err)
	}
	if !c.ownsRole(fromIAMTags(got.Role.Tags), owner) {
		return nil
	}
	attached, err := c.IAM.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: aws.String(name)})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("listing policies of IAM role %s: %w", name, err)
	}
	if attached != nil {
		for _, p := range attached.AttachedPolicies {
			if _, err := c.IAM.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: aws.String(name), PolicyArn: p.PolicyArn}); err != nil && !isNotFound(err) {
				return fmt.Errorf("detaching %s from IAM role %s: %w", aws.ToString(p.PolicyName), name, err)
			}
		}
	}
	inline, err := c.IAM.ListRolePolicies(ctx, &iam.ListRolePoliciesInput{RoleName: aws.String(name)})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("listing inline policies of IAM role %s: %w", name, err)
	}
	if inline != nil {
		for _, p := range inline.PolicyNames {
			if _, err := c.IAM.DeleteRolePolicy(ctx, &iam.DeleteRolePolicyInput{RoleName: aws.String(name), PolicyName: aws.String(p)}); err != nil && !isNotFound(err) {
				return fmt.Errorf("deleting inline policy %s of IAM role %s: %w", p, name, err)
			}
		}
	}
	profiles, err := c.IAM.ListInstanceProfilesForRole(ctx, &iam.ListInstanceProfilesForRoleInput{RoleName: aws.String(name)})
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("listing instance profiles of IAM role %s: %w", name, err)
	}
	if profiles != nil {
		for _, p := range profiles.InstanceProfiles {
			if _, err := c.IAM.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{RoleName: aws.String(name),
				InstanceProfileName: p.InstanceProfileName}); err != nil && !isNotFound(err) {
				return fmt.Errorf("removing IAM role %s from instance profile %s: %w", name, aws.ToString(p.InstanceProfileName), err)
			}
		}
	}
	if _, err := c.IAM.DeleteRole(ctx, &iam.DeleteRoleInput{RoleName: aws.String(name)}); err != nil && !isNotFound(err) {
		return fmt.Errorf("deleting IAM role %s: %w", name, err)
	}
	return nil
}
