package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/llmd-dev/terraform-provider-llmd/internal/addons"
	"github.com/llmd-dev/terraform-provider-llmd/internal/awsinfra"
	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
)

// The cluster's compute modes: how GPU nodes come to be.
const (
	// computeNodeGroup is the GPU managed node group of fixed size.
	computeNodeGroup = "node_group"
	// computeKarpenter is Karpenter, installed and configured by the
	// cluster: GPU nodes follow the pods that need them.
	computeKarpenter = "karpenter"
	// computeAutoMode is EKS Auto Mode (the Karpenter EKS runs itself) with
	// the cluster's own NodeClass and GPU NodePool: GPU nodes follow the
	// pods that need them.
	computeAutoMode = "auto_mode"
)

// nodePoolApplied is compute.status while the node pool's objects (and
// Karpenter's release) are as llmd applied them and ready.
const nodePoolApplied = "applied"

// nodePoolReady bounds the wait for the NodePool to be Ready (the
// controller has resolved the AMI, the subnets, the security group and the
// instance profile) and, on removal, for its nodes to go.
const nodePoolReady = 10 * time.Minute

// defaultConsolidateAfter is how long an empty or underused GPU node stays.
const defaultConsolidateAfter = "5m"

type computeModel struct {
	Mode                types.String `tfsdk:"mode"`
	KarpenterVersion    types.String `tfsdk:"karpenter_version"`
	KarpenterRepository types.String `tfsdk:"karpenter_repository"`
	ConsolidateAfter    types.String `tfsdk:"consolidate_after"`
	Status              types.String `tfsdk:"status"`
}

var (
	computeTypes = map[string]attr.Type{"mode": types.StringType, "karpenter_version": types.StringType, "karpenter_repository": types.StringType,
		"consolidate_after": types.StringType, "status": types.StringType}
	computeDefault = types.ObjectValueMust(computeTypes, map[string]attr.Value{"mode": types.StringValue(computeNodeGroup),
		"karpenter_version": types.StringValue(addons.DefaultKarpenterVersion), "karpenter_repository": types.StringValue(addons.DefaultKarpenterRepository),
		"consolidate_after": types.StringValue(defaultConsolidateAfter), "status": types.StringNull()})
)

func computeAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional: true, Computed: true, Default: objectdefault.StaticValue(computeDefault),
		MarkdownDescription: "How GPU nodes come to be. `node_group` (default): the GPU managed node group, `gpu_node_group.desired_size` nodes whatever the load. " +
			"`karpenter`: no GPU node group; the cluster installs Karpenter (its chart through Helm in `kube-system`, on the system nodes; an IAM role bound to its " +
			"service account by EKS Pod Identity; a node role with an `EC2_LINUX` access entry; an SQS interruption queue fed by EventBridge rules for Spot " +
			"interruptions, rebalance recommendations, scheduled changes and instance state changes) and one EC2NodeClass and NodePool `llmd-<gpu_node_group.name>` " +
			"made from `gpu_node_group`: `instance_type` as the only type, `ami_type` as the AMI family (`al2023@latest` or `bottlerocket@latest`), `disk_size`, " +
			"`labels` and `taints` as the nodes', `capacity_type` and `capacity_reservation` as the capacity types (a reservation first, `reserved`, then On-Demand " +
			"where `fallback = \"on_demand\"`), the private subnets (the file system's zone with `colocate_with_storage`) and the cluster security group by id, and " +
			"`max_size` × the type's GPUs as the NodePool's `nvidia.com/gpu` limit; `desired_size` and `min_size` are not used. GPU nodes then follow the fleet's " +
			"pods: a Pending pod gets a node, an empty or underused node goes after `consolidate_after`. The fleet and the router place their pods the same way " +
			"in both modes (`kubernetes`). Changing the mode changes the cluster in place, never the control plane, the network or the file system: to `karpenter`, " +
			"the GPU node group is deleted and Karpenter installed in the same apply (the fleet's pods wait Pending for Karpenter's first nodes, a few minutes); " +
			"back to `node_group`, Karpenter's NodePool is deleted first and its nodes drained and terminated, then the GPU node group is created and Karpenter's " +
			"AWS parts deleted (the fleet's pods wait for the node group's nodes). " +
			"`auto_mode`: no GPU node group; the cluster turns on EKS Auto Mode (its compute, block storage and load balancing capabilities together, no built-in " +
			"node pools; the cluster role gets Auto Mode's managed policies) and applies an `eks.amazonaws.com` NodeClass and a NodePool `llmd-<gpu_node_group.name>` " +
			"made as for `karpenter`, except that Auto Mode runs its own Bottlerocket-based AMI with the NVIDIA driver and device plugin (leave `ami_type` unset; " +
			"`addons.nvidia_device_plugin` stays off) and `disk_size` is the node's ephemeral storage; the NodeClass's role is a node role with an `EC2` access " +
			"entry and `AmazonEKSAutoNodePolicy`. EKS runs the Karpenter that launches the nodes, so `karpenter_version` and `karpenter_repository` are not used. " +
			"Any change between modes is in place in the same way: the old mode's NodePool goes first (its nodes drained and terminated), then AWS changes.",
		Attributes: map[string]schema.Attribute{
			"mode": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(computeNodeGroup),
				Validators:          []validator.String{stringvalidator.OneOf(computeNodeGroup, computeKarpenter, computeAutoMode)},
				MarkdownDescription: "`node_group` (default), `karpenter` or `auto_mode`."},
			"karpenter_version": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(addons.DefaultKarpenterVersion),
				MarkdownDescription: "Karpenter chart version (its controller's release), pinned; default `" + addons.DefaultKarpenterVersion + "`. A change upgrades the release in place."},
			"karpenter_repository": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(addons.DefaultKarpenterRepository),
				MarkdownDescription: "Where Karpenter's chart comes from: `oci://registry/path` or an `https://` repository with `index.yaml`; default `" + addons.DefaultKarpenterRepository + "`. " +
					"The chart's images are the chart's own (`image_mirrors` does not rewrite them)."},
			"consolidate_after": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaultConsolidateAfter),
				Validators:          []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^\d+(s|m|h)$`), "must be a duration such as 5m or 0s")},
				MarkdownDescription: "How long an empty or underused GPU node stays before Karpenter (or Auto Mode) removes it (a Go duration, `0s` for at once); default `" + defaultConsolidateAfter + "`."},
			"status": schema.StringAttribute{Computed: true,
				MarkdownDescription: "With `karpenter`: `applied` while the release, the EC2NodeClass and the NodePool are as applied and the NodePool is Ready " +
					"(with `auto_mode`: the NodeClass and the NodePool); " +
					"`drift: ...` naming what changed behind Terraform's back, `failed: ...` or `unreachable: ...` (each plans a repair). Null with `node_group`."},
		},
	}
}

// computeMode is the mode of a plan or state: node_group where unset, ""
// while unknown.
func computeMode(obj types.Object) string {
	if obj.IsUnknown() {
		return ""
	}
	if obj.IsNull() {
		return computeNodeGroup
	}
	m, ok := obj.Attributes()["mode"].(types.String)
	switch {
	case !ok || m.IsUnknown():
		return ""
	case m.IsNull():
		return computeNodeGroup
	}
	return m.ValueString()
}

// karpenterOn reports whether a plan or state runs Karpenter.
func (m inferenceClusterModel) karpenterOn() bool { return computeMode(m.Compute) == computeKarpenter }

// autoModeOn reports whether a plan or state runs EKS Auto Mode.
func (m inferenceClusterModel) autoModeOn() bool { return computeMode(m.Compute) == computeAutoMode }

// nodePoolOn reports whether a plan's or state's GPU nodes come from a
// NodePool (Karpenter's or Auto Mode's) rather than the GPU node group.
func (m inferenceClusterModel) nodePoolOn() bool { return nodePoolMode(computeMode(m.Compute)) }

// nodePoolMode reports whether a compute mode makes GPU nodes from a NodePool.
func nodePoolMode(mode string) bool { return mode == computeKarpenter || mode == computeAutoMode }

// modeLeaving and modeArriving are what an apply does to leave and to
// enter each mode, in the words of the plan's warning.
var (
	modeLeaving = map[string]string{
		computeNodeGroup: "deletes the GPU managed node group and its nodes",
		computeKarpenter: "first deletes Karpenter's NodePool (Karpenter drains and terminates its nodes) and uninstalls Karpenter",
		computeAutoMode:  "first deletes the Auto Mode NodePool and NodeClass (Auto Mode drains and terminates its nodes)",
	}
	modeArriving = map[string]string{
		computeNodeGroup: "creates the GPU managed node group",
		computeKarpenter: "installs Karpenter, which makes GPU nodes for the fleet's Pending pods (a few minutes on AWS)",
		computeAutoMode:  "turns on EKS Auto Mode and applies its NodeClass and NodePool, from which Auto Mode makes GPU nodes for the fleet's Pending pods (a few minutes on AWS)",
	}
)

// computeModeNames are the modes in the words of plans and errors.
var computeModeNames = map[string]string{computeNodeGroup: "the GPU node group", computeKarpenter: "Karpenter", computeAutoMode: "EKS Auto Mode"}

// karpenterSpec is what awsinfra makes for Karpenter; nil in node_group mode.
func (m inferenceClusterModel) karpenterSpec() *awsinfra.KarpenterSpec {
	if !m.karpenterOn() {
		return nil
	}
	return &awsinfra.KarpenterSpec{Namespace: addons.DefaultKarpenterNamespace, ServiceAccount: addons.DefaultKarpenterServiceAccount}
}

// validateCompute refuses what the mode cannot make: an AMI type outside
// the families Karpenter's aliases name; in Auto Mode, which runs its own
// AMI, any AMI type, and the networking add-ons turned off.
func validateCompute(ctx context.Context, m inferenceClusterModel, diags *diag.Diagnostics) {
	switch computeMode(m.Compute) {
	case computeAutoMode:
		// EKS makes an Auto Mode cluster without its self-managed
		// networking add-ons (it requires bootstrapSelfManagedAddons =
		// false): the system node group's nodes get them from these.
		for _, name := range []string{"vpc_cni", "kube_proxy", "coredns"} {
			if on, known := addonEnabled(ctx, m.Addons, name, diags); known && !on {
				diags.AddAttributeError(path.Root("addons").AtName(name).AtName("enabled"), "Networking add-on off in EKS Auto Mode",
					fmt.Sprintf("compute.mode = \"auto_mode\" makes the cluster without EKS's self-managed networking add-ons (EKS requires it), so the system "+
						"node group's pods get their network and DNS only from the managed add-ons: remove addons.%s.enabled = false", name))
			}
		}
		if !m.GPUNodeGroup.IsNull() && !m.GPUNodeGroup.IsUnknown() {
			if a, ok := m.GPUNodeGroup.Attributes()["ami_type"].(types.String); ok && !a.IsNull() && !a.IsUnknown() {
				diags.AddAttributeError(path.Root("gpu_node_group").AtName("ami_type"), "AMI type in EKS Auto Mode",
					fmt.Sprintf("compute.mode = \"auto_mode\" launches Auto Mode's own AMI (Bottlerocket-based, with the NVIDIA driver and device plugin): "+
						"remove gpu_node_group.ami_type (%s), or use compute.mode = \"karpenter\" to choose the AMI", a.ValueString()))
			}
		}
		return
	case computeKarpenter:
	default:
		return
	}
	if ami := gpuAMIType(m.GPUNodeGroup); ami != "" && karpenterAMIFamily(ami) == "" {
		diags.AddAttributeError(path.Root("gpu_node_group").AtName("ami_type"), "AMI type Karpenter cannot launch",
			fmt.Sprintf("compute.mode = \"karpenter\" launches AL2023 or Bottlerocket AMIs (Karpenter's al2023@latest and bottlerocket@latest): "+
				"gpu_node_group.ami_type %s is neither; use \"AL2023_x86_64_NVIDIA\" or \"BOTTLEROCKET_x86_64_NVIDIA\"", ami))
	}
}

// karpenterAMIFamily is the Karpenter AMI alias family of an EKS AMI type;
// "" for one Karpenter has no alias for (AL2, Windows).
func karpenterAMIFamily(amiType string) string {
	switch {
	case strings.HasPrefix(amiType, "AL2023_"):
		return "al2023"
	case strings.HasPrefix(amiType, "BOTTLEROCKET_") && !strings.Contains(amiType, "WINDOWS"):
		return "bottlerocket"
	}
	return ""
}

// karpenterCapacityTypes are the NodePool's capacity types for a GPU node
// group's: a reservation first (reserved), then On-Demand where its
// fallback allows; a Capacity Block is reserved capacity alone.
func karpenterCapacityTypes(ng awsinfra.NodeGroupSpec) []string {
	switch {
	case ng.Reservation != nil && ng.Reservation.Fallback == awsinfra.FallbackOnDemand:
		return []string{workloads.CapacityReserved, workloads.CapacityOnDemand}
	case ng.Reservation != nil || ng.CapacityType == awsinfra.CapacityBlock:
		return []string{workloads.CapacityReserved}
	case ng.CapacityType == awsinfra.CapacitySpot:
		return []string{workloads.CapacitySpot}
	}
	return []string{workloads.CapacityOnDemand}
}

// nodePoolPlan is what the apply makes in the cluster for the GPU
// NodePool: the pool, and Karpenter's release where llmd installs it.
type nodePoolPlan struct {
	// release is nil in Auto Mode: EKS runs its Karpenter.
	release *addons.Karpenter
	pool    workloads.GPUNodePool
}

// nodePoolPlan builds the node pool (and release) of a state from what AWS
// reports (cl); nil in node_group mode.
func (m inferenceClusterModel) nodePoolPlan(ctx context.Context, cl *awsinfra.Cluster, diags *diag.Diagnostics) *nodePoolPlan {
	var nodeRole string
	switch {
	case !m.nodePoolOn():
		return nil
	case m.autoModeOn() && (cl == nil || cl.AutoMode == nil):
		diags.AddError("EKS Auto Mode is off", "compute.mode is \"auto_mode\" but AWS reports the cluster's Auto Mode compute off or its node role missing; apply again to turn it on")
		return nil
	case m.autoModeOn():
		nodeRole = cl.AutoMode.NodeRoleName
	case cl == nil || cl.Karpenter == nil:
		diags.AddError("Karpenter's AWS parts are missing", "compute.mode is \"karpenter\" but the cluster's Karpenter roles and queue were not found; apply again to make them")
		return nil
	default:
		nodeRole = cl.Karpenter.NodeRoleName
	}
	var cm computeModel
	diags.Append(m.Compute.As(ctx, &cm, asObject)...)
	ng := nodeGroupSpec(ctx, m.GPUNodeGroup, diags)
	consolidate, err := time.ParseDuration(cm.ConsolidateAfter.ValueString())
	if err != nil {
		diags.AddAttributeError(path.Root("compute").AtName("consolidate_after"), "Invalid duration", err.Error())
	}
	gpus := int64(1)
	if in, err := workloads.LookupInstance(ng.InstanceType); err == nil && in.GPUs > 0 {
		gpus = int64(in.GPUs)
	}
	subnets := cl.Network.PrivateSubnetIDs
	if ng.ColocateWithStorage && cl.Storage != nil && cl.Storage.SubnetID != "" {
		subnets = []string{cl.Storage.SubnetID}
	}
	var taints []corev1.Taint
	for _, t := range ng.Taints {
		taints = append(taints, corev1.Taint{Key: t.Key, Value: t.Value, Effect: corev1.TaintEffect(kubernetesTaintEffect(t.Effect))})
	}
	pool := workloads.GPUNodePool{Name: "llmd-" + ng.Name, AutoMode: m.autoModeOn(), NodeRole: nodeRole,
		SubnetIDs: subnets, SecurityGroupIDs: []string{cl.ClusterSecurityGroupID}, DiskGiB: int64(ng.DiskSize), InstanceTypes: []string{ng.InstanceType},
		CapacityTypes: karpenterCapacityTypes(ng), Labels: ng.Labels, Taints: taints, GPULimit: int64(ng.MaxSize) * gpus, ConsolidateAfter: consolidate,
		Tags: map[string]string{awsinfra.OwnerTag: m.Name.ValueString()}}
	if r := ng.Reservation; r != nil {
		pool.ReservationID, pool.ReservationTags = r.ID, r.Tags
	}
	if pool.AutoMode {
		return &nodePoolPlan{pool: pool}
	}
	pool.AMIFamily = karpenterAMIFamily(ng.AMIType)
	sel, tols := nodeGroupPlacement(ctx, m.SystemNodeGroup, systemDefaults.name, diags)
	replicas := 2
	if sys := nodeGroupSpec(ctx, m.SystemNodeGroup, diags); sys.DesiredSize == 1 {
		// The chart keeps its replicas on different nodes.
		replicas = 1
	}
	release := &addons.Karpenter{Repository: cm.KarpenterRepository.ValueString(), Version: cm.KarpenterVersion.ValueString(),
		ClusterName: m.Name.ValueString(), ClusterEndpoint: m.Endpoint.ValueString(), InterruptionQueue: cl.Karpenter.InterruptionQueue,
		Replicas: replicas, NodeSelector: sel, Tolerations: tols}
	return &nodePoolPlan{release: release, pool: pool}
}

// applyNodePool installs or upgrades Karpenter's release (where llmd
// installs it), applies the node class and the NodePool and waits until
// the NodePool is Ready. It returns the objects applied (for the inventory).
func applyNodePool(ctx context.Context, k *inClusterKube, want *nodePoolPlan) ([]kube.Ref, error) {
	if want.release != nil {
		tflog.Info(ctx, "installing Karpenter", map[string]any{"version": want.release.Version, "repository": want.release.Repository})
		if _, err := addons.Apply(ctx, k.cfg, *want.release, func(format string, args ...any) { tflog.Info(ctx, fmt.Sprintf(format, args...)) }); err != nil {
			return nil, fmt.Errorf("installing Karpenter: %w", err)
		}
	}
	objs, err := want.pool.Objects()
	if err != nil {
		return nil, err
	}
	if want.release == nil {
		// EKS installs Auto Mode's kinds once the compute capability is
		// on; the first apply can get there before they are served.
		if err := waitServed(ctx, k.c, objs); err != nil {
			return nil, err
		}
	}
	_, classKind := want.pool.ClassGroupKind()
	// Force: llmd owns these objects, and the apply is what repairs an edit.
	if err := k.c.Apply(ctx, objs, true); err != nil {
		return kube.Refs(objs), fmt.Errorf("applying the GPU %s and NodePool: %w", classKind, err)
	}
	return kube.Refs(objs), waitNodePoolReady(ctx, k.c, want.pool)
}

// waitServed waits until the cluster serves the kinds of objs, bounded by
// nodePoolReady.
func waitServed(ctx context.Context, c *kube.Client, objs []kube.Object) error {
	ctx, cancel := context.WithTimeout(ctx, nodePoolReady)
	defer cancel()
	for _, o := range objs {
		gvk := k8sschema.GroupVersionKind{Group: o.Group, Version: o.Version, Kind: o.Kind}
		for {
			served, err := c.Serves(gvk)
			if err != nil {
				return err
			}
			if served {
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("the cluster does not serve %s after %s: EKS installs it when Auto Mode's compute capability is on "+
					"(aws eks describe-cluster --query cluster.computeConfig)", gvk, nodePoolReady)
			case <-time.After(c.Poll):
			}
		}
	}
	return nil
}

var (
	nodePoolResource  = k8sschema.GroupVersionResource{Group: workloads.KarpenterGroup, Version: workloads.KarpenterVersion, Resource: "nodepools"}
	nodeClaimResource = k8sschema.GroupVersionResource{Group: workloads.KarpenterGroup, Version: workloads.KarpenterVersion, Resource: workloads.NodeClaimsResource}
)

// nodeClassResource is the resource of a pool's node class.
func nodeClassResource(pool workloads.GPUNodePool) k8sschema.GroupVersionResource {
	group, kind := pool.ClassGroupKind()
	return k8sschema.GroupVersionResource{Group: group, Version: workloads.KarpenterVersion, Resource: strings.ToLower(kind) + "es"}
}

// waitNodePoolReady waits for the NodePool's Ready condition: Karpenter has
// resolved its node class against AWS. A timeout names the conditions
// that are not true, the class's first (they say which AWS part failed).
func waitNodePoolReady(ctx context.Context, c *kube.Client, pool workloads.GPUNodePool) error {
	ctx, cancel := context.WithTimeout(ctx, nodePoolReady)
	defer cancel()
	began := time.Now()
	for {
		ready, why := conditionTrue(ctx, c, nodePoolResource, pool.Name)
		if ready {
			tflog.Info(ctx, "the GPU NodePool "+pool.Name+" is ready", map[string]any{"elapsed": time.Since(began).Round(time.Second).String()})
			return nil
		}
		select {
		case <-ctx.Done():
			_, classKind := pool.ClassGroupKind()
			_, classWhy := conditionTrue(context.Background(), c, nodeClassResource(pool), pool.Name)
			hint := fmt.Sprintf("is the controller running? kubectl -n %s logs deployment/%s", addons.DefaultKarpenterNamespace, addons.DefaultKarpenterRelease)
			if pool.AutoMode {
				hint = "does the NodeClass's role have its access entry? kubectl describe nodeclass " + pool.Name
			}
			return fmt.Errorf("the GPU NodePool %s was not Ready within %s: %s %s; NodePool %s (%s)", pool.Name, nodePoolReady, classKind, classWhy, why, hint)
		case <-time.After(c.Poll):
		}
	}
}

// conditionTrue reports whether a Karpenter object's Ready condition is
// True, and otherwise the conditions that are not, in the object's words.
func conditionTrue(ctx context.Context, c *kube.Client, gvr k8sschema.GroupVersionResource, name string) (bool, string) {
	o, err := c.Dynamic.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err.Error()
	}
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	var not []string
	ready := false
	for _, raw := range conds {
		cond, _ := raw.(map[string]any)
		t, s := fmt.Sprint(cond["type"]), fmt.Sprint(cond["status"])
		if t == "Ready" && s == "True" {
			ready = true
		}
		if s != "True" {
			not = append(not, fmt.Sprintf("%s=%s (%v)", t, s, cond["message"]))
		}
	}
	if len(conds) == 0 {
		not = append(not, "no conditions yet")
	}
	return ready, strings.Join(not, ", ")
}

// removeNodePool takes the GPU NodePool out of the cluster in the order
// its finalizers need: the NodePool (its NodeClaims go, Karpenter drains
// and terminates their instances), then the node class, waited until gone
// (Karpenter deletes its instance profiles; Auto Mode holds its NodeClass
// until the class's nodes are gone), then Karpenter's release where llmd
// installed it. Each wait is bounded; a controller that cannot finish
// leaves the error, and nothing in AWS has been deleted yet.
func removeNodePool(ctx context.Context, k *inClusterKube, pool workloads.GPUNodePool, release *addons.Karpenter) error {
	ctx, cancel := context.WithTimeout(ctx, nodePoolReady)
	defer cancel()
	group, kind := pool.ClassGroupKind()
	tflog.Info(ctx, "removing the GPU NodePool, its nodes, then its "+kind, map[string]any{"node_pool": pool.Name, "karpenter_release": release != nil})
	if err := k.c.Delete(ctx, []kube.Ref{{Group: workloads.KarpenterGroup, Version: workloads.KarpenterVersion, Kind: workloads.NodePoolKind, Name: pool.Name}}); err != nil {
		return err
	}
	if err := waitNodeClaimsGone(ctx, k.c, pool.Name); err != nil {
		return err
	}
	if err := k.c.Delete(ctx, []kube.Ref{{Group: group, Version: workloads.KarpenterVersion, Kind: kind, Name: pool.Name}}); err != nil {
		return err
	}
	if release == nil {
		return nil
	}
	return addons.Uninstall(ctx, k.cfg, *release)
}

// waitNodeClaimsGone waits until no NodeClaim of the pool is left: each
// one is a node Karpenter drains and an instance it terminates.
func waitNodeClaimsGone(ctx context.Context, c *kube.Client, pool string) error {
	began := time.Now()
	for {
		list, err := c.Dynamic.Resource(nodeClaimResource).List(ctx, metav1.ListOptions{LabelSelector: workloads.NodePoolLabel + "=" + pool})
		switch {
		case err != nil && strings.Contains(err.Error(), "the server could not find the requested resource"):
			return nil // no Karpenter CRDs: no NodeClaims
		case err != nil:
			return fmt.Errorf("listing Karpenter's NodeClaims: %w", err)
		case len(list.Items) == 0:
			return nil
		}
		var names []string
		for _, o := range list.Items {
			names = append(names, o.GetName())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the nodes of NodePool %s were not removed within %s (NodeClaims %s; is the controller running?): "+
				"nothing in AWS was deleted yet", pool, time.Since(began).Round(time.Second), strings.Join(names, ", "))
		case <-time.After(c.Poll):
		}
	}
}

// karpenterRelease is the Karpenter release a state names, enough to
// uninstall it; nil where llmd installed none (Auto Mode).
func (m inferenceClusterModel) karpenterRelease(ctx context.Context, diags *diag.Diagnostics) *addons.Karpenter {
	if !m.karpenterOn() {
		return nil
	}
	var cm computeModel
	diags.Append(m.Compute.As(ctx, &cm, asObject)...)
	return &addons.Karpenter{Version: cm.KarpenterVersion.ValueString(), Repository: cm.KarpenterRepository.ValueString(), ClusterName: m.Name.ValueString()}
}

// appliedPool names a state's NodePool and node class, enough to delete them.
func (m inferenceClusterModel) appliedPool(ctx context.Context, diags *diag.Diagnostics) workloads.GPUNodePool {
	return workloads.GPUNodePool{Name: "llmd-" + nodeGroupSpec(ctx, m.GPUNodeGroup, diags).Name, AutoMode: m.autoModeOn()}
}

// withComputeStatus sets compute.status ("" for null).
func withComputeStatus(compute types.Object, status string) types.Object {
	if compute.IsNull() || compute.IsUnknown() {
		return compute
	}
	v := compute.Attributes()
	v["status"] = types.StringNull()
	if status != "" {
		v["status"] = types.StringValue(status)
	}
	return types.ObjectValueMust(computeTypes, v)
}

// planCompute keeps compute.status while Karpenter stays as applied, and
// plans it unknown where the apply acts on it; null in node_group mode.
func planCompute(plan, prior types.Object, gpuChanged bool) types.Object {
	if plan.IsNull() || plan.IsUnknown() {
		return plan
	}
	v := plan.Attributes()
	switch {
	case !nodePoolMode(computeMode(plan)):
		v["status"] = types.StringNull()
	case prior.IsNull() || prior.IsUnknown() || gpuChanged:
		v["status"] = types.StringUnknown()
	default:
		p := prior.Attributes()
		same := true
		for _, k := range []string{"mode", "karpenter_version", "karpenter_repository", "consolidate_after"} {
			same = same && v[k].Equal(p[k])
		}
		v["status"] = types.StringUnknown()
		if same && p["status"].Equal(types.StringValue(nodePoolApplied)) {
			v["status"] = p["status"]
		}
	}
	return types.ObjectValueMust(computeTypes, v)
}

// refreshNodePool records in compute.status whether the node class and
// the NodePool (and Karpenter's release) are as applied (the NodePool Ready).
func refreshNodePool(ctx context.Context, k *inClusterKube, state *inferenceClusterModel, want *nodePoolPlan) error {
	var drift []string
	if want.release != nil {
		st, releaseDrift, err := addons.Read(ctx, k.cfg, *want.release)
		if err != nil {
			return err
		}
		drift = releaseDrift
		if st == nil {
			drift = append(drift, "release "+want.release.Namespace+"/"+addons.DefaultKarpenterRelease+" missing")
		}
	}
	objs, err := want.pool.Objects()
	if err != nil {
		return err
	}
	diffs, err := k.c.Drift(ctx, objs)
	if err != nil {
		return err
	}
	for _, d := range diffs {
		drift = append(drift, d.String())
	}
	if ready, why := conditionTrue(ctx, k.c, nodePoolResource, want.pool.Name); !ready && len(diffs) == 0 {
		drift = append(drift, "NodePool "+want.pool.Name+" not Ready: "+why)
	}
	status := nodePoolApplied
	if len(drift) > 0 {
		status = "drift: " + strings.Join(drift, "; ")
	}
	state.Compute = withComputeStatus(state.Compute, status)
	return nil
}

// withComputeMode sets compute.mode.
func withComputeMode(compute types.Object, mode string) types.Object {
	v := compute.Attributes()
	v["mode"] = types.StringValue(mode)
	return types.ObjectValueMust(computeTypes, v)
}

// nodePoolGPUNodes is gpu_node_group as state records it where a NodePool
// makes the GPU nodes (the configuration, with the control plane's version: Karpenter launches
// the latest AMI for it; no release version, a reservation selected by tags
// without an id) and the GPU nodes the kubernetes object reports: as many
// as max_size, the NodePool's limit.
func nodePoolGPUNodes(ctx context.Context, obj types.Object, version string) (types.Object, *awsinfra.NodeGroup) {
	if obj.IsNull() || obj.IsUnknown() {
		return obj, nil
	}
	v := obj.Attributes()
	v["version"], v["release_version"] = types.StringValue(version), types.StringValue("")
	if r, ok := v["capacity_reservation"].(types.Object); ok && !r.IsNull() && !r.IsUnknown() && r.Attributes()["id"].IsUnknown() {
		a := r.Attributes()
		a["id"] = types.StringNull()
		v["capacity_reservation"] = types.ObjectValueMust(capacityReservationTypes, a)
	}
	obj = types.ObjectValueMust(nodeGroupTypes, v)
	var diags diag.Diagnostics
	spec := nodeGroupSpec(ctx, obj, &diags)
	spec.DesiredSize = spec.MaxSize
	return obj, &awsinfra.NodeGroup{NodeGroupSpec: spec}
}

// planNodePoolGPU plans gpu_node_group where a NodePool makes the GPU
// nodes, or made them before: the version is the control plane's and a
// node pool changes in place (Karpenter replaces drifted nodes itself). A
// mode change is said in words: what goes, what comes, and that the fleet's
// pods wait meanwhile.
func planNodePoolGPU(obj types.Object, k8s types.String, prior, plan inferenceClusterModel, updating bool, diags *diag.Diagnostics) types.Object {
	was, is := computeMode(prior.Compute), computeMode(plan.Compute)
	if updating && was != is && was != "" && is != "" {
		steps := []string{modeLeaving[was], modeArriving[is]}
		if was != computeNodeGroup {
			steps = append(steps, "turns off what "+computeModeNames[was]+" needed in AWS")
		}
		diags.AddAttributeWarning(path.Root("compute").AtName("mode"), strings.ToUpper(computeModeNames[was][:1])+computeModeNames[was][1:]+" replaced by "+computeModeNames[is],
			"The apply "+strings.Join(steps, ", then ")+". The fleet's pods wait Pending meanwhile. The control plane, the network and the file system stay.")
	}
	if !nodePoolMode(is) {
		// Back to a node group: a new one.
		obj, _ = planNodeGroup(obj, types.ObjectNull(nodeGroupTypes), k8s, false, false)
		return obj
	}
	if obj.IsNull() || obj.IsUnknown() {
		return obj
	}
	v := obj.Attributes()
	v["version"], v["release_version"] = k8s, types.StringValue("")
	return types.ObjectValueMust(nodeGroupTypes, v)
}

// removeNodePoolFirst takes the prior mode's NodePool (and Karpenter)
// out of the cluster before an apply changes mode, while the AWS parts
// still serve it; false (with the error in diags) stops the apply before
// AWS changes.
func (r *inferenceClusterResource) removeNodePoolFirst(ctx context.Context, prior inferenceClusterModel, diags *diag.Diagnostics) bool {
	k, err := r.inClusterKube(ctx, prior)
	if err == nil {
		err = removeNodePool(ctx, k, prior.appliedPool(ctx, diags), prior.karpenterRelease(ctx, diags))
	}
	if err != nil {
		diags.AddError(fmt.Sprintf("Leaving compute.mode %q", computeMode(prior.Compute)), explain(err)+
			"\n\nNothing in AWS changed; the GPU nodes it made are as they were. Fix the cause and apply again.")
		return false
	}
	return true
}
