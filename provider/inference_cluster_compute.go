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
)

// karpenterApplied is compute.status while Karpenter's release, its
// EC2NodeClass and its NodePool are as llmd applied them and ready.
const karpenterApplied = "applied"

// karpenterReady bounds the wait for the NodePool to be Ready (the
// controller has resolved the AMI, the subnets, the security group and the
// instance profile) and, on removal, for Karpenter's nodes to go.
const karpenterReady = 10 * time.Minute

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
			"AWS parts deleted (the fleet's pods wait for the node group's nodes).",
		Attributes: map[string]schema.Attribute{
			"mode": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(computeNodeGroup),
				Validators:          []validator.String{stringvalidator.OneOf(computeNodeGroup, computeKarpenter)},
				MarkdownDescription: "`node_group` (default) or `karpenter`."},
			"karpenter_version": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(addons.DefaultKarpenterVersion),
				MarkdownDescription: "Karpenter chart version (its controller's release), pinned; default `" + addons.DefaultKarpenterVersion + "`. A change upgrades the release in place."},
			"karpenter_repository": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(addons.DefaultKarpenterRepository),
				MarkdownDescription: "Where Karpenter's chart comes from: `oci://registry/path` or an `https://` repository with `index.yaml`; default `" + addons.DefaultKarpenterRepository + "`. " +
					"The chart's images are the chart's own (`image_mirrors` does not rewrite them)."},
			"consolidate_after": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaultConsolidateAfter),
				Validators:          []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^\d+(s|m|h)$`), "must be a duration such as 5m or 0s")},
				MarkdownDescription: "How long an empty or underused GPU node stays before Karpenter removes it (a Go duration, `0s` for at once); default `" + defaultConsolidateAfter + "`."},
			"status": schema.StringAttribute{Computed: true,
				MarkdownDescription: "With `karpenter`: `applied` while the release, the EC2NodeClass and the NodePool are as applied and the NodePool is Ready; " +
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

// karpenterSpec is what awsinfra makes for Karpenter; nil in node_group mode.
func (m inferenceClusterModel) karpenterSpec() *awsinfra.KarpenterSpec {
	if !m.karpenterOn() {
		return nil
	}
	return &awsinfra.KarpenterSpec{Namespace: addons.DefaultKarpenterNamespace, ServiceAccount: addons.DefaultKarpenterServiceAccount}
}

// validateCompute refuses what Karpenter cannot make: an AMI type outside
// the families Karpenter's aliases name.
func validateCompute(m inferenceClusterModel, diags *diag.Diagnostics) {
	if computeMode(m.Compute) != computeKarpenter {
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

// karpenterPlan is what the apply makes in the cluster for Karpenter.
type karpenterPlan struct {
	release addons.Karpenter
	pool    workloads.GPUNodePool
}

// karpenterPlan builds the release and the node pool of a state from what
// AWS reports (cl); nil in node_group mode.
func (m inferenceClusterModel) karpenterPlan(ctx context.Context, cl *awsinfra.Cluster, diags *diag.Diagnostics) *karpenterPlan {
	if !m.karpenterOn() {
		return nil
	}
	if cl == nil || cl.Karpenter == nil {
		diags.AddError("Karpenter's AWS parts are missing", "compute.mode is \"karpenter\" but the cluster's Karpenter roles and queue were not found; apply again to make them")
		return nil
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
	pool := workloads.GPUNodePool{Name: "llmd-" + ng.Name, NodeRole: cl.Karpenter.NodeRoleName, AMIFamily: karpenterAMIFamily(ng.AMIType),
		SubnetIDs: subnets, SecurityGroupIDs: []string{cl.ClusterSecurityGroupID}, DiskGiB: int64(ng.DiskSize), InstanceTypes: []string{ng.InstanceType},
		CapacityTypes: karpenterCapacityTypes(ng), Labels: ng.Labels, Taints: taints, GPULimit: int64(ng.MaxSize) * gpus, ConsolidateAfter: consolidate,
		Tags: map[string]string{awsinfra.OwnerTag: m.Name.ValueString()}}
	if r := ng.Reservation; r != nil {
		pool.ReservationID, pool.ReservationTags = r.ID, r.Tags
	}
	sel, tols := nodeGroupPlacement(ctx, m.SystemNodeGroup, systemDefaults.name, diags)
	replicas := 2
	if sys := nodeGroupSpec(ctx, m.SystemNodeGroup, diags); sys.DesiredSize == 1 {
		// The chart keeps its replicas on different nodes.
		replicas = 1
	}
	release := addons.Karpenter{Repository: cm.KarpenterRepository.ValueString(), Version: cm.KarpenterVersion.ValueString(),
		ClusterName: m.Name.ValueString(), ClusterEndpoint: m.Endpoint.ValueString(), InterruptionQueue: cl.Karpenter.InterruptionQueue,
		Replicas: replicas, NodeSelector: sel, Tolerations: tols}
	return &karpenterPlan{release: release, pool: pool}
}

// applyKarpenter installs or upgrades Karpenter's release, applies the
// EC2NodeClass and the NodePool and waits until the NodePool is Ready. It
// returns the objects applied (for the inventory).
func applyKarpenter(ctx context.Context, k *inClusterKube, want *karpenterPlan) ([]kube.Ref, error) {
	tflog.Info(ctx, "installing Karpenter", map[string]any{"version": want.release.Version, "repository": want.release.Repository})
	if _, err := addons.Apply(ctx, k.cfg, want.release, func(format string, args ...any) { tflog.Info(ctx, fmt.Sprintf(format, args...)) }); err != nil {
		return nil, fmt.Errorf("installing Karpenter: %w", err)
	}
	objs, err := want.pool.Objects()
	if err != nil {
		return nil, err
	}
	// Force: llmd owns these objects, and the apply is what repairs an edit.
	if err := k.c.Apply(ctx, objs, true); err != nil {
		return kube.Refs(objs), fmt.Errorf("applying Karpenter's EC2NodeClass and NodePool: %w", err)
	}
	return kube.Refs(objs), waitNodePoolReady(ctx, k.c, want.pool.Name)
}

var (
	nodePoolResource  = k8sschema.GroupVersionResource{Group: workloads.KarpenterGroup, Version: workloads.KarpenterVersion, Resource: "nodepools"}
	nodeClassResource = k8sschema.GroupVersionResource{Group: workloads.KarpenterAWSGroup, Version: workloads.KarpenterVersion, Resource: "ec2nodeclasses"}
	nodeClaimResource = k8sschema.GroupVersionResource{Group: workloads.KarpenterGroup, Version: workloads.KarpenterVersion, Resource: workloads.NodeClaimsResource}
)

// waitNodePoolReady waits for the NodePool's Ready condition: Karpenter has
// resolved its EC2NodeClass against AWS. A timeout names the conditions
// that are not true, the NodeClass's first (they say which AWS part failed).
func waitNodePoolReady(ctx context.Context, c *kube.Client, name string) error {
	ctx, cancel := context.WithTimeout(ctx, karpenterReady)
	defer cancel()
	began := time.Now()
	for {
		ready, why := conditionTrue(ctx, c, nodePoolResource, name)
		if ready {
			tflog.Info(ctx, "Karpenter's NodePool "+name+" is ready", map[string]any{"elapsed": time.Since(began).Round(time.Second).String()})
			return nil
		}
		select {
		case <-ctx.Done():
			_, classWhy := conditionTrue(context.Background(), c, nodeClassResource, name)
			return fmt.Errorf("Karpenter's NodePool %s was not Ready within %s: EC2NodeClass %s; NodePool %s "+
				"(is the controller running? kubectl -n %s logs deployment/%s)", name, karpenterReady, classWhy, why, addons.DefaultKarpenterNamespace, addons.DefaultKarpenterRelease)
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

// removeKarpenter takes Karpenter out of the cluster in the order its
// finalizers need: the NodePool (its NodeClaims go, Karpenter drains and
// terminates their instances), then the EC2NodeClass (Karpenter deletes
// its instance profiles), then the release. Each wait is bounded; a
// controller that cannot finish leaves the error, and nothing in AWS has
// been deleted yet.
func removeKarpenter(ctx context.Context, k *inClusterKube, poolName string, release addons.Karpenter) error {
	ctx, cancel := context.WithTimeout(ctx, karpenterReady)
	defer cancel()
	ref := func(group, kind string) kube.Ref {
		return kube.Ref{Group: group, Version: workloads.KarpenterVersion, Kind: kind, Name: poolName}
	}
	tflog.Info(ctx, "removing Karpenter: its NodePool, its nodes, its EC2NodeClass, then the release", map[string]any{"node_pool": poolName})
	if err := k.c.Delete(ctx, []kube.Ref{ref(workloads.KarpenterGroup, workloads.NodePoolKind)}); err != nil {
		return err
	}
	if err := waitNodeClaimsGone(ctx, k.c, poolName); err != nil {
		return err
	}
	if err := k.c.Delete(ctx, []kube.Ref{ref(workloads.KarpenterAWSGroup, workloads.EC2NodeClassKind)}); err != nil {
		return err
	}
	return addons.Uninstall(ctx, k.cfg, release)
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
			return fmt.Errorf("Karpenter's nodes of NodePool %s were not removed within %s (NodeClaims %s; is the controller running?): "+
				"nothing in AWS was deleted yet", pool, time.Since(began).Round(time.Second), strings.Join(names, ", "))
		case <-time.After(c.Poll):
		}
	}
}

// karpenterRelease is the release a state names, enough to uninstall it.
func (m inferenceClusterModel) karpenterRelease(ctx context.Context, diags *diag.Diagnostics) addons.Karpenter {
	var cm computeModel
	diags.Append(m.Compute.As(ctx, &cm, asObject)...)
	return addons.Karpenter{Version: cm.KarpenterVersion.ValueString(), Repository: cm.KarpenterRepository.ValueString(), ClusterName: m.Name.ValueString()}
}

// karpenterPoolName is the NodePool and EC2NodeClass name of a state.
func (m inferenceClusterModel) karpenterPoolName(ctx context.Context, diags *diag.Diagnostics) string {
	return "llmd-" + nodeGroupSpec(ctx, m.GPUNodeGroup, diags).Name
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
	case computeMode(plan) != computeKarpenter:
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
		if same && p["status"].Equal(types.StringValue(karpenterApplied)) {
			v["status"] = p["status"]
		}
	}
	return types.ObjectValueMust(computeTypes, v)
}

// refreshKarpenter records in compute.status whether Karpenter's release,
// EC2NodeClass and NodePool are as applied (the NodePool Ready).
func refreshKarpenter(ctx context.Context, k *inClusterKube, state *inferenceClusterModel, want *karpenterPlan) error {
	st, drift, err := addons.Read(ctx, k.cfg, want.release)
	if err != nil {
		return err
	}
	if st == nil {
		drift = append(drift, "release "+want.release.Namespace+"/"+addons.DefaultKarpenterRelease+" missing")
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
	status := karpenterApplied
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

// karpenterGPUNodes is gpu_node_group as state records it in Karpenter mode
// (the configuration, with the control plane's version: Karpenter launches
// the latest AMI for it; no release version, a reservation selected by tags
// without an id) and the GPU nodes the kubernetes object reports: as many
// as max_size, the NodePool's limit.
func karpenterGPUNodes(ctx context.Context, obj types.Object, version string) (types.Object, *awsinfra.NodeGroup) {
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

// planKarpenterGPU plans gpu_node_group where Karpenter makes the GPU
// nodes, or made them before: the version is the control plane's and a
// node pool changes in place (Karpenter replaces drifted nodes itself). A
// mode change is said in words: what goes, what comes, and that the fleet's
// pods wait meanwhile.
func planKarpenterGPU(obj types.Object, k8s types.String, prior, plan inferenceClusterModel, updating bool, diags *diag.Diagnostics) types.Object {
	was, is := updating && prior.karpenterOn(), plan.karpenterOn()
	switch {
	case updating && !was && is:
		diags.AddAttributeWarning(path.Root("compute").AtName("mode"), "GPU node group replaced by Karpenter",
			"The apply deletes the GPU managed node group and its nodes, then installs Karpenter, which makes GPU nodes for the fleet's Pending pods "+
				"(a few minutes on AWS). The control plane, the network and the file system stay.")
	case was && !is:
		diags.AddAttributeWarning(path.Root("compute").AtName("mode"), "Karpenter replaced by a GPU node group",
			"The apply first deletes Karpenter's NodePool (Karpenter drains and terminates its nodes) and uninstalls Karpenter, then creates the GPU managed "+
				"node group and deletes Karpenter's AWS parts. The fleet's pods wait for the node group's nodes. The control plane, the network and the file system stay.")
	}
	if !is {
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

// removeKarpenterFirst takes Karpenter out of the cluster before an apply
// leaves Karpenter mode, while its AWS parts still serve it; false (with
// the error in diags) stops the apply before AWS changes.
func (r *inferenceClusterResource) removeKarpenterFirst(ctx context.Context, prior inferenceClusterModel, diags *diag.Diagnostics) bool {
	k, err := r.inClusterKube(ctx, prior)
	if err == nil {
		err = removeKarpenter(ctx, k, prior.karpenterPoolName(ctx, diags), prior.karpenterRelease(ctx, diags))
	}
	if err != nil {
		diags.AddError("Leaving compute.mode \"karpenter\"", explain(err)+"\n\nNothing in AWS changed; the GPU nodes Karpenter made are as they were. Fix the cause and apply again.")
		return false
	}
	return true
}
