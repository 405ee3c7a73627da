package awsinfra

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
)

// clusterAdminPolicy is the EKS access policy the admin access entry gets,
// in the caller's partition (aws, aws-cn, aws-us-gov).
func clusterAdminPolicy(partition string) string {
	return "arn:" + partition + ":eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
}

// findEKSClusterByName describes the cluster; nil without error when it does not exist.
// EKSCluster is the EKS cluster's description, nil when there is none.
func (c *Clients) EKSCluster(ctx context.Context, name string) (*ekstypes.Cluster, error) {
	return c.findEKSClusterByName(ctx, name)
}

func (c *Clients) findEKSClusterByName(ctx context.Context, name string) (*ekstypes.Cluster, error) {
	out, err := c.EKS.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)})
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("describing EKS cluster %s: %w", name, err)
	}
	return out.Cluster, nil
}

// ensureEKSCluster creates the control plane or adopts the one an earlier
// create left, then waits for it to be ACTIVE. A cluster of that name without
// this owner tag belongs to someone else and is refused.
func (c *Clients) ensureEKSCluster(ctx context.Context, spec ClusterSpec, net Network, roles Roles) error {
	existing, err := c.findEKSClusterByName(ctx, spec.Name)
	if err != nil {
		return err
	}
	if existing != nil {
		if existing.Tags[OwnerTag] != spec.Name {
			return fmt.Errorf("EKS cluster %s exists but was not created by llmd (no %s tag): import it with terraform import, or choose another name", spec.Name, OwnerTag)
		}
		c.adopted(ctx, "EKS cluster", spec.Name)
		if existing.Status == ekstypes.ClusterStatusFailed {
			return fmt.Errorf("EKS cluster %s is FAILED%s; delete it (aws eks delete-cluster --name %s) and apply again", spec.Name, clusterIssues(existing.Health), spec.Name)
		}
		if existing.Status == ekstypes.ClusterStatusDeleting {
			if err := c.waitEKSClusterGone(ctx, spec.Name, time.Now()); err != nil {
				return err
			}
			existing = nil
		}
	}
	if existing == nil {
		in := &eks.CreateClusterInput{
			Name:    aws.String(spec.Name),
			Version: aws.String(spec.KubernetesVersion),
			RoleArn: aws.String(roles.ClusterRoleARN),
			ResourcesVpcConfig: &ekstypes.VpcConfigRequest{
				SubnetIds:             append(append([]string{}, net.PrivateSubnetIDs...), net.PublicSubnetIDs...),
				EndpointPublicAccess:  aws.Bool(spec.Endpoint.Public),
				EndpointPrivateAccess: aws.Bool(spec.Endpoint.Private),
				PublicAccessCidrs:     publicCIDRs(spec.Endpoint),
			},
			// API mode only: access is granted by access entries, never aws-auth.
			AccessConfig: &ekstypes.CreateAccessConfigRequest{
				AuthenticationMode:                      ekstypes.AuthenticationModeApi,
				BootstrapClusterCreatorAdminPermissions: aws.Bool(spec.BootstrapCreatorAdmin),
			},
			Tags: c.tagSet(spec.Name, spec.Tags, "cluster"),
		}
		if spec.AutoMode {
			r := autoModeConfig(true)
			in.ComputeConfig, in.StorageConfig, in.KubernetesNetworkConfig = r.compute, r.storage, r.network
			// EKS refuses Auto Mode on a new cluster that bootstraps the
			// self-managed add-ons ("When EKS Auto Mode is enabled,
			// bootstrapSelfManagedAddons must be set to false"); the
			// managed add-ons in spec.Addons are installed instead.
			in.BootstrapSelfManagedAddons = aws.Bool(false)
		}
		// In use: our own earlier request got through; the wait below adopts it.
		err := c.createRetryingIAM(ctx, "IAM role "+roles.ClusterRoleARN+" to be assumable by EKS", func(ctx context.Context) error {
			_, err := c.EKS.CreateCluster(ctx, in)
			return err
		})
		if err != nil {
			return fmt.Errorf("creating EKS cluster %s: %w", spec.Name, err)
		}
	}
	if err := c.waitEKSClusterActive(ctx, spec.Name); err != nil {
		return err
	}
	if existing != nil && autoModeOn(existing) != spec.AutoMode {
		// An adopted cluster an earlier create left with Auto Mode the other way.
		return c.syncAutoMode(ctx, spec, autoModeOn(existing))
	}
	return nil
}

func publicCIDRs(e EndpointAccess) []string {
	if !e.Public {
		return nil
	}
	return e.PublicCIDRs
}

// waitEKSClusterActive waits through CREATING and UPDATING; FAILED ends the
// wait with the health issues EKS reports, which say what to fix.
func (c *Clients) waitEKSClusterActive(ctx context.Context, name string) error {
	return c.waitFor(ctx, "EKS cluster "+name+" to become ACTIVE", func(ctx context.Context) error {
		cl, err := c.findEKSClusterByName(ctx, name)
		if err != nil {
			return err
		}
		if cl == nil {
			return pending("not found yet")
		}
		switch cl.Status {
		case ekstypes.ClusterStatusActive:
			return nil
		case ekstypes.ClusterStatusCreating, ekstypes.ClusterStatusUpdating, ekstypes.ClusterStatusPending:
			return pending("status %s", cl.Status)
		default:
			return fmt.Errorf("EKS cluster %s is %s%s", name, cl.Status, clusterIssues(cl.Health))
		}
	})
}

func clusterIssues(h *ekstypes.ClusterHealth) string {
	if h == nil {
		return issuesText(0, nil)
	}
	return issuesText(len(h.Issues), func(i int) string {
		return issueText(string(h.Issues[i].Code), aws.ToString(h.Issues[i].Message), h.Issues[i].ResourceIds)
	})
}

// issuesText joins n health issues for an error message.
func issuesText(n int, issue func(int) string) string {
	if n == 0 {
		return " (no health issues reported)"
	}
	parts := make([]string, n)
	for i := range parts {
		parts[i] = issue(i)
	}
	return "; health issues: " + strings.Join(parts, "; ")
}

// issueText is one health issue: code first, since the code is what to search for.
func issueText(code, msg string, resources []string) string {
	if len(resources) == 0 {
		return code + ": " + msg
	}
	return fmt.Sprintf("%s: %s (%s)", code, msg, strings.Join(resources, ", "))
}

// waitEKSClusterGone waits until the cluster deleted at since is gone: DELETING
// is pending, and so is ACTIVE for settleLimit after the call (EKS can
// still read ACTIVE right after DeleteCluster).
func (c *Clients) waitEKSClusterGone(ctx context.Context, name string, since time.Time) error {
	return c.waitFor(ctx, "EKS cluster "+name+" to be deleted", func(ctx context.Context) error {
		cl, err := c.findEKSClusterByName(ctx, name)
		if err != nil {
			return err
		}
		if cl == nil {
			return nil
		}
		if cl.Status != ekstypes.ClusterStatusDeleting && (cl.Status != ekstypes.ClusterStatusActive || !settling(since)) {
			return fmt.Errorf("EKS cluster %s is %s while being deleted%s", name, cl.Status, clusterIssues(cl.Health))
		}
		return pending("status %s", cl.Status)
	})
}

// deleteEKSCluster deletes the control plane (its access entries go with it)
// unless it is already DELETING, and waits until it is gone; the caller has
// checked the cluster is owned and has deleted its node groups. EKS refuses
// the delete (ResourceInUseException) while node groups are still going or
// an update runs; the call is repeated until it is taken.
func (c *Clients) deleteEKSCluster(ctx context.Context, name string, status ekstypes.ClusterStatus) error {
	began := time.Now()
	if status != ekstypes.ClusterStatusDeleting {
		err := c.whileInUse(ctx, "EKS cluster "+name+" (delete)", func(ctx context.Context) error {
			_, err := c.EKS.DeleteCluster(ctx, &eks.DeleteClusterInput{Name: aws.String(name)})
			return err
		}, func(ctx context.Context) error { return c.waitNodeGroupsGone(ctx, name) })
		if err != nil && !isNotFound(err) {
			return fmt.Errorf("deleting EKS cluster %s: %w", name, err)
		}
	}
	return c.waitEKSClusterGone(ctx, name, began)
}

// ensureAdminAccessEntry grants principal cluster admin through an access
// entry with the cluster-admin access policy; an entry already there (from an
// earlier create) is adopted and the association repeated, which is idempotent.
func (c *Clients) ensureAdminAccessEntry(ctx context.Context, spec ClusterSpec, principal string) error {
	_, err := c.EKS.DescribeAccessEntry(ctx, &eks.DescribeAccessEntryInput{ClusterName: aws.String(spec.Name), PrincipalArn: aws.String(principal)})
	switch {
	case err == nil:
		c.adopted(ctx, "EKS access entry", principal)
	case isNotFound(err):
		_, err := c.EKS.CreateAccessEntry(ctx, &eks.CreateAccessEntryInput{ClusterName: aws.String(spec.Name), PrincipalArn: aws.String(principal),
			Type: aws.String("STANDARD"), Tags: c.tagSet(spec.Name, spec.Tags, adminEntryPart)})
		if err != nil && !isCode(err, "ResourceInUseException") {
			return fmt.Errorf("creating EKS access entry for %s on cluster %s: %w", principal, spec.Name, err)
		}
	default:
		return fmt.Errorf("finding EKS access entry for %s on cluster %s: %w", principal, spec.Name, err)
	}
	partition, err := c.callerPartition(ctx)
	if err != nil {
		return err
	}
	policy := clusterAdminPolicy(partition)
	_, err = c.EKS.AssociateAccessPolicy(ctx, &eks.AssociateAccessPolicyInput{ClusterName: aws.String(spec.Name), PrincipalArn: aws.String(principal),
		PolicyArn: aws.String(policy), AccessScope: &ekstypes.AccessScope{Type: ekstypes.AccessScopeTypeCluster}})
	if err != nil {
		return fmt.Errorf("associating %s with access entry %s on cluster %s: %w", policy, principal, spec.Name, err)
	}
	return nil
}

// updateEKSCluster applies in place what EKS can change: the Kubernetes
// version (one minor at a time, as EKS requires) and endpoint access.
func (c *Clients) updateEKSCluster(ctx context.Context, spec ClusterSpec, have *Cluster) error {
	if spec.KubernetesVersion != have.KubernetesVersion {
		what := fmt.Sprintf("upgrading EKS cluster %s from %s to %s", spec.Name, have.KubernetesVersion, spec.KubernetesVersion)
		err := c.updateCluster(ctx, spec.Name, what, func(ctx context.Context) (*ekstypes.Update, error) {
			out, err := c.EKS.UpdateClusterVersion(ctx, &eks.UpdateClusterVersionInput{Name: aws.String(spec.Name), Version: aws.String(spec.KubernetesVersion)})
			if err != nil {
				return nil, err
			}
			return out.Update, nil
		})
		if err != nil {
			return err
		}
	}
	if !sameAccess(spec.Endpoint, have.Access) {
		err := c.updateCluster(ctx, spec.Name, "updating endpoint access of EKS cluster "+spec.Name, func(ctx context.Context) (*ekstypes.Update, error) {
			out, err := c.EKS.UpdateClusterConfig(ctx, &eks.UpdateClusterConfigInput{Name: aws.String(spec.Name), ResourcesVpcConfig: &ekstypes.VpcConfigRequest{
				EndpointPublicAccess: aws.Bool(spec.Endpoint.Public), EndpointPrivateAccess: aws.Bool(spec.Endpoint.Private), PublicAccessCidrs: publicCIDRs(spec.Endpoint),
			}})
			if err != nil {
				return nil, err
			}
			return out.Update, nil
		})
		if err != nil {
			return err
		}
	}
	return c.syncEKSTags(ctx, have.ARN, have.Tags, c.tagSet(spec.Name, spec.Tags, "cluster"))
}

// updateCluster runs one update of the cluster (call, repeated while EKS
// is busy with another), waits for it by its id and then for the cluster
// to be ACTIVE again. what says what the update does, for logs and errors.
func (c *Clients) updateCluster(ctx context.Context, name, what string, call func(context.Context) (*ekstypes.Update, error)) error {
	var u *ekstypes.Update
	err := c.whileInUse(ctx, what, func(ctx context.Context) (err error) {
		u, err = call(ctx)
		return err
	}, func(ctx context.Context) error { return c.waitEKSClusterActive(ctx, name) })
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if err := c.waitUpdate(ctx, updateTarget{cluster: name}, u); err != nil {
		return err
	}
	return c.waitEKSClusterActive(ctx, name)
}

func sameAccess(want, have EndpointAccess) bool {
	if want.Public != have.Public || want.Private != have.Private {
		return false
	}
	if !want.Public {
		return true
	}
	return strings.Join(want.PublicCIDRs, ",") == strings.Join(have.PublicCIDRs, ",")
}

// syncEKSTags turns the tags of an EKS cluster or node group into want.
func (c *Clients) syncEKSTags(ctx context.Context, arn string, have, want map[string]string) error {
	set, remove := tagDiff(have, want)
	if len(set) > 0 {
		if _, err := c.EKS.TagResource(ctx, &eks.TagResourceInput{ResourceArn: aws.String(arn), Tags: set}); err != nil {
			return fmt.Errorf("tagging %s: %w", arn, err)
		}
	}
	if len(remove) > 0 {
		if _, err := c.EKS.UntagResource(ctx, &eks.UntagResourceInput{ResourceArn: aws.String(arn), TagKeys: remove}); err != nil {
			return fmt.Errorf("untagging %s: %w", arn, err)
		}
	}
	return nil
}
