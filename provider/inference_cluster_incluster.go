package provider

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/awsinfra"
	"github.com/llmd-dev/terraform-provider-llmd/internal/imageref"
	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
)

// The in-cluster add-ons of llmd_inference_cluster: the NVIDIA device plugin
// (our own DaemonSet, applied server-side like the fleet's objects) and
// monitoring (kube-prometheus-stack through Helm, with our Grafana
// dashboards beside it). Their objects are the resource's in-cluster
// inventory; their state is a status per add-on that a refresh sets to
// `drift: ...` when the cluster differs, so the plan shows the repair.

// devicePluginApplied is the device plugin's status while the live DaemonSet
// matches what llmd applies.
const devicePluginApplied = "applied"

// devicePluginRollout bounds the wait for the plugin's pods: they pull a
// small image on nodes that are already up.
const devicePluginRollout = 10 * time.Minute

type devicePluginModel struct {
	Enabled types.Bool   `tfsdk:"enabled"`
	Image   types.String `tfsdk:"image"`
	Status  types.String `tfsdk:"status"`
}

var (
	devicePluginTypes   = map[string]attr.Type{"enabled": types.BoolType, "image": types.StringType, "status": types.StringType}
	devicePluginType    = types.ObjectType{AttrTypes: devicePluginTypes}
	devicePluginDefault = types.ObjectValueMust(devicePluginTypes, map[string]attr.Value{"enabled": types.BoolValue(true),
		"image": types.StringValue(workloads.DefaultDevicePluginImage), "status": types.StringNull()})
)

func devicePluginAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional: true, Computed: true, Default: objectdefault.StaticValue(devicePluginDefault),
		MarkdownDescription: "The NVIDIA device plugin, which advertises each GPU node's `nvidia.com/gpu` (the AL2023 NVIDIA AMI has the driver but not the plugin, " +
			"and it is not an EKS add-on: without it GPU pods stay Pending). A DaemonSet `" + workloads.DevicePluginNamespace + "/" + workloads.DevicePluginName +
			"` scheduled by the GPU node group's labels (its `eks.amazonaws.com/nodegroup` label when it has none), so it runs on every GPU node and nowhere else, " +
			"tolerating the GPU node group's taints, priority `system-node-critical`. Not the upstream chart's default affinity, which needs Node Feature Discovery.",
		Attributes: map[string]schema.Attribute{
			"enabled": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				MarkdownDescription: "Run the device plugin; default `true`, but `false` when `gpu_node_group.ami_type` is a Bottlerocket NVIDIA AMI, which carries the plugin " +
					"(`true` there is a plan-time error). `false` removes it (for clusters that run NVIDIA's GPU operator instead)."},
			"image": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(workloads.DefaultDevicePluginImage),
				Validators:          []validator.String{stringvalidator.LengthAtLeast(1)},
				MarkdownDescription: "Device plugin image; default `" + workloads.DefaultDevicePluginImage + "`. Point it at a private mirror for VPCs without internet access."},
			"status": schema.StringAttribute{Computed: true,
				MarkdownDescription: "`applied` while the DaemonSet matches; `drift: ...` naming what changed or went missing behind Terraform's back, `unreachable: ...` " +
					"when the refresh could not reach the Kubernetes API (both plan a repair); null when disabled."},
		},
	}
}

// gpuPlacement is where the device plugin goes: the GPU node group's labels
// as a node selector (the node group's own EKS label when it has none) and
// its taints tolerated.
func gpuPlacement(ctx context.Context, m inferenceClusterModel, diags *diag.Diagnostics) (map[string]string, []corev1.Toleration) {
	return nodeGroupPlacement(ctx, m.GPUNodeGroup, gpuDefaults.name, diags)
}

func nodeGroupPlacement(ctx context.Context, obj types.Object, defaultName string, diags *diag.Diagnostics) (map[string]string, []corev1.Toleration) {
	spec := nodeGroupSpec(ctx, obj, diags)
	selector := spec.Labels
	if len(selector) == 0 {
		name := spec.Name
		if name == "" {
			name = defaultName
		}
		selector = map[string]string{"eks.amazonaws.com/nodegroup": name}
	}
	var tols []corev1.Toleration
	for _, t := range spec.Taints {
		tols = append(tols, corev1.Toleration{Key: t.Key, Value: t.Value, Operator: corev1.TolerationOpEqual, Effect: corev1.TaintEffect(kubernetesTaintEffect(t.Effect))})
	}
	sort.Slice(tols, func(i, j int) bool { return tols[i].Key+string(tols[i].Effect) < tols[j].Key+string(tols[j].Effect) })
	return selector, tols
}

// inClusterPlan is what the apply does inside the cluster, decoded from a plan or a state.
type inClusterPlan struct {
	devicePlugin *workloads.DevicePlugin
	monitoring   *monitoringPlan
	// inferenceExtension asks for the InferencePool CRD (inference_cluster_gie.go).
	inferenceExtension bool
}

func (m inferenceClusterModel) inClusterPlan(ctx context.Context, diags *diag.Diagnostics) inClusterPlan {
	var out inClusterPlan
	if m.Addons.IsNull() || m.Addons.IsUnknown() {
		return out
	}
	if o, ok := m.Addons.Attributes()["nvidia_device_plugin"].(types.Object); ok && !o.IsNull() && !o.IsUnknown() {
		var dp devicePluginModel
		diags.Append(o.As(ctx, &dp, asObject)...)
		if dp.Enabled.ValueBool() {
			sel, tols := gpuPlacement(ctx, m, diags)
			plugin, err := workloads.DevicePlugin{Image: dp.Image.ValueString(), NodeSelector: sel, Tolerations: tols}.Mirrored(m.imageMirrors(ctx, diags))
			if err != nil {
				diags.AddAttributeError(path.Root("addons").AtName("nvidia_device_plugin").AtName("image"), "Invalid device plugin image", err.Error())
			}
			out.devicePlugin = &plugin
		}
	}
	out.monitoring = m.monitoringPlan(ctx, diags)
	out.inferenceExtension = inferenceExtensionOn(m.Addons)
	return out
}

// imageMirrors is image_mirrors as the rewrite reads it; none while unknown.
func (m inferenceClusterModel) imageMirrors(ctx context.Context, diags *diag.Diagnostics) imageref.Mirrors {
	if m.ImageMirrors.IsNull() || m.ImageMirrors.IsUnknown() {
		return nil
	}
	var raw map[string]string
	diags.Append(m.ImageMirrors.ElementsAs(ctx, &raw, false)...)
	mirrors, err := imageref.NewMirrors(raw, "image_mirrors")
	if err != nil {
		diags.AddAttributeError(path.Root("image_mirrors"), "Invalid image mirror", err.Error())
	}
	return mirrors
}

// wanted reports whether any in-cluster add-on is on.
func (p inClusterPlan) wanted() bool {
	return p.devicePlugin != nil || p.monitoring != nil || p.inferenceExtension
}

// inClusterKube reaches the cluster with its own endpoint and CA, minting
// EKS tokens from the provider's AWS credentials (re-minted before expiry).
func (r *inferenceClusterResource) inClusterKube(ctx context.Context, m inferenceClusterModel) (*inClusterKube, error) {
	if r.data == nil {
		return nil, fmt.Errorf("the provider is not configured yet")
	}
	var k kubernetesModel
	if d := m.Kubernetes.As(ctx, &k, asObject); d.HasError() {
		return nil, fmt.Errorf("kubernetes: %v", d)
	}
	cfg, err := kube.RESTConfig(ctx, connection{cluster: &k}.target(), r.data.AWS.Config)
	if err != nil {
		return nil, err
	}
	c, err := kube.NewClient(cfg, func(ctx context.Context, msg string, fields map[string]any) { tflog.Info(ctx, msg, fields) })
	if err != nil {
		return nil, err
	}
	return &inClusterKube{c: c, cfg: cfg}, nil
}

// applyInCluster applies the in-cluster add-ons of the planned state after
// the AWS parts: the device plugin (waited until its pods run on every GPU
// node), then monitoring, and prunes what the prior inventory holds beyond
// them. It records the inventory and statuses in state, also on error, so an
// update that fails half way keeps what it made and the next plan repairs it.
func (r *inferenceClusterResource) applyInCluster(ctx context.Context, state *inferenceClusterModel, prior *inferenceClusterModel, password string,
	cl *awsinfra.Cluster) (err error) {
	var diags diag.Diagnostics
	want := state.inClusterPlan(ctx, &diags)
	pool := state.nodePoolPlan(ctx, cl, &diags)
	var previous []kube.Ref
	var priorMonitoring *monitoringPlan
	if prior != nil {
		diags.Append(inventoryRefs(ctx, prior.InClusterInventory, &previous)...)
		priorMonitoring = prior.monitoringPlan(ctx, &diags)
		if priorMonitoring == nil {
			priorMonitoring = prior.recordedMonitoring(ctx, &diags)
		}
	}
	if diags.HasError() {
		return fmt.Errorf("%v", diags)
	}
	act := monitoringActs(*state)
	inventory := previous
	defer func() {
		state.InClusterInventory = inventoryList(inventory)
		state.Addons = knownInCluster(state.Addons, err)
		if st, ok := state.Compute.Attributes()["status"]; ok && st.IsUnknown() {
			state.Compute = withComputeStatus(state.Compute, "failed: "+fmt.Sprint(err))
		}
	}()
	setStatus := func(key, status string) { state.Addons = withInClusterStatus(state.Addons, key, status) }
	if !want.wanted() && pool == nil && len(previous) == 0 && priorMonitoring == nil {
		setStatus("nvidia_device_plugin", "")
		state.Addons = withMonitoringRelease(state.Addons, nil)
		return nil
	}
	k, err := r.inClusterKube(ctx, *state)
	if err != nil {
		return fmt.Errorf("reaching the cluster's Kubernetes API for the in-cluster add-ons: %w", err)
	}
	var desired []kube.Ref
	if want.inferenceExtension {
		// First: quick, and what a gateway-mode router in the same apply waits on.
		if err := applyInferenceExtension(ctx, k.c, state); err != nil {
			return err
		}
	}
	if pool != nil {
		// Before the device plugin and the fleets: GPU nodes come from it.
		refs, err := applyNodePool(ctx, k, pool)
		inventory = unionRefs(inventory, refs)
		desired = append(desired, refs...)
		if err != nil {
			state.Compute = withComputeStatus(state.Compute, "failed: "+err.Error())
			return err
		}
		state.Compute = withComputeStatus(state.Compute, nodePoolApplied)
	}
	if want.devicePlugin != nil {
		objs, err := want.devicePlugin.Objects()
		if err != nil {
			return err
		}
		tflog.Info(ctx, "applying the NVIDIA device plugin", map[string]any{"node_selector": want.devicePlugin.NodeSelector})
		// Force: llmd owns this DaemonSet, and the apply is what repairs an edit.
		if err := k.c.Apply(ctx, objs, true); err != nil {
			setStatus("nvidia_device_plugin", "failed: "+err.Error())
			return fmt.Errorf("applying the NVIDIA device plugin: %w", err)
		}
		inventory = unionRefs(inventory, kube.Refs(objs))
		desired = append(desired, kube.Refs(objs)...)
		if err := waitDaemonSet(ctx, k.c, workloads.DevicePluginNamespace, workloads.DevicePluginName); err != nil {
			setStatus("nvidia_device_plugin", "failed: "+err.Error())
			return err
		}
		setStatus("nvidia_device_plugin", devicePluginApplied)
	} else {
		setStatus("nvidia_device_plugin", "")
	}
	refs, err := r.applyMonitoring(ctx, k, state, want.monitoring, priorMonitoring, password, act)
	inventory = unionRefs(inventory, refs)
	desired = append(desired, refs...)
	if err != nil {
		return err
	}
	if err := k.c.Delete(ctx, minusRefs(previous, desired)); err != nil {
		return fmt.Errorf("removing in-cluster add-ons turned off: %w", err)
	}
	inventory = desired
	return nil
}

// minusRefs is what a holds and b does not.
func minusRefs(a, b []kube.Ref) []kube.Ref {
	keep := map[kube.Ref]bool{}
	for _, r := range b {
		keep[r] = true
	}
	var out []kube.Ref
	for _, r := range a {
		if !keep[r] {
			out = append(out, r)
		}
	}
	return out
}

// knownInCluster replaces what the apply left unknown (it stopped before
// that step) with null, or "failed: ..." for a status.
func knownInCluster(a types.Object, err error) types.Object {
	for _, key := range []string{"nvidia_device_plugin", "monitoring", "inference_extension"} {
		o, ok := a.Attributes()[key].(types.Object)
		if !ok || o.IsNull() || o.IsUnknown() {
			continue
		}
		for name, v := range o.Attributes() {
			if !v.IsUnknown() {
				continue
			}
			switch {
			case name == "status" && err != nil:
				a = withAddonAttr(a, key, name, types.StringValue("failed: "+err.Error()))
			case name == "revision":
				a = withAddonAttr(a, key, name, types.Int64Null())
			default:
				a = withAddonAttr(a, key, name, types.StringNull())
			}
		}
	}
	return a
}

// readInCluster refreshes the in-cluster add-ons' statuses: drift of the
// device plugin's DaemonSet, the monitoring release and its objects. An
// import (no prior add-ons) records what it finds. A cluster whose API cannot
// be reached records `unreachable: ...`, so the AWS parts stay manageable and
// the plan shows that the add-ons need attention.
func (r *inferenceClusterResource) readInCluster(ctx context.Context, state *inferenceClusterModel, importing bool, cl *awsinfra.Cluster, diags *diag.Diagnostics) {
	want := state.inClusterPlan(ctx, diags)
	pool := state.nodePoolPlan(ctx, cl, diags)
	if diags.HasError() || (!want.wanted() && pool == nil && !importing) {
		if state.InClusterInventory.IsNull() {
			state.InClusterInventory = inventoryList(nil)
		}
		return
	}
	k, err := r.inClusterKube(ctx, *state)
	if err != nil {
		// No client for what AWS reports as the endpoint and CA: as unreachable.
		err = &net.OpError{Op: "connect", Net: "tcp", Err: err}
	} else {
		err = r.refreshInCluster(ctx, k, state, want, importing)
		if err == nil && pool != nil {
			err = refreshNodePool(ctx, k, state, pool)
		}
	}
	if err == nil {
		return
	}
	if !unreachable(err) {
		diags.AddError("Reading the in-cluster add-ons of "+state.Name.ValueString(), err.Error())
		return
	}
	diags.AddWarning("In-cluster add-ons not read", "The Kubernetes API of "+state.Name.ValueString()+" could not be reached: "+err.Error()+
		"\n\nThe next apply tries again. An import records the in-cluster add-ons as off; a plan that enables them then applies them again, which adopts what exists.")
	if importing {
		state.Addons = withInClusterEnabled(state.Addons, false, false)
		state.InClusterInventory = inventoryList(nil)
		return
	}
	if want.devicePlugin != nil {
		state.Addons = withInClusterStatus(state.Addons, "nvidia_device_plugin", "unreachable: "+err.Error())
	}
	if want.monitoring != nil {
		state.Addons = withInClusterStatus(state.Addons, "monitoring", "unreachable: "+err.Error())
	}
	if pool != nil {
		state.Compute = withComputeStatus(state.Compute, "unreachable: "+err.Error())
	}
	if want.inferenceExtension {
		state.Addons = withInClusterStatus(state.Addons, "inference_extension", "unreachable: "+err.Error())
	}
}

func (r *inferenceClusterResource) refreshInCluster(ctx context.Context, k *inClusterKube, state *inferenceClusterModel, want inClusterPlan, importing bool) error {
	c := k.c
	var found []kube.Ref
	if importing {
		ds, err := c.Typed.AppsV1().DaemonSets(workloads.DevicePluginNamespace).Get(ctx, workloads.DevicePluginName, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			want.devicePlugin = nil
		case err != nil:
			return fmt.Errorf("reading DaemonSet %s/%s: %w", workloads.DevicePluginNamespace, workloads.DevicePluginName, err)
		case ds.Labels["app.kubernetes.io/managed-by"] != "llmd":
			want.devicePlugin = nil // someone else's plugin (the GPU operator's): not ours to import
		default:
			if cs := ds.Spec.Template.Spec.Containers; len(cs) > 0 {
				want.devicePlugin.Image = cs[0].Image
				state.Addons = withDevicePluginImage(state.Addons, cs[0].Image)
			}
		}
	}
	if want.devicePlugin != nil {
		objs, err := want.devicePlugin.Objects()
		if err != nil {
			return err
		}
		drift, err := c.Drift(ctx, objs)
		if err != nil {
			return err
		}
		state.Addons = withInClusterStatus(state.Addons, "nvidia_device_plugin", driftStatus(drift, devicePluginApplied))
		found = append(found, kube.Refs(objs)...)
	}
	if want.inferenceExtension {
		if err := refreshInferenceExtension(ctx, c, state); err != nil {
			return err
		}
	}
	monitoringFound, refs, err := r.readMonitoring(ctx, k, state, want.monitoring, importing)
	if err != nil {
		return err
	}
	found = append(found, refs...)
	if importing {
		state.Addons = withInClusterEnabled(state.Addons, want.devicePlugin != nil, monitoringFound)
		if want.devicePlugin == nil {
			state.Addons = withInClusterStatus(state.Addons, "nvidia_device_plugin", "")
		}
	}
	if state.InClusterInventory.IsNull() || importing {
		state.InClusterInventory = inventoryList(found)
	}
	return nil
}

// deleteInCluster removes the in-cluster add-ons before the cluster goes:
// the monitoring release, then the inventory. A cluster whose API cannot be
// reached is deleted anyway (its objects go with it), with a warning.
func (r *inferenceClusterResource) deleteInCluster(ctx context.Context, state inferenceClusterModel, diags *diag.Diagnostics) bool {
	var refs []kube.Ref
	diags.Append(inventoryRefs(ctx, state.InClusterInventory, &refs)...)
	if len(refs) == 0 && !state.monitoringInstalledBefore() {
		return true
	}
	k, err := r.inClusterKube(ctx, state)
	if err == nil && state.nodePoolOn() {
		// First: the NodePool's nodes are instances only Karpenter (or Auto Mode) terminates.
		err = removeNodePool(ctx, k, state.appliedPool(ctx, diags), state.karpenterRelease(ctx, diags))
	}
	if err == nil {
		err = r.uninstallMonitoring(ctx, k, state)
	}
	if err == nil {
		err = k.c.Delete(ctx, refs)
	}
	switch {
	case err == nil:
		return true
	case unreachable(err):
		diags.AddWarning("In-cluster add-ons not removed first", "The Kubernetes API of "+state.Name.ValueString()+" could not be reached ("+err.Error()+
			"); the cluster is deleted with them. Volumes that monitoring claimed (storage_gib) may outlive it: check for EBS volumes tagged with the cluster's name.")
		return true
	}
	diags.AddError("Deleting the in-cluster add-ons of "+state.Name.ValueString(), err.Error()+
		"\n\nNothing in AWS was deleted yet; fix the cause and destroy again.")
	return false
}

// unreachable tells a cluster that cannot be reached at all (no such host,
// refused, timed out) from one that answers with an error.
func unreachable(err error) bool {
	var netErr net.Error
	var dnsErr *net.DNSError
	var opErr *net.OpError
	return errors.As(err, &dnsErr) || errors.As(err, &opErr) || (errors.As(err, &netErr) && netErr.Timeout())
}

// driftStatus is the status a refresh records: ok while nothing differs.
func driftStatus(drift []kube.Difference, ok string) string {
	if len(drift) == 0 {
		return ok
	}
	var what []string
	for _, d := range drift {
		what = append(what, d.String())
	}
	return "drift: " + strings.Join(what, "; ")
}

// waitDaemonSet waits until the DaemonSet's newest generation runs ready on
// every node it selects, logging where it stands.
func waitDaemonSet(ctx context.Context, c *kube.Client, namespace, name string) error {
	ctx, cancel := context.WithTimeout(ctx, devicePluginRollout)
	defer cancel()
	began, lastLog := time.Now(), time.Now()
	for {
		ds, err := c.Typed.AppsV1().DaemonSets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("reading DaemonSet %s/%s: %w", namespace, name, err)
		}
		s := ds.Status
		summary := fmt.Sprintf("%d/%d nodes ready, %d updated", s.NumberReady, s.DesiredNumberScheduled, s.UpdatedNumberScheduled)
		if s.ObservedGeneration >= ds.Generation && s.UpdatedNumberScheduled == s.DesiredNumberScheduled &&
			s.NumberReady == s.DesiredNumberScheduled && s.NumberAvailable == s.DesiredNumberScheduled {
			tflog.Info(ctx, "DaemonSet "+namespace+"/"+name+" rolled out", map[string]any{"summary": summary, "elapsed": time.Since(began).Round(time.Second).String()})
			return nil
		}
		if time.Since(lastLog) >= c.Progress {
			lastLog = time.Now()
			tflog.Info(ctx, "waiting for DaemonSet "+namespace+"/"+name+": "+summary, map[string]any{"elapsed": time.Since(began).Round(time.Second).String()})
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("DaemonSet %s/%s did not roll out within %s: %s (kubectl -n %s get pods -l llmd.dev/addon=%s -o wide shows which nodes lag)",
				namespace, name, devicePluginRollout, summary, namespace, name)
		case <-time.After(c.Poll):
		}
	}
}

// unionRefs is a then b without repeats.
func unionRefs(a, b []kube.Ref) []kube.Ref {
	seen := map[kube.Ref]bool{}
	var out []kube.Ref
	for _, r := range append(append([]kube.Ref{}, a...), b...) {
		if !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	return out
}

// withInClusterStatus sets one in-cluster add-on's status ("" for null).
func withInClusterStatus(addons types.Object, key, status string) types.Object {
	v := types.StringNull()
	if status != "" {
		v = types.StringValue(status)
	}
	return withAddonAttr(addons, key, "status", v)
}

func withDevicePluginImage(addons types.Object, image string) types.Object {
	return withAddonAttr(addons, "nvidia_device_plugin", "image", types.StringValue(image))
}

// withInClusterEnabled records what an import found.
func withInClusterEnabled(addons types.Object, devicePlugin, monitoring bool) types.Object {
	addons = withAddonAttr(addons, "nvidia_device_plugin", "enabled", types.BoolValue(devicePlugin))
	return withAddonAttr(addons, "monitoring", "enabled", types.BoolValue(monitoring))
}

// withAddonAttr replaces one attribute of one add-on of the addons object.
func withAddonAttr(addons types.Object, key, name string, value attr.Value) types.Object {
	if addons.IsNull() || addons.IsUnknown() {
		return addons
	}
	all := addons.Attributes()
	o, ok := all[key].(types.Object)
	if !ok || o.IsNull() || o.IsUnknown() {
		return addons
	}
	v := o.Attributes()
	v[name] = value
	all[key] = types.ObjectValueMust(o.AttributeTypes(context.Background()), v)
	return types.ObjectValueMust(addonsTypes, all)
}

// planInCluster fills in the in-cluster add-ons' computed values: kept from
// state while nothing asks for a change, unknown where the apply will act
// (newly enabled, a drifted or failed add-on, changed settings).
func planInCluster(plan *inferenceClusterModel, prior *inferenceClusterModel) {
	if plan.Addons.IsNull() || plan.Addons.IsUnknown() {
		plan.InClusterInventory = types.ListUnknown(types.StringType)
		return
	}
	var priorAddons map[string]attr.Value
	if prior != nil && !prior.Addons.IsNull() && !prior.Addons.IsUnknown() {
		priorAddons = prior.Addons.Attributes()
	}
	kept := true
	// New mirrors are a new image for the plugin's pods.
	sameMirrors := prior != nil && plan.ImageMirrors.Equal(prior.ImageMirrors)
	dpKept := planDevicePlugin(plan, priorAddons, sameMirrors)
	monKept := planMonitoring(plan, prior, priorAddons)
	gieKept := planInferenceExtension(plan, priorAddons)
	kept = dpKept && monKept && gieKept
	switch {
	case prior != nil && kept && !prior.InClusterInventory.IsNull() && !prior.InClusterInventory.IsUnknown():
		plan.InClusterInventory = prior.InClusterInventory
	default:
		plan.InClusterInventory = types.ListUnknown(types.StringType)
	}
}

// planDevicePlugin reports whether the device plugin stays as it is;
// sameMirrors says image_mirrors did not change.
func planDevicePlugin(plan *inferenceClusterModel, priorAddons map[string]attr.Value, sameMirrors bool) bool {
	o, ok := plan.Addons.Attributes()["nvidia_device_plugin"].(types.Object)
	if !ok || o.IsNull() || o.IsUnknown() {
		return false
	}
	v := o.Attributes()
	var p map[string]attr.Value
	if po, ok := priorAddons["nvidia_device_plugin"].(types.Object); ok && !po.IsNull() && !po.IsUnknown() {
		p = po.Attributes()
	}
	enabled := v["enabled"].Equal(types.BoolValue(true))
	wasEnabled := p != nil && p["enabled"].Equal(types.BoolValue(true))
	kept := enabled == wasEnabled
	switch {
	case !enabled:
		v["status"] = types.StringNull()
	case wasEnabled && p["status"].Equal(types.StringValue(devicePluginApplied)) && v["image"].Equal(p["image"]) && sameMirrors:
		v["status"] = p["status"]
	default:
		v["status"] = types.StringUnknown()
		kept = false
	}
	plan.Addons = withAddonObject(plan.Addons, "nvidia_device_plugin", types.ObjectValueMust(devicePluginTypes, v))
	return kept
}

func withAddonObject(addons types.Object, key string, o types.Object) types.Object {
	all := addons.Attributes()
	all[key] = o
	return types.ObjectValueMust(addonsTypes, all)
}
