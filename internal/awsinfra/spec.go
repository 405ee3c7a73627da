package awsinfra

import (
	"slices"
	"time"
)

// ClusterSpec is the desired state of one inference cluster: network, IAM,
// the EKS control plane and its node groups.
type ClusterSpec struct {
	// Name is the EKS cluster name; every part's name and owner tag derive from it.
	Name              string
	KubernetesVersion string
	Network           NetworkSpec
	Endpoint          EndpointAccess
	// BootstrapCreatorAdmin grants the creator admin through EKS's bootstrap
	// instead of an explicit access entry; the two are exclusive.
	BootstrapCreatorAdmin bool
	// GPU is the GPU managed node group; with Karpenter or AutoMode set it
	// is not made (an existing one is deleted) and its settings feed the
	// NodePool.
	GPU    NodeGroupSpec
	System NodeGroupSpec
	// Karpenter asks for Karpenter's AWS parts (its controller and node
	// roles, the node role's access entry, the controller's Pod Identity
	// association, the interruption queue and its EventBridge rules) in
	// place of the GPU managed node group; nil for the node group.
	Karpenter *KarpenterSpec
	// AutoMode turns on EKS Auto Mode for the GPU nodes in place of the GPU
	// managed node group (an existing one is deleted, as with Karpenter):
	// the cluster's compute, block storage and load balancing capabilities,
	// the Auto Mode policies on the cluster role, and a node role for the
	// cluster's own NodeClass with its access entry. No built-in node pools:
	// the system node group stays. Exclusive with Karpenter.
	AutoMode bool
	// Storage is the FSx for Lustre file system for the weights; nil for none.
	Storage *StorageSpec
	// ModelBucket is the S3 bucket the pods stream the weights from, with
	// an S3 gateway endpoint in the VPC; nil for none.
	ModelBucket *ModelBucketSpec
	// ForceDestroyBucket lets an apply empty the bucket the cluster created
	// when it deletes it (model_bucket off, or a bucket given by name
	// instead); without it a bucket holding objects stops the apply.
	ForceDestroyBucket bool
	// AccessEntries grant other principals (CI roles, people) access policies.
	AccessEntries []AccessEntrySpec
	// Addons are the EKS managed add-ons to install; disabled ones are absent.
	Addons []AddonSpec
	// Tags are the resource's own tags, applied beneath the owner tag and over the default tags.
	Tags map[string]string
}

// NetworkSpec either creates a VPC (VPCID empty) or takes an existing one.
type NetworkSpec struct {
	// VPCCIDR is the CIDR of a VPC to create, e.g. 10.0.0.0/16.
	VPCCIDR string
	// AvailabilityZones for the created subnets; empty picks zones that offer the node instance types.
	AvailabilityZones []string
	// VPCID and SubnetIDs name an existing network; nothing of it is created or deleted.
	VPCID     string
	SubnetIDs []string
}

// Creates reports whether the network is the cluster's own.
func (n NetworkSpec) Creates() bool { return n.VPCID == "" }

// EndpointAccess is who can reach the Kubernetes API endpoint.
type EndpointAccess struct {
	Public      bool
	Private     bool
	PublicCIDRs []string
}

// NodeGroupSpec is one managed node group.
type NodeGroupSpec struct {
	// Name is the node group's name within the cluster ("gpu", "system").
	Name         string
	InstanceType string
	AMIType      string
	CapacityType string
	DiskSize     int32
	DesiredSize  int32
	MinSize      int32
	MaxSize      int32
	Labels       map[string]string
	Taints       []Taint
	// ColocateWithStorage places the nodes in the file system's zone only.
	ColocateWithStorage bool
	// Reservation is the capacity reservation the nodes run in first; nil
	// for none. Only a node group on a reservation has a launch template.
	Reservation *CapacityReservationSpec
}

// replacedBy reports whether going to want needs a new node group: EKS
// cannot change a node group's instance type, AMI type, capacity type, disk
// size or subnets in place. subnets is nil where they do not matter (no file
// system to be near): a node group is never moved for nothing.
func (have NodeGroup) replacedBy(want NodeGroupSpec, subnets []string) bool {
	return have.InstanceType != want.InstanceType || have.AMIType != want.AMIType || have.CapacityType != want.CapacityType ||
		have.DiskSize != want.DiskSize || (subnets != nil && len(have.Subnets) > 0 && !sameStrings(have.Subnets, subnets)) ||
		!sameReservation(have.Reservation, want.Reservation)
}

// sameReservation: the launch template a node group launches with is set
// when the node group is made; another reservation or fallback is a new
// node group.
func sameReservation(have, want *CapacityReservationSpec) bool {
	if have == nil || want == nil {
		return have == nil && want == nil
	}
	return have.ID == want.ID && have.Fallback == want.Fallback
}

func sameStrings(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// Taint is a Kubernetes taint in EKS's spelling (effect NO_SCHEDULE, NO_EXECUTE, PREFER_NO_SCHEDULE).
type Taint struct {
	Key    string
	Value  string
	Effect string
}

// KarpenterSpec is where Karpenter's controller runs in the cluster: the
// Pod Identity association binds its role to this service account.
type KarpenterSpec struct {
	Namespace      string
	ServiceAccount string
}

// Karpenter is what AWS holds of a cluster's Karpenter: what its Helm
// values and EC2NodeClass name.
type Karpenter struct {
	// ControllerRoleARN is the role the controller's pods get through Pod Identity.
	ControllerRoleARN string
	// NodeRoleName is the role Karpenter's nodes run as (the EC2NodeClass's
	// spec.role); NodeRoleARN its ARN, which has an EC2_LINUX access entry.
	NodeRoleName string
	NodeRoleARN  string
	// InterruptionQueue is the SQS queue's name (the chart's
	// settings.interruptionQueue) the EventBridge rules feed.
	InterruptionQueue string
}

// AutoMode is what AWS holds of a cluster's EKS Auto Mode: the role the
// cluster's own eks.amazonaws.com NodeClass names.
type AutoMode struct {
	// NodeRoleName is the NodeClass's spec.role, NodeRoleARN its ARN (which
	// has an access entry of type EC2 with AmazonEKSAutoNodePolicy); both
	// are empty while Auto Mode is on but the role is missing.
	NodeRoleName string
	NodeRoleARN  string
}

// Cluster is what AWS reports about an inference cluster.
type Cluster struct {
	Name                   string
	ARN                    string
	Status                 string
	KubernetesVersion      string
	Endpoint               string
	CertificateAuthority   string
	OIDCIssuer             string
	ClusterSecurityGroupID string
	SecurityGroupIDs       []string
	Access                 EndpointAccess
	// BootstrapCreatorAdmin is nil when the API does not report the access configuration.
	BootstrapCreatorAdmin *bool
	Network               Network
	// GPU and System are nil when the node group does not exist.
	GPU    *NodeGroup
	System *NodeGroup
	// Karpenter is nil when the cluster has none of Karpenter's AWS parts.
	Karpenter *Karpenter
	// AutoMode is nil when EKS Auto Mode's compute capability is off.
	AutoMode *AutoMode
	// Storage is nil when the cluster has no file system.
	Storage *Storage
	// ModelBucket is nil when the cluster has no model bucket.
	ModelBucket   *ModelBucket
	AccessEntries []AccessEntry
	Addons        []Addon
	// Tags are every tag on the cluster, bookkeeping included.
	Tags      map[string]string
	CreatedAt time.Time
}

// Network is the VPC and subnets a cluster runs in.
type Network struct {
	VPCID   string
	VPCCIDR string
	// Owned reports whether the cluster created the VPC (it carries the owner tag).
	Owned             bool
	AvailabilityZones []string
	// PrivateSubnetIDs are where nodes run: the given subnets for an existing network.
	PrivateSubnetIDs []string
	PublicSubnetIDs  []string
}

// NodeGroup is what AWS reports about a managed node group.
type NodeGroup struct {
	NodeGroupSpec
	ARN            string
	Status         string
	Version        string
	ReleaseVersion string
	NodeRoleARN    string
	Subnets        []string
	Tags           map[string]string
}
