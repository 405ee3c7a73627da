package awsinfra

import (
	"context"
	"fmt"
	"slices"
	"sort"

	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
)

// CreateCluster brings up the whole cluster: network, IAM roles and the
// model bucket in parallel; then, side by side, the model file system
// (security group, FSx for Lustre, S3 association), the VPC's S3 gateway
// endpoint and the control plane followed by the access entries, node
// groups and add-ons; last, the file system admits the cluster security
// group EKS made. Every step finds and adopts what an earlier failed
// create left, so calling it again after a failure converges without
// deleting or duplicating anything.
func (c *Clients) CreateCluster(ctx context.Context, spec ClusterSpec) (*Cluster, error) {
	if err := checkComputeModes(spec); err != nil {
		return nil, err
	}
	if err := c.resolveReservation(ctx, &spec.GPU); err != nil {
		return nil, err
	}
	var net Network
	var roles Roles
	var admin string
	err := parallel(
		func() (err error) { net, err = c.networkFor(ctx, spec); return err },
		func() (err error) { roles, err = c.ensureRoles(ctx, spec); return err },
		func() error { return c.ensureModelBucket(ctx, spec) },
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
	var storageSubnet string
	if spec.Storage != nil {
		if _, storageSubnet, err = c.storageZone(ctx, spec.Storage.AvailabilityZone, net.PrivateSubnetIDs); err != nil {
			return nil, err
		}
	}
	err = parallel(
		func() error {
			if spec.Storage == nil {
				return nil
			}
			return c.ensureStorage(ctx, spec, net.VPCID, storageSubnet)
		},
		func() error {
			if spec.ModelBucket == nil {
				return nil
			}
			return c.ensureGatewayEndpoint(ctx, spec, net.VPCID, net.PrivateSubnetIDs)
		},
		func() error {
			if err := c.ensureEKSCluster(ctx, spec, net, roles); err != nil {
				return err
			}
			return c.ensureClusterContents(ctx, spec, admin, net.PrivateSubnetIDs, storageSubnet, roles.NodeRoleARN)
		},
	)
	if err != nil {
		return nil, err
	}
	if spec.Storage != nil {
		cl, err := c.findEKSClusterByName(ctx, spec.Name)
		if err != nil {
			return nil, err
		}
		if err := c.admitCluster(ctx, spec.Name, clusterFrom(cl).ClusterSecurityGroupID); err != nil {
			return nil, err
		}
	}
	return c.findClusterOf(ctx, spec)
}

// findClusterOf reads back the cluster of spec, with its model bucket.
func (c *Clients) findClusterOf(ctx context.Context, spec ClusterSpec) (*Cluster, error) {
	cl, err := c.FindClusterByName(ctx, spec.Name, spec.GPU.Name, spec.System.Name)
	if err != nil || cl == nil {
		return cl, err
	}
	cl.ModelBucket, err = c.findModelBucketOf(ctx, spec, cl.Network.VPCID)
	return cl, err
}

// ensureClusterContents creates what lives in an ACTIVE control plane: the
// access entries, the node groups (with Karpenter or EKS Auto Mode, the
// system one alone, and Karpenter's AWS parts or Auto Mode's node role and
// its access entry) and the add-ons that run before nodes
// (networking, pod identity), then the add-ons that need nodes to schedule on.
func (c *Clients) ensureClusterContents(ctx context.Context, spec ClusterSpec, admin string, private []string, storageSubnet, nodeRoleARN string) error {
	jobs := []func() error{
		func() error { return c.ensureAccessEntries(ctx, spec, nil) },
		func() error { return c.ensureAddons(ctx, spec, addonsBeforeNodes) },
	}
	if !spec.BootstrapCreatorAdmin {
		jobs = append(jobs, func() error { return c.ensureAdminAccessEntry(ctx, spec, admin) })
	}
	groups := []NodeGroupSpec{spec.GPU, spec.System}
	if spec.Karpenter != nil {
		groups = []NodeGroupSpec{spec.System}
		jobs = append(jobs, func() error { return c.ensureKarpenter(ctx, spec) })
	}
	if spec.AutoMode {
		groups = []NodeGroupSpec{spec.System}
		jobs = append(jobs, func() error { return c.ensureAutoModeNode(ctx, spec) })
	}
	for _, ng := range groups {
		jobs = append(jobs, func() error {
			subnets, err := c.reservationSubnets(ctx, ng, nodeSubnets(spec, ng, private, storageSubnet))
			if err != nil {
				return err
			}
			return c.ensureNodeGroup(ctx, spec, ng, subnets, nodeRoleARN)
		})
	}
	if err := parallel(jobs...); err != nil {
		return err
	}
	return c.ensureAddons(ctx, spec, addonsAfterNodes)
}

// nodeSubnets are the subnets of a node group: the file system's alone when
// the group is colocated with it (no cross-zone Lustre traffic), else every
// private subnet.
func nodeSubnets(spec ClusterSpec, ng NodeGroupSpec, private []string, storageSubnet string) []string {
	if spec.Storage != nil && ng.ColocateWithStorage && storageSubnet != "" {
		return []string{storageSubnet}
	}
	return private
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
		func() (err error) { out.Storage, err = c.findStorageState(ctx, name); return err },
		func() (err error) { out.AccessEntries, err = c.findAccessEntries(ctx, name); return err },
		func() (err error) { out.Addons, err = c.findAddons(ctx, name); return err },
		func() (err error) { out.Karpenter, err = c.findKarpenter(ctx, name); return err },
		func() (err error) { out.AutoMode, err = c.findAutoMode(ctx, name, cl); return err },
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
// endpoint access, node group scaling, labels and taints, the file system's
// capacity, throughput and S3 link, access entries, add-ons, and tags on
// every part. A node group whose instance type, AMI type, capacity type,
// disk size or subnets change is replaced alone (deleted, then created under
// its name), never the cluster, the network or the file system. A part
// deleted behind Terraform's back is created again. Switching to Karpenter
// deletes the GPU node group beside making Karpenter's parts; switching
// back deletes Karpenter's parts once the GPU node group is there.
// Switching to EKS Auto Mode turns it on (cluster role policies first),
// then deletes the GPU node group beside making the node role and its
// access entry; switching back turns it off once the GPU node group is
// there, then deletes the node role and the cluster role's Auto Mode policies.
func (c *Clients) UpdateCluster(ctx context.Context, spec ClusterSpec) (*Cluster, error) {
	if err := checkComputeModes(spec); err != nil {
		return nil, err
	}
	if err := c.resolveReservation(ctx, &spec.GPU); err != nil {
		return nil, err
	}
	have, err := c.FindClusterByName(ctx, spec.Name, spec.GPU.Name, spec.System.Name)
	if err != nil {
		return nil, err
	}
	if have == nil {
		return nil, fmt.Errorf("EKS cluster %s no longer exists; run terraform apply again to create it", spec.Name)
	}
	// First: a bucket that may not be deleted stops the apply before anything changed.
	if err := c.updateModelBucket(ctx, spec, have.Network); err != nil {
		return nil, err
	}
	if err := c.updateEKSCluster(ctx, spec, have); err != nil {
		return nil, err
	}
	if spec.AutoMode {
		// Before the GPU node group goes: Auto Mode takes over its nodes.
		if err := c.syncAutoMode(ctx, spec, have.AutoMode != nil); err != nil {
			return nil, err
		}
	}
	if err := c.updateStorage(ctx, spec, have.Storage, have.Network.VPCID, have.Network.PrivateSubnetIDs, have.ClusterSecurityGroupID); err != nil {
		return nil, err
	}
	var storageSubnet string
	if spec.Storage != nil {
		st, err := c.findStorageState(ctx, spec.Name)
		if err != nil {
			return nil, err
		}
		if st != nil {
			storageSubnet = st.SubnetID
		}
	}
	roleARN, err := c.nodeRoleOf(ctx, spec.Name, have)
	if err != nil {
		return nil, err
	}
	jobs := []func() error{
		func() error { return c.syncNetworkTags(ctx, spec) },
		func() error { return c.syncRoleTags(ctx, spec) },
		func() error { return c.syncStorageTags(ctx, spec) },
		func() error { return c.ensureAccessEntries(ctx, spec, have.AccessEntries) },
		func() error { return c.ensureAddons(ctx, spec, addonsBeforeNodes) },
	}
	if spec.Karpenter != nil {
		jobs = append(jobs, func() error { return c.ensureKarpenter(ctx, spec) })
	}
	if spec.AutoMode {
		jobs = append(jobs, func() error { return c.ensureAutoModeNode(ctx, spec) })
	}
	for _, pair := range []struct {
		want NodeGroupSpec
		have *NodeGroup
		// launcher launches these nodes instead: Karpenter or EKS Auto Mode.
		launcher string
	}{{spec.GPU, have.GPU, gpuLauncher(spec)}, {spec.System, have.System, ""}} {
		jobs = append(jobs, func() error {
			if pair.launcher != "" {
				if pair.have == nil {
					return nil
				}
				c.logf(ctx, "deleting the GPU node group: "+pair.launcher+" launches the GPU nodes",
					map[string]any{"node_group": pair.want.Name})
				return c.deleteNodeGroup(ctx, spec.Name, pair.want.Name)
			}
			subnets, err := c.reservationSubnets(ctx, pair.want, nodeSubnets(spec, pair.want, have.Network.PrivateSubnetIDs, storageSubnet))
			if err != nil {
				return err
			}
			placed := subnets
			if spec.Storage == nil && pair.want.Reservation == nil {
				placed = nil
			}
			switch {
			case pair.have == nil:
			case pair.have.replacedBy(pair.want, placed):
				c.logf(ctx, "replacing EKS node group: EKS cannot change its instance type, AMI type, capacity type, disk size, subnets or launch template in place",
					map[string]any{"node_group": pair.want.Name})
				if err := c.deleteNodeGroup(ctx, spec.Name, pair.want.Name); err != nil {
					return err
				}
			default:
				return c.updateNodeGroup(ctx, spec, pair.want, pair.have)
			}
			return c.ensureNodeGroup(ctx, spec, pair.want, subnets, roleARN)
		})
	}
	if err := parallel(jobs...); err != nil {
		return nil, err
	}
	if spec.Karpenter == nil && have.Karpenter != nil {
		c.logf(ctx, "deleting Karpenter's AWS parts: the GPU node group launches the GPU nodes again", map[string]any{"cluster": spec.Name})
		if err := c.deleteKarpenter(ctx, spec.Name); err != nil {
			return nil, err
		}
	}
	if !spec.AutoMode {
		// Also when Auto Mode is off already: what an interrupted switch left.
		if err := c.syncAutoMode(ctx, spec, have.AutoMode != nil); err != nil {
			return nil, err
		}
	}
	if err := c.ensureAddons(ctx, spec, addonsAfterNodes); err != nil {
		return nil, err
	}
	if err := c.removeAddons(ctx, spec, have.Addons); err != nil {
		return nil, err
	}
	return c.findClusterOf(ctx, spec)
}

// gpuLauncher names what launches the GPU nodes instead of the GPU node
// group, for the log; "" for the node group.
func gpuLauncher(spec ClusterSpec) string {
	switch {
	case spec.Karpenter != nil:
		return "with compute mode karpenter, Karpenter"
	case spec.AutoMode:
		return "with EKS Auto Mode, a NodePool of Auto Mode"
	}
	return ""
}

// nodeRoleOf is the role the cluster's nodes run as: the one an existing
// node group names, else the cluster's node role by name.
func (c *Clients) nodeRoleOf(ctx context.Context, name string, have *Cluster) (string, error) {
	for _, ng := range []*NodeGroup{have.GPU, have.System} {
		if ng != nil && ng.NodeRoleARN != "" {
			return ng.NodeRoleARN, nil
		}
	}
	return c.roleARN(ctx, roleName(name, c.Config.Region, nodeRole))
}

// DeleteOptions are what a delete takes from Terraform rather than from AWS.
type DeleteOptions struct {
	// ForceDestroyBucket empties the model bucket the cluster created
	// before deleting it (model_bucket.force_destroy).
	ForceDestroyBucket bool
}

// DeleteCluster deletes the cluster with DeleteOptions' zero values: a model
// bucket the cluster created is deleted only when empty.
func (c *Clients) DeleteCluster(ctx context.Context, name string) error {
	return c.DeleteClusterWith(ctx, name, DeleteOptions{})
}

// CheckModelBucketDeletable fails, naming model_bucket.force_destroy and
// the object count, when the bucket the cluster created holds objects and
// force is off: a destroy checks it before it deletes anything.
func (c *Clients) CheckModelBucketDeletable(ctx context.Context, name string, force bool) error {
	_, err := c.checkCreatedBucketDeletable(ctx, name, force)
	return err
}

// DeleteClusterWith removes everything owned by the cluster in dependency
// order: its S3 gateway endpoint, node groups and file system, the control
// plane (its access entries, Pod Identity associations and add-ons go with
// it, and EKS Auto Mode's instances, which are waited for), Karpenter's
// queue, rules and what Karpenter launched, then IAM
// roles, the network and the model bucket it created (never a bucket given
// by name).
// Parts are found by name and owner tag, not from state, so parts already
// gone are skipped and parts a failed create left behind are removed too.
// Node groups someone else added block the delete with their names, and so
// does, before anything is deleted, a created bucket holding objects
// without opts.ForceDestroyBucket.
func (c *Clients) DeleteClusterWith(ctx context.Context, name string, opts DeleteOptions) error {
	if err := c.CheckModelBucketDeletable(ctx, name, opts.ForceDestroyBucket); err != nil {
		return err
	}
	cl, err := c.findEKSClusterByName(ctx, name)
	if err != nil {
		return err
	}
	// Before the route tables and the VPC, which it is part of.
	if err := c.deleteGatewayEndpoint(ctx, name); err != nil {
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
		// The file system goes first and beside the node groups: its
		// security group names the cluster security group, which EKS deletes
		// with the control plane.
		jobs := []func() error{func() error { return c.deleteStorage(ctx, name) }}
		for _, ng := range owned {
			jobs = append(jobs, func() error { return c.deleteNodeGroup(ctx, name, ng) })
		}
		if err := parallel(jobs...); err != nil {
			return err
		}
		if err := c.deleteEKSCluster(ctx, name, cl.Status); err != nil {
			return err
		}
	} else if err := c.deleteStorage(ctx, name); err != nil {
		return err
	}
	// After the control plane, so no Karpenter launches anything more; its
	// instances before the network, whose subnets they are in.
	if err := c.deleteKarpenterParts(ctx, name); err != nil {
		return err
	}
	if err := c.waitAutoModeNodesGone(ctx, name); err != nil {
		return err
	}
	return parallel(
		func() error { return c.deleteRoles(ctx, name) },
		func() error { return c.deleteNetwork(ctx, name) },
		func() error { return c.deleteLaunchTemplates(ctx, name) },
		func() error { return c.deleteCreatedBucket(ctx, name, opts.ForceDestroyBucket) },
	)
}
