package awsinfra

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
)

// EKS Auto Mode launches the GPU nodes from a NodePool and the cluster's own
// NodeClass; no built-in node pools, so EKS makes no node role, access entry
// or NodeClass of its own (EKS user guide, "Create a Node Class for Amazon
// EKS": a custom node class needs an access entry of type EC2 with the
// AmazonEKSAutoNodePolicy access policy). What the AWS side holds:
//   - the cluster's compute, block storage and load balancing capabilities,
//     which EKS takes only all on or all off ("Enable EKS Auto Mode on an
//     existing cluster"), without a node role while there are no node pools
//     (EKS refuses one: "When Compute Config nodeRoleArn is not null or
//     empty, nodePool value(s) must be provided");
//   - the Auto Mode managed policies on the cluster role, whose trust
//     policy allows sts:TagSession ("Amazon EKS Auto Mode cluster IAM role");
//   - the node role ("Amazon EKS Auto Mode node IAM role") and its access entry.
var (
	autoModeNodeRole = roleSpec{suffix: "-auto-node", service: "ec2.amazonaws.com",
		policies: []string{"AmazonEKSWorkerNodeMinimalPolicy", "AmazonEC2ContainerRegistryPullOnly"}}
	// autoModeClusterPolicies go on the cluster role beside AmazonEKSClusterPolicy.
	autoModeClusterPolicies = []string{"AmazonEKSComputePolicy", "AmazonEKSBlockStoragePolicy", "AmazonEKSLoadBalancingPolicy", "AmazonEKSNetworkingPolicy"}
	// autoModeEntry is the node role's access entry.
	autoModeEntry = nodeEntry{kind: "EC2", part: "auto-mode-node-access-entry", who: "EKS Auto Mode's node role"}
)

// Tags EKS Auto Mode puts on the instances it launches (the conditions of
// the AmazonEKSComputePolicy managed policy on RunInstances and CreateFleet).
const (
	autoModeNodePoolTag  = "eks:kubernetes-node-pool-name"
	autoModeNodeClassTag = "eks:kubernetes-node-class-name"
)

// autoNodePolicy is the EKS access policy of the node role's entry, in the
// caller's partition.
func autoNodePolicy(partition string) string {
	return "arn:" + partition + ":eks::aws:cluster-access-policy/AmazonEKSAutoNodePolicy"
}

// clusterRoleOf is the cluster role with the Auto Mode policies when the
// spec asks for Auto Mode.
func clusterRoleOf(spec ClusterSpec) roleSpec {
	if !spec.AutoMode {
		return clusterRole
	}
	rs := clusterRole
	rs.policies = append(append([]string{}, clusterRole.policies...), autoModeClusterPolicies...)
	return rs
}

// checkComputeModes refuses a spec with two launchers of the GPU nodes.
func checkComputeModes(spec ClusterSpec) error {
	if spec.Karpenter != nil && spec.AutoMode {
		return fmt.Errorf("cluster %s asks for both Karpenter and EKS Auto Mode: both would launch the GPU nodes; choose one compute mode", spec.Name)
	}
	return nil
}

// autoModeOn reports whether the cluster's compute capability is on.
func autoModeOn(cl *ekstypes.Cluster) bool {
	return cl != nil && cl.ComputeConfig != nil && aws.ToBool(cl.ComputeConfig.Enabled)
}

// findAutoMode reads the cluster's Auto Mode from its description (cl) and,
// when it is on, the node role: one GetRole.
func (c *Clients) findAutoMode(ctx context.Context, cluster string, cl *ekstypes.Cluster) (*AutoMode, error) {
	if !autoModeOn(cl) {
		return nil, nil
	}
	name := roleName(cluster, c.Config.Region, autoModeNodeRole)
	arn, err := c.ownedRoleARN(ctx, cluster, name)
	if err != nil || arn == "" {
		return &AutoMode{}, err
	}
	return &AutoMode{NodeRoleName: name, NodeRoleARN: arn}, nil
}

// ensureClusterRole makes or adopts the cluster role; with Auto Mode it
// also attaches the Auto Mode policies and makes sure the trust policy
// allows sts:TagSession, which roles made by earlier releases did not.
func (c *Clients) ensureClusterRole(ctx context.Context, spec ClusterSpec) (string, error) {
	arn, err := c.ensureRole(ctx, spec, clusterRoleOf(spec))
	if err != nil || !spec.AutoMode {
		return arn, err
	}
	name := roleName(spec.Name, c.Config.Region, clusterRole)
	got, err := c.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(name)})
	if err != nil {
		return "", fmt.Errorf("finding IAM role %s: %w", name, err)
	}
	// IAM answers the document URL-encoded.
	doc, err := url.QueryUnescape(aws.ToString(got.Role.AssumeRolePolicyDocument))
	if err != nil {
		doc = aws.ToString(got.Role.AssumeRolePolicyDocument)
	}
	if strings.Contains(doc, "sts:TagSession") {
		return arn, nil
	}
	c.logf(ctx, "allowing sts:TagSession in the cluster role's trust policy: EKS Auto Mode tags its sessions", map[string]any{"role": name})
	if _, err := c.IAM.UpdateAssumeRolePolicy(ctx, &iam.UpdateAssumeRolePolicyInput{RoleName: aws.String(name),
		PolicyDocument: aws.String(serviceTrust(clusterRole.service))}); err != nil {
		return "", fmt.Errorf("updating the trust policy of IAM role %s: %w", name, err)
	}
	return arn, nil
}

// ensureAutoModeNode makes (or adopts) the node role and its access entry
// with AmazonEKSAutoNodePolicy at cluster scope, once the control plane is
// ACTIVE.
func (c *Clients) ensureAutoModeNode(ctx context.Context, spec ClusterSpec) error {
	nodeARN, err := c.ensureRole(ctx, spec, autoModeNodeRole)
	if err != nil {
		return err
	}
	if err := c.ensureNodeEntry(ctx, spec, nodeARN, autoModeEntry); err != nil {
		return err
	}
	partition, err := c.callerPartition(ctx)
	if err != nil {
		return err
	}
	policy := autoNodePolicy(partition)
	// Associating an associated policy again is a no-op.
	if _, err := c.EKS.AssociateAccessPolicy(ctx, &eks.AssociateAccessPolicyInput{ClusterName: aws.String(spec.Name), PrincipalArn: aws.String(nodeARN),
		PolicyArn: aws.String(policy), AccessScope: &ekstypes.AccessScope{Type: ekstypes.AccessScopeTypeCluster}}); err != nil {
		return fmt.Errorf("associating %s with the access entry of EKS Auto Mode's node role on cluster %s: %w", policy, spec.Name, err)
	}
	return nil
}

// autoModeRequest is the three capabilities EKS Auto Mode turns on and off together.
type autoModeRequest struct {
	compute *ekstypes.ComputeConfigRequest
	storage *ekstypes.StorageConfigRequest
	network *ekstypes.KubernetesNetworkConfigRequest
}

// autoModeConfig is the request for on or off, without node pools and so
// without a node role.
func autoModeConfig(on bool) autoModeRequest {
	return autoModeRequest{
		compute: &ekstypes.ComputeConfigRequest{Enabled: aws.Bool(on)},
		storage: &ekstypes.StorageConfigRequest{BlockStorage: &ekstypes.BlockStorage{Enabled: aws.Bool(on)}},
		network: &ekstypes.KubernetesNetworkConfigRequest{ElasticLoadBalancing: &ekstypes.ElasticLoadBalancing{Enabled: aws.Bool(on)}},
	}
}

// setAutoMode turns the cluster's Auto Mode on or off and waits for the
// update. Off, EKS terminates the instances Auto Mode runs (EKS user
// guide, "Disable EKS Auto Mode").
func (c *Clients) setAutoMode(ctx context.Context, cluster string, on bool) error {
	what := "turning EKS Auto Mode off for EKS cluster " + cluster
	if on {
		what = "turning EKS Auto Mode on for EKS cluster " + cluster
	}
	r := autoModeConfig(on)
	return c.updateCluster(ctx, cluster, what, func(ctx context.Context) (*ekstypes.Update, error) {
		out, err := c.EKS.UpdateClusterConfig(ctx, &eks.UpdateClusterConfigInput{Name: aws.String(cluster), ComputeConfig: r.compute,
			StorageConfig: r.storage, KubernetesNetworkConfig: r.network})
		if err != nil {
			return nil, err
		}
		return out.Update, nil
	})
}

// syncAutoMode brings the cluster's Auto Mode (on now) to the spec's: on,
// the cluster role's policies and trust first, then the capabilities; off,
// the capabilities first, then what deleteAutoModeParts removes.
func (c *Clients) syncAutoMode(ctx context.Context, spec ClusterSpec, on bool) error {
	switch {
	case spec.AutoMode:
		if _, err := c.ensureClusterRole(ctx, spec); err != nil {
			return err
		}
		if on {
			return nil
		}
		c.logf(ctx, "turning EKS Auto Mode on: it launches the GPU nodes", map[string]any{"cluster": spec.Name})
		return c.setAutoMode(ctx, spec.Name, true)
	case on:
		c.logf(ctx, "turning EKS Auto Mode off: the GPU node group launches the GPU nodes again", map[string]any{"cluster": spec.Name})
		if err := c.setAutoMode(ctx, spec.Name, false); err != nil {
			return err
		}
	}
	return c.deleteAutoModeParts(ctx, spec.Name)
}

// deleteAutoModeParts removes what Auto Mode needed on a cluster that keeps
// running without it: the node role's access entry and the node role, and
// the Auto Mode policies of the cluster role. Found by name, so a part
// already gone (or never made) costs one GetRole.
func (c *Clients) deleteAutoModeParts(ctx context.Context, cluster string) error {
	name := roleName(cluster, c.Config.Region, autoModeNodeRole)
	nodeARN, err := c.ownedRoleARN(ctx, cluster, name)
	if err != nil || nodeARN == "" {
		return err
	}
	if err := c.deleteNodeEntry(ctx, cluster, nodeARN, autoModeEntry); err != nil {
		return err
	}
	if err := c.deleteRole(ctx, cluster, name); err != nil {
		return err
	}
	partition, err := c.callerPartition(ctx)
	if err != nil {
		return err
	}
	role := roleName(cluster, c.Config.Region, clusterRole)
	for _, p := range autoModeClusterPolicies {
		if _, err := c.IAM.DetachRolePolicy(ctx, &iam.DetachRolePolicyInput{RoleName: aws.String(role),
			PolicyArn: aws.String("arn:" + partition + ":iam::aws:policy/" + p)}); err != nil && !isNotFound(err) {
			return fmt.Errorf("detaching %s from IAM role %s: %w", p, role, err)
		}
	}
	return nil
}

// autoModeNodes are the instances in states EKS Auto Mode launched for the
// cluster: the cluster name tag with a node pool tag (Karpenter's carry
// the first alone).
func (c *Clients) autoModeNodes(ctx context.Context, cluster string, states ...string) ([]ec2types.Instance, error) {
	filters := []ec2types.Filter{
		{Name: aws.String("tag:" + eksClusterNameTag), Values: []string{cluster}},
		{Name: aws.String("tag-key"), Values: []string{autoModeNodePoolTag}},
		{Name: aws.String("instance-state-name"), Values: states},
	}
	return c.launchedNodes(ctx, "EKS Auto Mode's instances of "+cluster, filters, func(tags map[string]string) bool {
		_, ok := tags[autoModeNodePoolTag]
		return ok && tags[eksClusterNameTag] == cluster
	})
}

// waitAutoModeNodesGone waits for the instances of a deleted cluster's
// Auto Mode to go: EKS deletes them with the cluster (EKS user guide,
// "Delete a cluster", considerations for EKS Auto Mode), and they are
// managed instances llmd may not terminate itself ("Learn about Amazon EKS
// Auto Mode Managed instances").
func (c *Clients) waitAutoModeNodesGone(ctx context.Context, cluster string) error {
	return c.waitNodesGone(ctx, "EKS Auto Mode's instances of "+cluster, func(ctx context.Context, states ...string) ([]ec2types.Instance, error) {
		return c.autoModeNodes(ctx, cluster, states...)
	})
}

// ownedAutoModeParts are the instances Auto Mode launched for the cluster,
// which carry its tags rather than the owner tag.
func (c *Clients) ownedAutoModeParts(ctx context.Context, owner string) ([]OwnedPart, error) {
	return ownedNodeParts(ctx, "ec2 instance (auto mode)", func(ctx context.Context, states ...string) ([]ec2types.Instance, error) {
		return c.autoModeNodes(ctx, owner, states...)
	})
}
