package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"

	"github.com/llmd-dev/terraform-provider-llmd/internal/awsinfra"
	"github.com/llmd-dev/terraform-provider-llmd/internal/imageref"
)

// ValidateConfig checks what single attributes cannot: the two ways of
// networking exclude each other, the FSx CSI driver needs the pod identity
// agent, and the owner tag is not the user's to set.
func (r *inferenceClusterResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m inferenceClusterModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	var net networkingModel
	if !m.Networking.IsNull() && !m.Networking.IsUnknown() {
		resp.Diagnostics.Append(m.Networking.As(ctx, &net, asObject)...)
		existing := !net.VPCID.IsNull()
		switch {
		case existing && net.SubnetIDs.IsNull():
			resp.Diagnostics.AddAttributeError(path.Root("networking").AtName("subnet_ids"), "Missing subnets",
				"networking.subnet_ids is required with networking.vpc_id: give the existing subnets (in at least two zones) the cluster and nodes use")
		case !existing && !net.SubnetIDs.IsNull():
			resp.Diagnostics.AddAttributeError(path.Root("networking").AtName("vpc_id"), "Missing VPC",
				"networking.vpc_id is required with networking.subnet_ids: give the VPC the subnets belong to, or drop subnet_ids to create a network")
		case existing && (!net.VPCCIDR.IsNull() || !net.AvailabilityZones.IsNull()):
			resp.Diagnostics.AddAttributeError(path.Root("networking"), "Conflicting networking",
				"networking.vpc_cidr and networking.availability_zones describe a network to create; remove them when networking.vpc_id names an existing one")
		}
	}
	validateAddons(ctx, m.Addons, &resp.Diagnostics)
	validateGPUCapacity(m, &resp.Diagnostics)
	validateCompute(ctx, m, &resp.Diagnostics)
	if !m.ImageMirrors.IsNull() && !m.ImageMirrors.IsUnknown() {
		var raw map[string]string
		if d := m.ImageMirrors.ElementsAs(ctx, &raw, false); !d.HasError() {
			if _, err := imageref.NewMirrors(raw, "image_mirrors"); err != nil {
				resp.Diagnostics.AddAttributeError(path.Root("image_mirrors"), "Invalid image mirror", err.Error())
			}
		}
	}
	if !m.Tags.IsUnknown() {
		for k := range m.Tags.Elements() {
			if strings.HasPrefix(k, "llmd.dev/") {
				resp.Diagnostics.AddAttributeError(path.Root("tags").AtMapKey(k), "Reserved tag", "tag keys under llmd.dev/ are the provider's bookkeeping; use another key")
			}
		}
	}
}

// ModifyPlan enforces the file system's deletion protection and the model
// bucket's force_destroy (on destroy too), checks node group sizes (with defaults applied), the version step and
// model_storage per deployment type, fills in what a plan can know (the
// default Kubernetes version of a new cluster, node group versions, AWS's
// values of parts that stay), computes tags_all (so default_tags changes show
// in the plan), and runs the preflight checks when a cluster is to be
// created or its GPU node group or version changes.
func (r *inferenceClusterResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	var prior inferenceClusterModel
	exists := !req.State.Raw.IsNull()
	if exists {
		resp.Diagnostics.Append(req.State.Get(ctx, &prior)...)
	}
	// A cluster whose create failed is planned as a create (see
	// incompleteKey), and its file system, holding no weights yet, may go.
	unfinished := exists && incomplete(ctx, req.Private)
	if req.Plan.Raw.IsNull() {
		if exists && !unfinished {
			_, diags := planStorage(ctx, types.ObjectNull(modelStorageTypes), prior.ModelStorage, types.StringNull(), true, false)
			resp.Diagnostics.Append(diags...)
			_, diags = planModelBucket(ctx, r.clientsOrNil(), prior.Name.ValueString(), types.ObjectNull(modelBucketTypes), prior.ModelBucket, true, false)
			resp.Diagnostics.Append(diags...)
		}
		return
	}
	if unfinished {
		exists, prior = false, inferenceClusterModel{}
		raw, err := unknownComputedNulls(ctx, req.Plan, req.Config)
		if err != nil {
			resp.Diagnostics.AddError("Planning the incomplete cluster", err.Error())
			return
		}
		resp.Plan.Raw = raw
	}
	var plan inferenceClusterModel
	resp.Diagnostics.Append(resp.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if plan.KubernetesVersion.IsUnknown() && !exists {
		plan.KubernetesVersion = types.StringValue(defaultKubernetesVersion)
	}
	resp.Diagnostics.Append(checkSizes(ctx, plan)...)
	if exists {
		resp.Diagnostics.Append(checkVersionStep(prior.KubernetesVersion, plan.KubernetesVersion)...)
	}
	var configZone types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("model_storage").AtName("availability_zone"), &configZone)...)
	replacing := exists && len(resp.RequiresReplace) > 0
	storage, diags := planStorage(ctx, plan.ModelStorage, prior.ModelStorage, configZone, false, replacing)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.ModelStorage = storage
	bucket, diags := planModelBucket(ctx, r.clientsOrNil(), plan.Name.ValueString(), plan.ModelBucket, prior.ModelBucket, false, replacing)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.ModelBucket = bucket
	// A new file system (or one in another zone) moves colocated GPU nodes into its zone.
	storageOn := !storage.IsNull() && !storage.IsUnknown() && storage.Attributes()["enabled"].Equal(types.BoolValue(true))
	storageMoves := exists && !storage.IsNull() && storage.Attributes()["file_system_id"].IsUnknown() &&
		!storage.Attributes()["enabled"].Equal(types.BoolValue(false))
	versionChanged := exists && !plan.KubernetesVersion.Equal(prior.KubernetesVersion)
	plan.Addons = planAddons(plan.Addons, prior.Addons, versionChanged || replacing)
	for _, g := range []struct {
		name  string
		plan  *types.Object
		prior types.Object
	}{{"gpu_node_group", &plan.GPUNodeGroup, prior.GPUNodeGroup}, {"system_node_group", &plan.SystemNodeGroup, prior.SystemNodeGroup}} {
		if g.name == "gpu_node_group" && (plan.nodePoolOn() || (exists && prior.nodePoolOn())) {
			*g.plan = planNodePoolGPU(*g.plan, plan.KubernetesVersion, prior, plan, exists && !replacing, &resp.Diagnostics)
			continue
		}
		obj, replaced := planNodeGroup(*g.plan, g.prior, plan.KubernetesVersion, replacing, storageOn)
		if storageMoves && replaced == "" && !obj.IsNull() && obj.Attributes()["colocate_with_storage"].Equal(types.BoolValue(true)) {
			replaced = "the subnets, should the new file system be in another zone (colocate_with_storage),"
			v := obj.Attributes()
			v["release_version"] = types.StringUnknown()
			obj = types.ObjectValueMust(nodeGroupTypes, v)
		}
		*g.plan = obj
		if replaced != "" && !replacing {
			resp.Diagnostics.AddAttributeWarning(path.Root(g.name), "Node group will be replaced",
				fmt.Sprintf("EKS cannot change %s of a node group in place: the apply deletes the node group's nodes and creates the node group again under its name. "+
					"The cluster, the network and the file system stay.", replaced))
		}
	}
	plan.Compute = planCompute(plan.Compute, prior.Compute, !exists || replacing || !plan.GPUNodeGroup.Equal(prior.GPUNodeGroup) ||
		!plan.SystemNodeGroup.Equal(prior.SystemNodeGroup))
	planDevicePluginDefault(ctx, req.Config, &plan, &resp.Diagnostics)
	// After the node groups: the add-ons' placement follows their labels and taints.
	if exists && !replacing {
		planInCluster(&plan, &prior)
	} else {
		planInCluster(&plan, nil)
	}
	resp.Diagnostics.Append(validateMonitoring(ctx, plan)...)
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
	if resp.Diagnostics.HasError() || r.data == nil {
		return
	}
	c := r.clients()
	if !plan.Tags.IsUnknown() {
		user := map[string]string{}
		resp.Diagnostics.Append(plan.Tags.ElementsAs(ctx, &user, false)...)
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("tags_all"), mapOf(c.AllTags(user)))...)
	}
	if !r.needsPreflight(ctx, req, plan) {
		return
	}
	spec, diags := plan.spec(ctx)
	if diags.HasError() {
		return
	}
	res, err := c.Preflight(ctx, awsinfra.PreflightInput{KubernetesVersion: spec.KubernetesVersion, GPU: spec.GPU, System: spec.System, Network: spec.Network,
		Upgrade: exists && !plan.KubernetesVersion.Equal(prior.KubernetesVersion), StorageZone: storageZoneOf(plan.ModelStorage), StorageOn: storageOn,
		Karpenter: plan.karpenterOn(), AutoMode: plan.autoModeOn()})
	if err != nil {
		resp.Diagnostics.AddError("Preflight checks", err.Error())
		return
	}
	for _, f := range res.Findings {
		resp.Diagnostics.AddAttributeError(fieldPath(f.Field), "Preflight: "+f.Field, f.Message)
	}
	for _, s := range res.Skipped {
		resp.Diagnostics.AddWarning("Preflight check skipped", s)
	}
	for _, f := range res.Warnings {
		resp.Diagnostics.AddAttributeWarning(fieldPath(f.Field), "Capacity reservation: "+f.Field, f.Message)
	}
	if res.CapacityReservationID != "" && !resp.Diagnostics.HasError() {
		withReservationID(&plan, res.CapacityReservationID)
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("gpu_node_group"), plan.GPUNodeGroup)...)
	}
}

// unknownComputedNulls plans what AWS will assign as unknown, as for a
// create: every computed attribute the configuration leaves unset and the
// state of an incomplete cluster holds null (the framework keeps the prior
// value where the plan equals the state).
func unknownComputedNulls(ctx context.Context, plan tfsdk.Plan, config tfsdk.Config) (tftypes.Value, error) {
	return tftypes.Transform(plan.Raw, func(p *tftypes.AttributePath, v tftypes.Value) (tftypes.Value, error) {
		if !v.IsNull() || len(p.Steps()) == 0 {
			return v, nil
		}
		a, err := plan.Schema.AttributeAtTerraformPath(ctx, p)
		if err != nil || !a.IsComputed() {
			return v, nil
		}
		if set, _, err := tftypes.WalkAttributePath(config.Raw, p); err == nil {
			if c, ok := set.(tftypes.Value); ok && !c.IsNull() {
				return v, nil
			}
		}
		return tftypes.NewValue(v.Type(), tftypes.UnknownValue), nil
	})
}

// planNodeGroup sets the node group's planned version to the cluster's (so
// a node group behind the control plane shows a diff that the apply
// repairs) and keeps its release version unless the node group is replaced
// or upgraded. replaced names what forces a replacement, "" for none;
// colocate_with_storage counts only while the cluster has a file system.
func planNodeGroup(plan, prior types.Object, k8s types.String, replacingCluster, storageOn bool) (types.Object, string) {
	if plan.IsNull() || plan.IsUnknown() {
		return plan, ""
	}
	v := plan.Attributes()
	v["version"] = k8s
	var replaced []string
	var old map[string]attr.Value
	if !prior.IsNull() && !prior.IsUnknown() && !replacingCluster {
		old = prior.Attributes()
		for _, k := range []string{"instance_type", "ami_type", "capacity_type", "disk_size", "colocate_with_storage"} {
			// Without a file system, colocation places nothing.
			if k == "colocate_with_storage" && !storageOn {
				continue
			}
			if !v[k].IsUnknown() && !v[k].Equal(old[k]) {
				replaced = append(replaced, k)
			}
		}
		if planReservation(v, old) {
			replaced = append(replaced, "capacity_reservation")
		}
	}
	v["release_version"] = types.StringUnknown()
	if old != nil && len(replaced) == 0 && v["version"].Equal(old["version"]) {
		v["release_version"] = old["release_version"]
	}
	return types.ObjectValueMust(nodeGroupTypes, v), strings.Join(replaced, ", ")
}

// needsPreflight: only when every input is known, and only for a create or a
// change of what preflight checks, so routine plans cost no extra API calls.
func (r *inferenceClusterResource) needsPreflight(ctx context.Context, req resource.ModifyPlanRequest, plan inferenceClusterModel) bool {
	if plan.KubernetesVersion.IsUnknown() || plan.GPUNodeGroup.IsUnknown() || plan.SystemNodeGroup.IsUnknown() {
		return false
	}
	if req.State.Raw.IsNull() {
		return true
	}
	var prior inferenceClusterModel
	if req.State.Get(ctx, &prior).HasError() {
		return false
	}
	return !plan.KubernetesVersion.Equal(prior.KubernetesVersion) || !plan.GPUNodeGroup.Equal(prior.GPUNodeGroup)
}

// checkSizes requires min_size <= desired_size <= max_size, on the plan so a
// changed desired_size is checked against defaulted bounds too.
func checkSizes(ctx context.Context, m inferenceClusterModel) diag.Diagnostics {
	var diags diag.Diagnostics
	for _, group := range []struct {
		name string
		obj  types.Object
	}{{"gpu_node_group", m.GPUNodeGroup}, {"system_node_group", m.SystemNodeGroup}} {
		if group.obj.IsNull() || group.obj.IsUnknown() {
			continue
		}
		var ng nodeGroupModel
		diags.Append(group.obj.As(ctx, &ng, asObject)...)
		if ng.MinSize.IsNull() || ng.MinSize.IsUnknown() || ng.DesiredSize.IsNull() || ng.DesiredSize.IsUnknown() || ng.MaxSize.IsNull() || ng.MaxSize.IsUnknown() {
			continue
		}
		if minS, des, maxS := ng.MinSize.ValueInt64(), ng.DesiredSize.ValueInt64(), ng.MaxSize.ValueInt64(); minS > des || des > maxS {
			diags.AddAttributeError(path.Root(group.name).AtName("desired_size"), "Node group sizes out of order",
				fmt.Sprintf("%s needs min_size <= desired_size <= max_size, got %d <= %d <= %d; set all three when changing one", group.name, minS, des, maxS))
		}
	}
	return diags
}

// checkVersionStep allows what EKS allows in place: an upgrade by one minor
// version. Anything else fails at plan time instead of half way through.
func checkVersionStep(prior, planned types.String) diag.Diagnostics {
	var diags diag.Diagnostics
	if prior.IsNull() || prior.IsUnknown() || planned.IsUnknown() || prior.Equal(planned) {
		return diags
	}
	var pMajor, pMinor, nMajor, nMinor int
	if _, err := fmt.Sscanf(prior.ValueString(), "%d.%d", &pMajor, &pMinor); err != nil {
		return diags
	}
	if _, err := fmt.Sscanf(planned.ValueString(), "%d.%d", &nMajor, &nMinor); err != nil {
		return diags
	}
	if nMajor != pMajor || nMinor != pMinor+1 {
		diags.AddAttributeError(path.Root("kubernetes_version"), "Unsupported version change",
			fmt.Sprintf("EKS upgrades in place one minor version at a time and never downgrades: from %s the next version is %d.%d; "+
				"apply each step in turn, or create a new cluster for a downgrade", prior.ValueString(), pMajor, pMinor+1))
	}
	return diags
}

// fieldPath is the attribute path of a dotted field name.
func fieldPath(field string) path.Path {
	p := path.Empty()
	for _, step := range strings.Split(field, ".") {
		p = p.AtName(step)
	}
	return p
}

// storageZoneOf is the planned file system's zone, "" when there is none or it is not known yet.
func storageZoneOf(storage types.Object) string {
	if storage.IsNull() || storage.IsUnknown() || !storage.Attributes()["enabled"].Equal(types.BoolValue(true)) {
		return ""
	}
	if z, ok := storage.Attributes()["availability_zone"].(types.String); ok && !z.IsUnknown() {
		return z.ValueString()
	}
	return ""
}
