package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/llmd-dev/terraform-provider-llmd/internal/addons"
	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
)

// The in-cluster add-on inference_extension: the Gateway API Inference
// Extension's InferencePool CRD, pinned and embedded (internal/addons),
// which gateway-mode routers need. Unlike the other add-ons it is off
// unless set, so clusters made before it plan no change, and it is never
// in the in-cluster inventory: turning it off or destroying the add-on
// leaves the CRD, since deleting a CRD deletes every InferencePool.

// inferenceExtensionApplied is its status while the live CRD matches.
const inferenceExtensionApplied = "applied"

// inferenceExtensionWait bounds the wait for the CRD to be served.
const inferenceExtensionWait = 2 * time.Minute

var (
	inferenceExtensionTypes = map[string]attr.Type{"enabled": types.BoolType, "version": types.StringType, "status": types.StringType}
	inferenceExtensionType  = types.ObjectType{AttrTypes: inferenceExtensionTypes}
)

func inferenceExtensionAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{Optional: true,
		MarkdownDescription: "The Gateway API Inference Extension's `InferencePool` CRD (`inference.networking.k8s.io/v1`), GIE " + addons.GIEVersion +
			", embedded in the provider: what `llmd_prefix_router` needs in gateway mode, so one apply can hold the cluster, a fleet and a gateway-mode router. " +
			"Applied server-side (field manager `llmd`, taking over an earlier install's fields) once the node groups are active, and waited until served. " +
			"Off unless set (`inference_extension = {}` turns it on). A CRD deleted or edited behind Terraform's back shows in the plan and the apply repairs it. " +
			"Turned off, or on destroy, the CRD stays in the cluster: deleting it would delete every InferencePool, other tools' included (`kubectl delete crd inferencepools.inference.networking.k8s.io` removes it). " +
			"The gateway itself (Envoy Gateway, kgateway, Istio...) and the Gateway API CRDs are the team's.",
		Attributes: map[string]schema.Attribute{
			"enabled": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				MarkdownDescription: "Install the CRD; default `true` once `inference_extension` is set."},
			"version": schema.StringAttribute{Computed: true, MarkdownDescription: "The GIE release whose CRD is installed (`" + addons.GIEVersion + "`)."},
			"status": schema.StringAttribute{Computed: true,
				MarkdownDescription: "`applied` while the CRD matches; `drift: ...`, `unreachable: ...` or `failed: ...` plan a repair; null when off."},
		}}
}

// inferenceExtensionOn reports whether a plan or state asks for the CRD.
func inferenceExtensionOn(a types.Object) bool {
	if a.IsNull() || a.IsUnknown() {
		return false
	}
	o, ok := a.Attributes()["inference_extension"].(types.Object)
	if !ok || o.IsNull() || o.IsUnknown() {
		return false
	}
	return o.Attributes()["enabled"].Equal(types.BoolValue(true))
}

// applyInferenceExtension applies the CRD and records the status.
func applyInferenceExtension(ctx context.Context, c *kube.Client, state *inferenceClusterModel) error {
	tflog.Info(ctx, "applying the InferencePool CRD", map[string]any{"gie": addons.GIEVersion})
	err := addons.ApplyInferencePoolCRD(ctx, c, inferenceExtensionWait, func(f string, a ...any) { tflog.Info(ctx, f, map[string]any{"args": a}) })
	if err != nil {
		state.Addons = withInClusterStatus(state.Addons, "inference_extension", "failed: "+err.Error())
		return err
	}
	state.Addons = withInClusterStatus(state.Addons, "inference_extension", inferenceExtensionApplied)
	state.Addons = withAddonAttr(state.Addons, "inference_extension", "version", types.StringValue(addons.GIEVersion))
	return nil
}

// refreshInferenceExtension records drift of the live CRD from the embedded one.
func refreshInferenceExtension(ctx context.Context, c *kube.Client, state *inferenceClusterModel) error {
	crd, err := addons.InferencePoolCRD()
	if err != nil {
		return err
	}
	drift, err := c.Drift(ctx, []kube.Object{crd})
	if err != nil {
		return err
	}
	state.Addons = withInClusterStatus(state.Addons, "inference_extension", driftStatus(drift, inferenceExtensionApplied))
	return nil
}

// planInferenceExtension fills the add-on's computed values: kept while it
// stays applied, unknown where the apply acts; it reports whether it stays.
func planInferenceExtension(plan *inferenceClusterModel, priorAddons map[string]attr.Value) bool {
	o, ok := plan.Addons.Attributes()["inference_extension"].(types.Object)
	if !ok || o.IsNull() || o.IsUnknown() {
		return true
	}
	v := o.Attributes()
	var p map[string]attr.Value
	if po, ok := priorAddons["inference_extension"].(types.Object); ok && !po.IsNull() && !po.IsUnknown() {
		p = po.Attributes()
	}
	enabled := v["enabled"].Equal(types.BoolValue(true))
	switch {
	case !enabled:
		v["status"], v["version"] = types.StringNull(), types.StringNull()
	case p != nil && p["status"].Equal(types.StringValue(inferenceExtensionApplied)) && p["version"].Equal(types.StringValue(addons.GIEVersion)):
		v["status"], v["version"] = p["status"], p["version"]
	default:
		v["status"], v["version"] = types.StringUnknown(), types.StringUnknown()
		plan.Addons = withAddonObject(plan.Addons, "inference_extension", types.ObjectValueMust(inferenceExtensionTypes, v))
		return false
	}
	plan.Addons = withAddonObject(plan.Addons, "inference_extension", types.ObjectValueMust(inferenceExtensionTypes, v))
	return true
}
