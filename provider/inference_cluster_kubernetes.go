package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// kubernetesFromState plans the cluster's `kubernetes` object: how to reach
// the API stays what it was (the endpoint of an updated cluster does not
// change), while the GPU node facts are known after apply whenever the GPU
// node group changes, so the fleet that reads them plans its update too.
type kubernetesFromState struct{}

var _ planmodifier.Object = kubernetesFromState{}

func (kubernetesFromState) Description(context.Context) string {
	return "Keeps the endpoint from state; GPU node facts are known after apply when the GPU node group changes."
}

func (m kubernetesFromState) MarkdownDescription(ctx context.Context) string {
	return m.Description(ctx)
}

func (kubernetesFromState) PlanModifyObject(ctx context.Context, req planmodifier.ObjectRequest, resp *planmodifier.ObjectResponse) {
	if req.StateValue.IsNull() || !req.PlanValue.IsUnknown() || req.ConfigValue.IsUnknown() {
		return
	}
	var planned, prior types.Object
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("gpu_node_group"), &planned)...)
	resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root("gpu_node_group"), &prior)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if sameGPUNodes(planned, prior) {
		resp.PlanValue = req.StateValue
		return
	}
	attrs := req.StateValue.Attributes()
	next := make(map[string]attr.Value, len(attrs))
	for k, v := range attrs {
		next[k] = v
	}
	next["gpu_instance_type"] = types.StringUnknown()
	next["gpu_node_labels"] = types.MapUnknown(types.StringType)
	next["gpu_node_taints"] = types.ListUnknown(types.StringType)
	obj, diags := types.ObjectValue(kubernetesTypes, next)
	resp.Diagnostics.Append(diags...)
	resp.PlanValue = obj
}

// sameGPUNodes compares what the kubernetes object reports of the GPU node
// group; other attributes (sizes, versions known only after apply) do not
// change where GPU pods go.
func sameGPUNodes(planned, prior types.Object) bool {
	if planned.IsNull() || prior.IsNull() || planned.IsUnknown() {
		return planned.IsNull() && prior.IsNull()
	}
	p, s := planned.Attributes(), prior.Attributes()
	for _, k := range []string{"instance_type", "labels", "taints"} {
		if p[k] == nil || p[k].IsUnknown() || !p[k].Equal(s[k]) {
			return false
		}
	}
	return true
}
