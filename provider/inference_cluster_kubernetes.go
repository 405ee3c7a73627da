package provider

import (
	"context"
	"slices"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// kubernetesFromState plans the cluster's `kubernetes` object: how to reach
// the API stays what it was (the endpoint of an updated cluster does not
// change), while a node group's facts are known after apply whenever that
// node group changes (the GPU group's for the fleet, the system group's for
// the router and the staging Job), so what reads them plans its update too.
type kubernetesFromState struct{}

var _ planmodifier.Object = kubernetesFromState{}

func (kubernetesFromState) Description(context.Context) string {
	return "Keeps the endpoint from state; node group facts are known after apply when that node group changes."
}

func (m kubernetesFromState) MarkdownDescription(ctx context.Context) string {
	return m.Description(ctx)
}

// nodeFacts are, per node group, the attributes of the kubernetes object
// that report it and the node group's attributes they come from.
var nodeFacts = []struct {
	group    string
	reported map[string]attr.Value
	compared []string
}{
	{"gpu_node_group", map[string]attr.Value{"gpu_instance_type": types.StringUnknown(), "gpu_node_labels": types.MapUnknown(types.StringType),
		"gpu_node_taints": types.ListUnknown(types.StringType), "gpu_node_desired_size": types.Int64Unknown()}, []string{"instance_type", "labels", "taints", "desired_size"}},
	{"system_node_group", map[string]attr.Value{"system_node_labels": types.MapUnknown(types.StringType),
		"system_node_taints": types.ListUnknown(types.StringType), "system_node_desired_size": types.Int64Unknown()}, []string{"labels", "taints", "desired_size"}},
	// The mode decides what gpu_node_desired_size reports (max_size with Karpenter).
	{"compute", map[string]attr.Value{"gpu_node_desired_size": types.Int64Unknown()}, []string{"mode"}},
}

func (kubernetesFromState) PlanModifyObject(ctx context.Context, req planmodifier.ObjectRequest, resp *planmodifier.ObjectResponse) {
	if req.StateValue.IsNull() || !req.PlanValue.IsUnknown() || req.ConfigValue.IsUnknown() {
		return
	}
	attrs := req.StateValue.Attributes()
	next := make(map[string]attr.Value, len(attrs))
	for k, v := range attrs {
		next[k] = v
	}
	var plannedCompute types.Object
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("compute"), &plannedCompute)...)
	for _, f := range nodeFacts {
		var planned, prior types.Object
		resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root(f.group), &planned)...)
		resp.Diagnostics.Append(req.State.GetAttribute(ctx, path.Root(f.group), &prior)...)
		if resp.Diagnostics.HasError() {
			return
		}
		// A state written before an attribute existed holds it null: it is
		// known after apply too.
		unreported := false
		for k := range f.reported {
			unreported = unreported || (!planned.IsNull() && (next[k] == nil || next[k].IsNull()))
		}
		compared := f.compared
		if f.group == "gpu_node_group" && nodePoolMode(computeMode(plannedCompute)) {
			compared = append(slices.Clone(compared), "max_size")
		}
		same := sameNodes(planned, prior, compared)
		if f.group == "compute" {
			// A state from before compute existed ran node groups.
			same = computeMode(planned) != "" && computeMode(planned) == computeMode(prior)
		}
		if unreported || !same {
			for k, v := range f.reported {
				next[k] = v
			}
		}
	}
	// The mirrors are configuration: the planned object carries the planned ones.
	var mirrors types.Map
	resp.Diagnostics.Append(req.Plan.GetAttribute(ctx, path.Root("image_mirrors"), &mirrors)...)
	next["image_mirrors"] = mirrors
	obj, diags := types.ObjectValue(kubernetesTypes, next)
	resp.Diagnostics.Append(diags...)
	resp.PlanValue = obj
}

// sameNodes compares what the kubernetes object reports of a node group;
// other attributes (versions known only after apply) do not change where
// pods go.
func sameNodes(planned, prior types.Object, compared []string) bool {
	if planned.IsNull() || prior.IsNull() || planned.IsUnknown() {
		return planned.IsNull() && prior.IsNull()
	}
	p, s := planned.Attributes(), prior.Attributes()
	for _, k := range compared {
		if p[k] == nil || p[k].IsUnknown() || !p[k].Equal(s[k]) {
			return false
		}
	}
	return true
}
