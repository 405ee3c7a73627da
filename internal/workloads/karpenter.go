package workloads

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
)

// Karpenter's API groups and the kinds llmd applies.
const (
	KarpenterGroup    = "karpenter.sh"
	KarpenterAWSGroup = "karpenter.k8s.aws"
	KarpenterVersion  = "v1"
	NodePoolKind      = "NodePool"
	EC2NodeClassKind  = "EC2NodeClass"
	// AutoModeGroup and NodeClassKind are EKS Auto Mode's node class: the
	// NodePool kind is Karpenter's, the class is EKS's own.
	AutoModeGroup      = "eks.amazonaws.com"
	NodeClassKind      = "NodeClass"
	NodeClaimsResource = "nodeclaims"
	// NodePoolLabel is the label Karpenter puts on every node and
	// NodeClaim of a NodePool.
	NodePoolLabel = "karpenter.sh/nodepool"
)

// Karpenter's capacity types (the karpenter.sh/capacity-type label).
const (
	CapacityReserved = "reserved"
	CapacitySpot     = "spot"
	CapacityOnDemand = "on-demand"
)

// GPUNodePool is the GPU capacity Karpenter (self-managed, or EKS Auto
// Mode's) makes for a cluster: a node class (how a node is launched: role,
// subnets, security groups, disk, reservations; with Karpenter also the
// AMI) and a NodePool of the same name (which nodes: instance types,
// capacity types, labels, taints, a GPU limit, and when empty or underused
// nodes are consolidated away).
type GPUNodePool struct {
	// Name of both objects (cluster-scoped).
	Name string
	// AutoMode makes the class EKS Auto Mode's eks.amazonaws.com NodeClass,
	// whose nodes run Auto Mode's own AMI, instead of Karpenter's
	// EC2NodeClass.
	AutoMode bool
	// NodeRole is the IAM role name the nodes run as (it has an EC2_LINUX
	// access entry; in Auto Mode an EC2 one with AmazonEKSAutoNodePolicy).
	NodeRole string
	// AMIFamily is "al2023" or "bottlerocket"; the latest EKS-optimized AMI
	// of the family for the cluster's version is used (the GPU variant
	// where the instance type has GPUs). Empty in Auto Mode.
	AMIFamily string
	// SubnetIDs and SecurityGroupIDs are selected by id, so an existing
	// network needs no discovery tags.
	SubnetIDs        []string
	SecurityGroupIDs []string
	// DiskGiB is the node's data volume: the root volume on AL2023, the
	// second (data) volume on Bottlerocket, whose root holds the OS alone.
	DiskGiB int64
	// InstanceTypes the NodePool may launch.
	InstanceTypes []string
	// CapacityTypes in Karpenter's words (reserved, spot, on-demand): with
	// reserved among others, Karpenter launches into a reservation first
	// and falls back to the others when it is full.
	CapacityTypes []string
	// ReservationID or ReservationTags select the capacity reservations
	// (On-Demand Capacity Reservations or Capacity Blocks) nodes may use.
	ReservationID   string
	ReservationTags map[string]string
	// Labels and Taints every node gets: what the fleet's pods select and tolerate.
	Labels map[string]string
	Taints []corev1.Taint
	// GPULimit caps the nvidia.com/gpu the NodePool's nodes hold together.
	GPULimit int64
	// ConsolidateAfter is how long a node stays empty or underused before
	// Karpenter removes it; 0 means at once.
	ConsolidateAfter time.Duration
	// Tags go on every instance, volume and launch template Karpenter makes.
	Tags map[string]string
}

var amiFamilies = []string{"al2023", "bottlerocket"}

var reservationID = regexp.MustCompile(`^cr-[0-9a-z]+$`)

// Validate checks p; each error names the field and the fix.
func (p GPUNodePool) Validate() error {
	var errs []error
	if p.Name == "" || p.NodeRole == "" {
		errs = append(errs, errors.New("GPUNodePool needs Name and NodeRole"))
	}
	switch {
	case p.AutoMode && p.AMIFamily != "":
		errs = append(errs, fmt.Errorf("AMIFamily %q: EKS Auto Mode runs its own AMI; leave it empty", p.AMIFamily))
	case !p.AutoMode && !slices.Contains(amiFamilies, p.AMIFamily):
		errs = append(errs, fmt.Errorf("AMIFamily %q: use one of %s", p.AMIFamily, strings.Join(amiFamilies, ", ")))
	}
	if len(p.SubnetIDs) == 0 || len(p.SecurityGroupIDs) == 0 {
		errs = append(errs, errors.New("GPUNodePool needs SubnetIDs and SecurityGroupIDs"))
	}
	if len(p.InstanceTypes) == 0 {
		errs = append(errs, errors.New("GPUNodePool needs InstanceTypes"))
	}
	for _, c := range p.CapacityTypes {
		if c != CapacityReserved && c != CapacitySpot && c != CapacityOnDemand {
			errs = append(errs, fmt.Errorf("capacity type %q: use reserved, spot or on-demand", c))
		}
	}
	if len(p.CapacityTypes) == 0 {
		errs = append(errs, errors.New("GPUNodePool needs CapacityTypes"))
	}
	reserved := slices.Contains(p.CapacityTypes, CapacityReserved)
	named := p.ReservationID != "" || len(p.ReservationTags) > 0
	switch {
	case reserved && !named:
		errs = append(errs, errors.New("capacity type reserved needs ReservationID or ReservationTags"))
	case named && !reserved:
		errs = append(errs, errors.New("a reservation needs the reserved capacity type"))
	case p.ReservationID != "" && !reservationID.MatchString(p.ReservationID):
		errs = append(errs, fmt.Errorf("ReservationID %q is not a capacity reservation id (cr-...)", p.ReservationID))
	}
	if p.DiskGiB < 20 || p.GPULimit < 1 || p.ConsolidateAfter < 0 {
		errs = append(errs, fmt.Errorf("DiskGiB %d (at least 20), GPULimit %d (at least 1), ConsolidateAfter %s (not negative)", p.DiskGiB, p.GPULimit, p.ConsolidateAfter))
	}
	return errors.Join(errs...)
}

// ClassGroupKind is the API group and kind of the pool's node class.
func (p GPUNodePool) ClassGroupKind() (group, kind string) {
	if p.AutoMode {
		return AutoModeGroup, NodeClassKind
	}
	return KarpenterAWSGroup, EC2NodeClassKind
}

// Objects are the node class and the NodePool, in that order (the
// NodePool names the class).
func (p GPUNodePool) Objects() ([]kube.Object, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	group, kind := p.ClassGroupKind()
	class, err := kube.FromApplyConfiguration(map[string]any{
		"apiVersion": group + "/" + KarpenterVersion, "kind": kind,
		"metadata": map[string]any{"name": p.Name, "labels": map[string]any{"app.kubernetes.io/managed-by": "llmd"}},
		"spec":     p.nodeClassSpec(),
	})
	if err != nil {
		return nil, err
	}
	pool, err := kube.FromApplyConfiguration(map[string]any{
		"apiVersion": KarpenterGroup + "/" + KarpenterVersion, "kind": NodePoolKind,
		"metadata": map[string]any{"name": p.Name, "labels": map[string]any{"app.kubernetes.io/managed-by": "llmd"}},
		"spec":     p.nodePoolSpec(),
	})
	if err != nil {
		return nil, err
	}
	return []kube.Object{class, pool}, nil
}

func (p GPUNodePool) nodeClassSpec() map[string]any {
	ids := func(key string, values []string) []any {
		out := []any{}
		for _, v := range sorted(values) {
			out = append(out, map[string]any{key: v})
		}
		return out
	}
	spec := map[string]any{
		"role":                       p.NodeRole,
		"subnetSelectorTerms":        ids("id", p.SubnetIDs),
		"securityGroupSelectorTerms": ids("id", p.SecurityGroupIDs),
	}
	switch {
	case p.ReservationID != "":
		spec["capacityReservationSelectorTerms"] = []any{map[string]any{"id": p.ReservationID}}
	case len(p.ReservationTags) > 0:
		spec["capacityReservationSelectorTerms"] = []any{map[string]any{"tags": stringMap(p.ReservationTags)}}
	}
	if len(p.Tags) > 0 {
		spec["tags"] = stringMap(p.Tags)
	}
	if p.AutoMode {
		// Auto Mode's AMI, its disk layout and its instance metadata
		// settings are its own; the class sizes the node's ephemeral
		// storage (images, pods) alone.
		spec["ephemeralStorage"] = map[string]any{"size": fmt.Sprintf("%dGi", p.DiskGiB)}
		return spec
	}
	volume := func(device string, gib int64) map[string]any {
		return map[string]any{"deviceName": device, "ebs": map[string]any{
			"volumeSize": fmt.Sprintf("%dGi", gib), "volumeType": "gp3", "encrypted": true, "deleteOnTermination": true}}
	}
	devices := []any{volume("/dev/xvda", p.DiskGiB)}
	if p.AMIFamily == "bottlerocket" {
		// Bottlerocket's root volume holds the OS; images and pods go on
		// the data volume (Karpenter's defaults: 4Gi and 20Gi).
		devices = []any{volume("/dev/xvda", 4), volume("/dev/xvdb", p.DiskGiB)}
	}
	spec["amiSelectorTerms"] = []any{map[string]any{"alias": p.AMIFamily + "@latest"}}
	spec["blockDeviceMappings"] = devices
	// IMDSv2 only, and no pod reaches the node's credentials (one hop).
	spec["metadataOptions"] = map[string]any{"httpEndpoint": "enabled", "httpTokens": "required", "httpPutResponseHopLimit": 1}
	return spec
}

func (p GPUNodePool) nodePoolSpec() map[string]any {
	in := func(key string, values []string) map[string]any {
		vs := []any{}
		for _, v := range values {
			vs = append(vs, v)
		}
		return map[string]any{"key": key, "operator": "In", "values": vs}
	}
	group, kind := p.ClassGroupKind()
	taints := []any{}
	for _, t := range p.Taints {
		taint := map[string]any{"key": t.Key, "effect": string(t.Effect)}
		if t.Value != "" {
			taint["value"] = t.Value
		}
		taints = append(taints, taint)
	}
	template := map[string]any{
		"nodeClassRef": map[string]any{"group": group, "kind": kind, "name": p.Name},
		"requirements": []any{
			in("node.kubernetes.io/instance-type", sorted(p.InstanceTypes)),
			in("karpenter.sh/capacity-type", p.CapacityTypes),
			in("kubernetes.io/os", []string{"linux"}),
		},
		"taints": taints,
	}
	return map[string]any{
		"template": map[string]any{"metadata": map[string]any{"labels": stringMap(p.Labels)}, "spec": template},
		"limits":   map[string]any{"nvidia.com/gpu": fmt.Sprint(p.GPULimit)},
		"disruption": map[string]any{
			"consolidationPolicy": "WhenEmptyOrUnderutilized",
			"consolidateAfter":    p.ConsolidateAfter.String(),
		},
	}
}

func sorted(values []string) []string {
	out := slices.Clone(values)
	slices.Sort(out)
	return out
}

func stringMap(m map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}
