package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/llmd-dev/terraform-provider-llmd/internal/awsinfra"
)

// capacityReservationModel is gpu_node_group.capacity_reservation.
type capacityReservationModel struct {
	ID       types.String `tfsdk:"id"`
	Tags     types.Map    `tfsdk:"tags"`
	Fallback types.String `tfsdk:"fallback"`
}

// capacityReservationPattern is the shape of an EC2 capacity reservation id.
var capacityReservationPattern = regexp.MustCompile(`^cr-[0-9a-z]+$`)

var capacityReservationTypes = map[string]attr.Type{"id": types.StringType, "tags": types.MapType{ElemType: types.StringType}, "fallback": types.StringType}

func capacityReservationAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional: true,
		MarkdownDescription: "Run the nodes in an EC2 On-Demand Capacity Reservation or a Capacity Block for ML first, named by `id` or selected by `tags` " +
			"(GPU node group only). The node group then launches from a launch template the provider makes (`llmd-<cluster>-<node group>`) with the reservation " +
			"in its `CapacityReservationSpecification` and its disk size, and only in the reservation's zone. A Capacity Block needs `capacity_type = \"CAPACITY_BLOCK\"`, " +
			"a reservation `ON_DEMAND`. The plan checks that the reservation exists, reserves `instance_type` in a zone of the cluster, is active (a Capacity Block only " +
			"inside its window: before it, `desired_size` and `min_size` must be 0) and how many instances it has free, and says what happens to the rest. " +
			"Adding, changing or removing it replaces this node group (EKS sets a node group's launch template when it makes it); a node group without it has no launch template, as before.",
		Attributes: map[string]schema.Attribute{
			"id": schema.StringAttribute{Optional: true, Computed: true,
				Validators: []validator.String{stringvalidator.RegexMatches(capacityReservationPattern, "must be a capacity reservation id such as cr-0123456789abcdef0"),
					stringvalidator.ConflictsWith(path.MatchRelative().AtParent().AtName("tags"))},
				MarkdownDescription: "Reservation id (`cr-...`). With `tags`, the one they selected: the matching reservation for `instance_type` with the most free instances, chosen when the node group is made."},
			"tags": schema.MapAttribute{ElementType: types.StringType, Optional: true, Validators: []validator.Map{mapvalidator.SizeAtLeast(1)},
				MarkdownDescription: "Select the reservation by its tags instead of `id` (active or scheduled reservations of `instance_type` carrying all of them)."},
			"fallback": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(awsinfra.FallbackNone),
				Validators: []validator.String{stringvalidator.OneOf(awsinfra.FallbackNone, awsinfra.FallbackOnDemand)},
				MarkdownDescription: "What instances beyond the reservation's free count do: `none` (default; they fail to launch, the launch template's preference " +
					"`capacity-reservations-only`) or `on_demand` (they run as On-Demand Instances at On-Demand prices, preference `open`; only for an open On-Demand " +
					"Capacity Reservation: a targeted one or a Capacity Block never falls back). A plan whose reservation is too small for `desired_size` warns with the numbers, " +
					"or fails with `none`."},
		},
	}
}

// reservationSpec is the plan's reservation for awsinfra; nil for none. An
// id not yet known (a selection by tags) is left for the apply to resolve.
func reservationSpec(ctx context.Context, obj types.Object, diags *diag.Diagnostics) *awsinfra.CapacityReservationSpec {
	if obj.IsNull() || obj.IsUnknown() {
		return nil
	}
	var m capacityReservationModel
	diags.Append(obj.As(ctx, &m, asObject)...)
	out := &awsinfra.CapacityReservationSpec{Fallback: m.Fallback.ValueString(), Tags: map[string]string{}}
	if out.Fallback == "" {
		out.Fallback = awsinfra.FallbackNone
	}
	if !m.Tags.IsNull() && !m.Tags.IsUnknown() {
		diags.Append(m.Tags.ElementsAs(ctx, &out.Tags, false)...)
	}
	if !m.ID.IsUnknown() {
		out.ID = m.ID.ValueString()
	}
	if len(out.Tags) > 0 && out.ID == "" {
		return out
	}
	out.Tags = nil
	return out
}

// reservationObject is the reservation as read back: the id and fallback
// the launch template records, the selection's tags the prior's (AWS knows
// the reservation, not how it was chosen).
func reservationObject(r *awsinfra.CapacityReservationSpec, prior types.Object) types.Object {
	if r == nil {
		return types.ObjectNull(capacityReservationTypes)
	}
	tags := types.MapNull(types.StringType)
	if !prior.IsNull() && !prior.IsUnknown() {
		if pr, ok := prior.Attributes()["capacity_reservation"].(types.Object); ok && !pr.IsNull() && !pr.IsUnknown() {
			if t, ok := pr.Attributes()["tags"].(types.Map); ok && !t.IsUnknown() {
				tags = t
			}
		}
	}
	return types.ObjectValueMust(capacityReservationTypes, map[string]attr.Value{"id": types.StringValue(r.ID), "tags": tags, "fallback": types.StringValue(r.Fallback)})
}

// planReservation keeps the reservation a selection by tags resolved to
// while the selection stays, and reports whether the reservation changes
// (which replaces the node group).
func planReservation(v, old map[string]attr.Value) bool {
	plan, _ := v["capacity_reservation"].(types.Object)
	var prior types.Object
	if old != nil {
		prior, _ = old["capacity_reservation"].(types.Object)
	}
	if plan.IsUnknown() {
		return false
	}
	if plan.IsNull() || prior.IsNull() || prior.IsUnknown() {
		return plan.IsNull() != (prior.IsNull() || prior.IsUnknown()) && old != nil
	}
	p, o := plan.Attributes(), prior.Attributes()
	if p["id"].IsUnknown() && p["tags"].Equal(o["tags"]) {
		p["id"] = o["id"]
		v["capacity_reservation"] = types.ObjectValueMust(capacityReservationTypes, p)
	}
	return !p["fallback"].Equal(o["fallback"]) || !p["tags"].Equal(o["tags"]) || (!p["id"].IsUnknown() && !p["id"].Equal(o["id"]))
}

// withReservationID sets the id preflight resolved where the plan has none yet.
func withReservationID(plan *inferenceClusterModel, id string) {
	if id == "" || plan.GPUNodeGroup.IsNull() || plan.GPUNodeGroup.IsUnknown() {
		return
	}
	v := plan.GPUNodeGroup.Attributes()
	r, ok := v["capacity_reservation"].(types.Object)
	if !ok || r.IsNull() || r.IsUnknown() || !r.Attributes()["id"].IsUnknown() {
		return
	}
	a := r.Attributes()
	a["id"] = types.StringValue(id)
	v["capacity_reservation"] = types.ObjectValueMust(capacityReservationTypes, a)
	plan.GPUNodeGroup = types.ObjectValueMust(nodeGroupTypes, v)
}

// carriesDevicePlugin reports whether an EKS AMI type ships the NVIDIA
// device plugin: the Bottlerocket NVIDIA variants do (Bottlerocket's
// NVIDIA variants run the plugin as a host service; EKS user guide
// "Amazon EKS optimized accelerated AMIs"), the AL2023 NVIDIA AMI has the
// driver but not the plugin.
func carriesDevicePlugin(amiType string) bool {
	return strings.HasPrefix(amiType, "BOTTLEROCKET_") && strings.Contains(amiType, "_NVIDIA")
}

// gpuNodesCarryDevicePlugin reports whether a plan's GPU nodes come with the
// NVIDIA device plugin: EKS Auto Mode's do (it runs the driver and the
// plugin, not as a DaemonSet; EKS user guide, Auto Mode's "Deploy an
// accelerated workload"), and so do Bottlerocket NVIDIA AMIs'.
func gpuNodesCarryDevicePlugin(m inferenceClusterModel) bool {
	return m.autoModeOn() || carriesDevicePlugin(gpuAMIType(m.GPUNodeGroup))
}

// gpuAMIType is the GPU node group's AMI type in a configuration or plan;
// the default when unset, "" while unknown.
func gpuAMIType(obj types.Object) string {
	if obj.IsUnknown() {
		return ""
	}
	if obj.IsNull() {
		return gpuDefaults.amiType
	}
	a, ok := obj.Attributes()["ami_type"].(types.String)
	switch {
	case !ok || a.IsUnknown():
		return ""
	case a.IsNull():
		return gpuDefaults.amiType
	}
	return a.ValueString()
}

// validateGPUCapacity refuses what no plan can make work: a second device
// plugin on an AMI that carries one (two plugins would both advertise
// nvidia.com/gpu from the same devices), and a reservation on the system
// node group.
func validateGPUCapacity(m inferenceClusterModel, diags *diag.Diagnostics) {
	if gpuNodesCarryDevicePlugin(m) && devicePluginSetting(m.Addons).Equal(types.BoolValue(true)) {
		carrier, fix := "gpu_node_group.ami_type "+gpuAMIType(m.GPUNodeGroup), "or use ami_type = \"AL2023_x86_64_NVIDIA\", which needs the plugin"
		if m.autoModeOn() {
			carrier, fix = "compute.mode = \"auto_mode\" (Auto Mode's AMI)", "or use compute.mode = \"karpenter\" with an AL2023 AMI, which needs the plugin"
		}
		diags.AddAttributeError(path.Root("addons").AtName("nvidia_device_plugin").AtName("enabled"), "Second NVIDIA device plugin",
			fmt.Sprintf("%s carries the NVIDIA device plugin already, and a second one on the same GPUs would advertise them twice: "+
				"remove addons.nvidia_device_plugin.enabled (it defaults to false where the nodes carry one), %s", carrier, fix))
	}
	if !m.GPUNodeGroup.IsNull() && !m.GPUNodeGroup.IsUnknown() {
		a := m.GPUNodeGroup.Attributes()
		r, _ := a["capacity_reservation"].(types.Object)
		ct, _ := a["capacity_type"].(types.String)
		switch {
		case !r.IsNull() && !r.IsUnknown() && r.Attributes()["id"].IsNull() && r.Attributes()["tags"].IsNull():
			diags.AddAttributeError(path.Root("gpu_node_group").AtName("capacity_reservation"), "Reservation not named",
				"gpu_node_group.capacity_reservation needs id (cr-...) or tags selecting the reservation")
		case ct.Equal(types.StringValue(awsinfra.CapacityBlock)) && r.IsNull():
			diags.AddAttributeError(path.Root("gpu_node_group").AtName("capacity_type"), "Capacity Block without a reservation",
				"capacity_type = \"CAPACITY_BLOCK\" runs the node group in a Capacity Block: name it in gpu_node_group.capacity_reservation (id or tags), or use ON_DEMAND")
		case ct.Equal(types.StringValue(awsinfra.CapacitySpot)) && !r.IsNull() && !r.IsUnknown():
			diags.AddAttributeError(path.Root("gpu_node_group").AtName("capacity_type"), "Spot on a reservation",
				"capacity reservations hold On-Demand capacity: set capacity_type = \"ON_DEMAND\" (or \"CAPACITY_BLOCK\" for a Capacity Block), or remove capacity_reservation")
		}
	}
	if !m.SystemNodeGroup.IsNull() && !m.SystemNodeGroup.IsUnknown() {
		if r, ok := m.SystemNodeGroup.Attributes()["capacity_reservation"].(types.Object); ok && !r.IsNull() {
			diags.AddAttributeError(path.Root("system_node_group").AtName("capacity_reservation"), "Reservation on the system node group",
				"capacity reservations are for the GPU node group: move capacity_reservation to gpu_node_group, or remove it")
		}
	}
}

// devicePluginSetting is addons.nvidia_device_plugin.enabled as configured (null when unset).
func devicePluginSetting(addons types.Object) types.Bool {
	if addons.IsNull() || addons.IsUnknown() {
		return types.BoolNull()
	}
	dp, ok := addons.Attributes()["nvidia_device_plugin"].(types.Object)
	if !ok || dp.IsNull() || dp.IsUnknown() {
		return types.BoolNull()
	}
	b, _ := dp.Attributes()["enabled"].(types.Bool)
	return b
}

// planDevicePluginDefault turns the device plugin's default off for a GPU
// AMI that carries one, where the configuration leaves it unset.
func planDevicePluginDefault(ctx context.Context, config tfsdk.Config, plan *inferenceClusterModel, diags *diag.Diagnostics) {
	var configured types.Bool
	diags.Append(config.GetAttribute(ctx, path.Root("addons").AtName("nvidia_device_plugin").AtName("enabled"), &configured)...)
	if !configured.IsNull() || !gpuNodesCarryDevicePlugin(*plan) || plan.Addons.IsNull() || plan.Addons.IsUnknown() {
		return
	}
	plan.Addons = withAddonAttr(plan.Addons, "nvidia_device_plugin", "enabled", types.BoolValue(false))
}
