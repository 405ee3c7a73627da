package awsinfra

import (
	"context"
	"fmt"
	"slices"
	"sort"

	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
)

// CreateCluster brings up the whole cluster: network and IAM roles in
// parallel, then the control plane, then the admin access entry and both node
// groups in parallel. Every step finds and adopts what an earlier failed
// create left, so calling it again after a failure converges without
// deleting or duplicating anything.
func (c *Clients) CreateCluster(ctx context.Context, spec ClusterSpec) (*Cluster, error) {
	var net Network
	var roles Roles
	var admin string
	err := parallel(
		func() (err error) { net, err = c.networkFor(ctx, spec); return err },
		func() (err error) { roles, err = c.ensureRoles(ctx, spec); return err },
		func() error {
			if spec.BootstrapCreatorAdmin {
				return nil
			}
			id, err := FindCallerIdentity(ctx, c)
			admin = id.PrincipalARN
			return err
		},
	)
	if err != nil {
		return nil, err
	}
	if err := c.ensureEKSCluster(ctx, spec, net, roles); err != nil {
		return nil, err
	}
	jobs := []func() error{}
	if !spec.BootstrapCreatorAdmin {
		jobs = append(jobs, func() error { return c.ensureAdminAccessEntry(ctx, spec, admin) })
	}
	for _, ng := range []NodeGroupSpec{spec.GPU, spec.System} {
		jobs = append(jobs, func() error { return c.ensureNodeGroup(ctx, spec, ng, net.PrivateSubnetIDs, roles.NodeRoleARN) })
	}
	if err := parallel(jobs...); err != nil {
		return nil, err
	}
	return c.FindClusterByName(ctx, spec.Name, spec.GPU.Name, spec.System.Name)
}

// networkFor creates the cluster's own network, or describes the given one.
func (c *Clients) networkFor(ctx context.Context, spec ClusterSpec) (Network, error) {
	if !spec.Network.Creates() {
		return c.existingNetwork(ctx, spec.Network)
	}
	azs := spec.Network.AvailabilityZones
	if len(azs) == 0 {
		var err error
		if azs, err = c.DefaultZones(ctx, spec.GPU.InstanceType, spec.System.InstanceType); err != nil {
			return Network{}, err
		}
	}
	return c.ensureNetwork(ctx, spec, azs)
}

// FindClusterByName reads the cluster and its node groups (gpuName, systemName)
// back from AWS; nil without error when the cluster does not exist.
func (c *Clients) FindClusterByName(ctx context.Context, name, gpuName, systemName string) (*Cluster, error) {
	cl, err := c.findEKSClusterByName(ctx, name)
	if err != nil || cl == nil {
		return nil, err
	}
	out := clusterFrom(cl)
	var vpcID string
	var subnets []string
	if v := cl.ResourcesVpcConfig; v != nil {
		vpcID, subnets = deref(v.VpcId), v.SubnetIds
	}
	if vpcID == "" {
		// moto echoes the create request and omits the VPC id that AWS adds.
		if vpcID, err = c.vpcOf(ctx, name, subnets); err != nil {
			return nil, err
		}
	}
	err = parallel(
		func() (err error) { out.Network, err = c.findNetwork(ctx, name, vpcID, subnets); return err },
		func() (err error) { out.GPU, err = c.findNodeGroupByName(ctx, name, gpuName); return err },
		func() (err error) { out.System, err = c.findNodeGroupByName(ctx, name, systemName); return err },
	)
	return out, err
}

func clusterFrom(cl *ekstypes.Cluster) *Cluster {
	out := &Cluster{Name: deref(cl.Name), ARN: deref(cl.Arn), Status: string(cl.Status), KubernetesVersion: deref(cl.Version),
		Endpoint: deref(cl.Endpoint), Tags: cl.Tags}
	if cl.CertificateAuthority != nil {
		out.CertificateAuthority = deref(cl.CertificateAuthority.Data)
	}
	if cl.Identity != nil && cl.Identity.Oidc != nil {
		out.OIDCIssuer = deref(cl.Identity.Oidc.Issuer)
	}
	if v := cl.ResourcesVpcConfig; v != nil {
		out.ClusterSecurityGroupID = deref(v.ClusterSecurityGroupId)
		out.SecurityGroupIDs = slices.Clone(v.SecurityGroupIds)
		sort.Strings(out.SecurityGroupIDs)
		out.Access = EndpointAccess{Public: v.EndpointPublicAccess, Private: v.EndpointPrivateAccess, PublicCIDRs: v.PublicAccessCidrs}
	}
	if cl.AccessConfig != nil {
		out.BootstrapCreatorAdmin = cl.AccessConfig.BootstrapClusterCreatorAdminPermissions
	}
	if cl.CreatedAt != nil {
		out.CreatedAt = *cl.CreatedAt
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// UpdateCluster applies in place what AWS allows: Kubernetes version,
// endpoint access, node group scaling, labels and taints, and tags on every
// part. A missing node group (deleted behind Terraform's back) is recreated.
func (c *Clients) UpdateCluster(ctx context.Context, spec ClusterSpec) (*Cluster, error) {
	have, err := c.FindClusterByName(ctx, spec.Name, spec.GPU.Name, spec.System.Name)
	if err != nil {
		return nil, err
	}
	if have == nil {
		return nil, fmt.Errorf("EKS cluster %s no longer exists; run terraform apply again to create it", spec.Name)
	}
	if err := c.updateEKSCluster(ctx, spec, have); err != nil {
		return nil, err
	}
	roleARN, err := c.roleARN(ctx, spec.Name+nodeRole.suffix)
	if err != nil {
		return nil, err
	}
	jobs := []func() error{
		func() error { return c.syncNetworkTags(ctx, spec) },
		func() error { return c.syncRoleTags(ctx, spec) },
	}
	for _, pair := range []struct {
		want NodeGroupSpec
		have *NodeGroup
	}{{spec.GPU, have.GPU}, {spec.System, have.System}} {
		jobs = append(jobs, func() error {
			if pair.have == nil {
				return c.ensureNodeGroup(ctx, spec, pair.want, have.Network.PrivateSubnetIDs, roleARN)
			}
			return c.updateNodeGroup(ctx, spec, pair.want, pair.have)
		})
	}
	if err := parallel(jobs...); err != nil {
		return nil, err
	}
	return c.FindClusterByName(ctx, spec.Name, spec.GPU.Name, spec.System.Name)
}

// DeleteCluster removes everything owned by the cluster in dependency order:
// its node groups, the control plane, then IAM roles and the network. Parts
// are found by name and owner tag, not from state, so parts already gone are
// skipped and parts a failed create left behind are removed too. Node groups
// someone else added block the delete with their names.
func (c *Clients) DeleteCluster(ctx context.Context, name string) error {
	cl, err := c.findEKSClusterByName(ctx, name)
	if err != nil {
		return err
	}
	if cl != nil {
		if cl.Tags[OwnerTag] != name {
			return fmt.Errorf("EKS cluster %s is not owned by llmd (no %s tag); refusing to delete it", name, OwnerTag)
		}
		owned, foreign, err := c.nodeGroupsOf(ctx, name)
		if err != nil {
			return err
		}
		if len(foreign) > 0 {
			return fmt.Errorf("EKS cluster %s has node groups llmd did not create (%v): delete them first, then destroy again", name, foreign)
		}
		jobs := []func() error{}
		for _, ng := range owned {
			jobs = append(jobs, func() error { return c.deleteNodeGroup(ctx, name, ng) })
		}
		if err := parallel(jobs...); err != nil {
			return err
		}
		if err := c.deleteEKSCluster(ctx, name, cl.Status); err != nil {
			return err
		}
	}
	return parallel(
		func() error { return c.deleteRoles(ctx, name) },
		func() error { return c.deleteNetwork(ctx, name) },
	)
}
