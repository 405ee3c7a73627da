package provider

import (
	"context"
	"sort"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-framework/types/basetypes"

	"github.com/llmd-dev/terraform-provider-llmd/internal/awsinfra"
)

// inferenceClusterModel is the resource's state; nested objects stay
// types.Object because they may be unknown in a plan.
type inferenceClusterModel struct {
	ID                     types.String `tfsdk:"id"`
	Name                   types.String `tfsdk:"name"`
	KubernetesVersion      types.String `tfsdk:"kubernetes_version"`
	AdminAccess            types.String `tfsdk:"admin_access"`
	Tags                   types.Map    `tfsdk:"tags"`
	TagsAll                types.Map    `tfsdk:"tags_all"`
	Networking             types.Object `tfsdk:"networking"`
	EndpointAccess         types.Object `tfsdk:"endpoint_access"`
	Compute                types.Object `tfsdk:"compute"`
	GPUNodeGroup           types.Object `tfsdk:"gpu_node_group"`
	SystemNodeGroup        types.Object `tfsdk:"system_node_group"`
	ModelStorage           types.Object `tfsdk:"model_storage"`
	ModelBucket            types.Object `tfsdk:"model_bucket"`
	Addons                 types.Object `tfsdk:"addons"`
	AccessEntries          types.Map    `tfsdk:"access_entries"`
	ImageMirrors           types.Map    `tfsdk:"image_mirrors"`
	ARN                    types.String `tfsdk:"arn"`
	Endpoint               types.String `tfsdk:"endpoint"`
	ClusterCACertificate   types.String `tfsdk:"cluster_ca_certificate"`
	OIDCIssuerURL          types.String `tfsdk:"oidc_issuer_url"`
	ClusterSecurityGroupID types.String `tfsdk:"cluster_security_group_id"`
	SecurityGroupIDs       types.Set    `tfsdk:"security_group_ids"`
	AdminPrincipalARN      types.String `tfsdk:"admin_principal_arn"`
	Kubernetes             types.Object `tfsdk:"kubernetes"`
	InClusterInventory     types.List   `tfsdk:"in_cluster_inventory"`
	GrafanaAdminPassword   types.String `tfsdk:"grafana_admin_password"`
	// GrafanaAdminPasswordVersion is the user's signal that the write-only password changed.
	GrafanaAdminPasswordVersion types.String   `tfsdk:"grafana_admin_password_version"`
	Timeouts                    timeouts.Value `tfsdk:"timeouts"`
}

type networkingModel struct {
	VPCCIDR           types.String `tfsdk:"vpc_cidr"`
	AvailabilityZones types.Set    `tfsdk:"availability_zones"`
	VPCID             types.String `tfsdk:"vpc_id"`
	SubnetIDs         types.Set    `tfsdk:"subnet_ids"`
	PublicSubnetIDs   types.Set    `tfsdk:"public_subnet_ids"`
}

type endpointAccessModel struct {
	Public      types.Bool `tfsdk:"public"`
	Private     types.Bool `tfsdk:"private"`
	PublicCIDRs types.Set  `tfsdk:"public_cidrs"`
}

type nodeGroupModel struct {
	Name         types.String `tfsdk:"name"`
	InstanceType types.String `tfsdk:"instance_type"`
	AMIType      types.String `tfsdk:"ami_type"`
	CapacityType types.String `tfsdk:"capacity_type"`
	DiskSize     types.Int64  `tfsdk:"disk_size"`
	DesiredSize  types.Int64  `tfsdk:"desired_size"`
	MinSize      types.Int64  `tfsdk:"min_size"`
	MaxSize      types.Int64  `tfsdk:"max_size"`
	Labels       types.Map    `tfsdk:"labels"`
	Taints       types.Set    `tfsdk:"taints"`
	Colocate     types.Bool   `tfsdk:"colocate_with_storage"`
	Version      types.String `tfsdk:"version"`
	Release      types.String `tfsdk:"release_version"`
	Reservation  types.Object `tfsdk:"capacity_reservation"`
}

type taintModel struct {
	Key    types.String `tfsdk:"key"`
	Value  types.String `tfsdk:"value"`
	Effect types.String `tfsdk:"effect"`
}

// kubernetesModel is the cluster's `kubernetes` object, which llmd_model_fleet and
// llmd_prefix_router take as `cluster` to reach it.
type kubernetesModel struct {
	Name                 types.String `tfsdk:"name"`
	Endpoint             types.String `tfsdk:"endpoint"`
	ClusterCACertificate types.String `tfsdk:"cluster_ca_certificate"`
	Region               types.String `tfsdk:"region"`
	GPUInstanceType      types.String `tfsdk:"gpu_instance_type"`
	GPUNodeLabels        types.Map    `tfsdk:"gpu_node_labels"`
	GPUNodeTaints        types.List   `tfsdk:"gpu_node_taints"`
	// GPUNodeDesiredSize is the GPU node group's desired size: with no node
	// autoscaler, the GPU nodes there are (null in a cluster object written
	// before it existed).
	GPUNodeDesiredSize types.Int64 `tfsdk:"gpu_node_desired_size"`
	// The system node group's labels, taints and desired size place the
	// router and the staging Job; null in a cluster object written before
	// they existed (then the default system group's label is assumed).
	SystemNodeLabels      types.Map   `tfsdk:"system_node_labels"`
	SystemNodeTaints      types.List  `tfsdk:"system_node_taints"`
	SystemNodeDesiredSize types.Int64 `tfsdk:"system_node_desired_size"`
	// ImageMirrors is the cluster's image_mirrors, which every image the
	// fleet and the router deploy is pulled through.
	ImageMirrors types.Map `tfsdk:"image_mirrors"`
}

var (
	stringSet       = types.SetType{ElemType: types.StringType}
	networkingTypes = map[string]attr.Type{"vpc_cidr": types.StringType, "availability_zones": stringSet, "vpc_id": types.StringType,
		"subnet_ids": stringSet, "public_subnet_ids": stringSet}
	endpointAccessTypes = map[string]attr.Type{"public": types.BoolType, "private": types.BoolType, "public_cidrs": stringSet}
	taintTypes          = map[string]attr.Type{"key": types.StringType, "value": types.StringType, "effect": types.StringType}
	nodeGroupTypes      = map[string]attr.Type{"name": types.StringType, "instance_type": types.StringType, "ami_type": types.StringType,
		"capacity_type": types.StringType, "disk_size": types.Int64Type, "desired_size": types.Int64Type, "min_size": types.Int64Type,
		"max_size": types.Int64Type, "labels": types.MapType{ElemType: types.StringType}, "taints": types.SetType{ElemType: types.ObjectType{AttrTypes: taintTypes}},
		"colocate_with_storage": types.BoolType, "version": types.StringType, "release_version": types.StringType,
		"capacity_reservation": types.ObjectType{AttrTypes: capacityReservationTypes}}
	kubernetesTypes = map[string]attr.Type{"name": types.StringType, "endpoint": types.StringType, "cluster_ca_certificate": types.StringType,
		"region": types.StringType, "gpu_instance_type": types.StringType, "gpu_node_labels": types.MapType{ElemType: types.StringType},
		"gpu_node_taints": types.ListType{ElemType: types.StringType}, "gpu_node_desired_size": types.Int64Type, "system_node_labels": types.MapType{ElemType: types.StringType},
		"system_node_taints": types.ListType{ElemType: types.StringType}, "system_node_desired_size": types.Int64Type,
		"image_mirrors": types.MapType{ElemType: types.StringType}}
)

var asObject = basetypes.ObjectAsOptions{UnhandledNullAsEmpty: true, UnhandledUnknownAsEmpty: true}

// spec turns a plan into what awsinfra builds. Unknown networking (not
// configured) means a created VPC with defaults.
func (m inferenceClusterModel) spec(ctx context.Context) (awsinfra.ClusterSpec, diag.Diagnostics) {
	var diags diag.Diagnostics
	s := awsinfra.ClusterSpec{Name: m.Name.ValueString(), KubernetesVersion: m.KubernetesVersion.ValueString(),
		BootstrapCreatorAdmin: m.AdminAccess.ValueString() == "bootstrap_creator"}
	diags.Append(m.Tags.ElementsAs(ctx, &s.Tags, false)...)
	var net networkingModel
	diags.Append(m.Networking.As(ctx, &net, asObject)...)
	s.Network = awsinfra.NetworkSpec{VPCCIDR: net.VPCCIDR.ValueString(), VPCID: net.VPCID.ValueString(),
		AvailabilityZones: stringsOf(ctx, net.AvailabilityZones, &diags), SubnetIDs: stringsOf(ctx, net.SubnetIDs, &diags)}
	if s.Network.VPCCIDR == "" && s.Network.VPCID == "" {
		s.Network.VPCCIDR = "10.0.0.0/16"
	}
	if !net.VPCID.IsUnknown() && net.VPCID.ValueString() != "" && net.SubnetIDs.IsUnknown() {
		diags.AddError("Invalid networking", "networking.subnet_ids must be known when networking.vpc_id is given")
	}
	var ea endpointAccessModel
	diags.Append(m.EndpointAccess.As(ctx, &ea, asObject)...)
	s.Endpoint = awsinfra.EndpointAccess{Public: ea.Public.ValueBool(), Private: ea.Private.ValueBool(), PublicCIDRs: stringsOf(ctx, ea.PublicCIDRs, &diags)}
	s.GPU = nodeGroupSpec(ctx, m.GPUNodeGroup, &diags)
	s.Karpenter = m.karpenterSpec()
	s.AutoMode = m.autoModeOn()
	s.System = nodeGroupSpec(ctx, m.SystemNodeGroup, &diags)
	s.Storage = storageSpec(ctx, m.ModelStorage, &diags)
	s.ModelBucket = modelBucketSpec(ctx, m.ModelBucket, &diags)
	s.ForceDestroyBucket = forceDestroyBucket(ctx, m.ModelBucket, types.ObjectNull(modelBucketTypes))
	s.Addons = addonSpecs(ctx, m.Addons, &diags)
	s.AccessEntries = accessEntrySpecs(ctx, m.AccessEntries, &diags)
	return s, diags
}

func nodeGroupSpec(ctx context.Context, obj types.Object, diags *diag.Diagnostics) awsinfra.NodeGroupSpec {
	var ng nodeGroupModel
	diags.Append(obj.As(ctx, &ng, asObject)...)
	out := awsinfra.NodeGroupSpec{Name: ng.Name.ValueString(), InstanceType: ng.InstanceType.ValueString(), AMIType: ng.AMIType.ValueString(),
		CapacityType: ng.CapacityType.ValueString(), DiskSize: int32(ng.DiskSize.ValueInt64()), DesiredSize: int32(ng.DesiredSize.ValueInt64()),
		MinSize: int32(ng.MinSize.ValueInt64()), MaxSize: int32(ng.MaxSize.ValueInt64()), Labels: map[string]string{}, ColocateWithStorage: ng.Colocate.ValueBool()}
	diags.Append(ng.Labels.ElementsAs(ctx, &out.Labels, false)...)
	var taints []taintModel
	diags.Append(ng.Taints.ElementsAs(ctx, &taints, false)...)
	for _, t := range taints {
		out.Taints = append(out.Taints, awsinfra.Taint{Key: t.Key.ValueString(), Value: t.Value.ValueString(), Effect: t.Effect.ValueString()})
	}
	out.Reservation = reservationSpec(ctx, ng.Reservation, diags)
	return out
}

func stringsOf(ctx context.Context, s types.Set, diags *diag.Diagnostics) []string {
	var out []string
	if s.IsNull() || s.IsUnknown() {
		return out
	}
	diags.Append(s.ElementsAs(ctx, &out, false)...)
	sort.Strings(out)
	return out
}

func setOf(ss []string) types.Set {
	vals := make([]attr.Value, 0, len(ss))
	for _, s := range ss {
		vals = append(vals, types.StringValue(s))
	}
	return types.SetValueMust(types.StringType, vals)
}

func mapOf(m map[string]string) types.Map {
	vals := map[string]attr.Value{}
	for k, v := range m {
		vals[k] = types.StringValue(v)
	}
	return types.MapValueMust(types.StringType, vals)
}

// refresh sets every attribute AWS reports from the cluster as read back.
// Inputs AWS does not report (admin_access where the API omits the access
// configuration) keep their value.
func (m *inferenceClusterModel) refresh(ctx context.Context, c *awsinfra.Clients, cl *awsinfra.Cluster) {
	m.ID, m.Name = types.StringValue(cl.Name), types.StringValue(cl.Name)
	m.KubernetesVersion = types.StringValue(cl.KubernetesVersion)
	if cl.BootstrapCreatorAdmin != nil && m.AdminAccess.IsNull() {
		m.AdminAccess = types.StringValue(map[bool]string{true: "bootstrap_creator", false: "access_entry"}[*cl.BootstrapCreatorAdmin])
	}
	user := c.UserTags(cl.Tags)
	// A tag the resource sets to the same value as a default tag is the
	// resource's own: keep it, or the plan would show it forever.
	for k, v := range m.Tags.Elements() {
		if s, ok := v.(types.String); ok && cl.Tags[k] == s.ValueString() {
			user[k] = s.ValueString()
		}
	}
	if len(user) > 0 || !m.Tags.IsNull() {
		m.Tags = mapOf(user)
	}
	m.TagsAll = mapOf(c.AllTags(user))
	net := cl.Network
	public := net.PublicSubnetIDs
	if public == nil {
		public = []string{}
	}
	m.Networking = types.ObjectValueMust(networkingTypes, map[string]attr.Value{"vpc_cidr": types.StringValue(net.VPCCIDR),
		"availability_zones": setOf(net.AvailabilityZones), "vpc_id": types.StringValue(net.VPCID),
		"subnet_ids": setOf(net.PrivateSubnetIDs), "public_subnet_ids": setOf(public)})
	cidrs := cl.Access.PublicCIDRs
	if cidrs == nil {
		cidrs = []string{}
	}
	m.EndpointAccess = types.ObjectValueMust(endpointAccessTypes, map[string]attr.Value{"public": types.BoolValue(cl.Access.Public),
		"private": types.BoolValue(cl.Access.Private), "public_cidrs": setOf(cidrs)})
	gpu := cl.GPU
	if m.Compute.IsNull() {
		// An import: the mode is what AWS holds.
		m.Compute = computeDefault
		switch {
		case cl.AutoMode != nil && cl.GPU == nil:
			m.Compute = withComputeMode(computeDefault, computeAutoMode)
		case cl.Karpenter != nil && cl.GPU == nil:
			m.Compute = withComputeMode(computeDefault, computeKarpenter)
		}
	}
	if m.nodePoolOn() {
		m.GPUNodeGroup, gpu = nodePoolGPUNodes(ctx, m.GPUNodeGroup, cl.KubernetesVersion)
	} else {
		m.GPUNodeGroup = nodeGroupObject(cl.GPU, m.GPUNodeGroup, gpuDefaults.colocate)
	}
	m.SystemNodeGroup = nodeGroupObject(cl.System, m.SystemNodeGroup, systemDefaults.colocate)
	m.ModelStorage = storageObject(ctx, cl.Storage, m.ModelStorage)
	m.ModelBucket = modelBucketObject(cl.ModelBucket, m.ModelBucket)
	m.Addons = addonsObject(cl.Addons, m.Addons)
	m.AccessEntries = accessEntriesMap(cl.AccessEntries, m.AccessEntries)
	m.ARN = types.StringValue(cl.ARN)
	m.Endpoint = types.StringValue(cl.Endpoint)
	m.ClusterCACertificate = types.StringValue(cl.CertificateAuthority)
	m.OIDCIssuerURL = types.StringValue(cl.OIDCIssuer)
	m.ClusterSecurityGroupID = types.StringValue(cl.ClusterSecurityGroupID)
	sgs := cl.SecurityGroupIDs
	if sgs == nil {
		sgs = []string{}
	}
	m.SecurityGroupIDs = setOf(sgs)
	m.Kubernetes = kubernetesObject(*m, c.Config.Region, gpu, cl.System)
}

// nodeGroupObject is the state of a node group; null when it no longer
// exists, so the plan proposes to create it again. colocate_with_storage is
// the prior's (AWS knows the subnets, not the intent), else the default.
func nodeGroupObject(ng *awsinfra.NodeGroup, prior types.Object, colocate bool) types.Object {
	if ng == nil {
		return types.ObjectNull(nodeGroupTypes)
	}
	taints := []attr.Value{}
	for _, t := range ng.Taints {
		value := types.StringNull()
		if t.Value != "" {
			value = types.StringValue(t.Value)
		}
		taints = append(taints, types.ObjectValueMust(taintTypes, map[string]attr.Value{"key": types.StringValue(t.Key), "value": value, "effect": types.StringValue(t.Effect)}))
	}
	colocated := types.BoolValue(colocate)
	if !prior.IsNull() && !prior.IsUnknown() {
		if b, ok := prior.Attributes()["colocate_with_storage"].(types.Bool); ok && !b.IsNull() && !b.IsUnknown() {
			colocated = b
		}
	}
	labels := ng.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	return types.ObjectValueMust(nodeGroupTypes, map[string]attr.Value{
		"name": types.StringValue(ng.Name), "instance_type": types.StringValue(ng.InstanceType), "ami_type": types.StringValue(ng.AMIType),
		"capacity_type": types.StringValue(ng.CapacityType), "disk_size": types.Int64Value(int64(ng.DiskSize)),
		"desired_size": types.Int64Value(int64(ng.DesiredSize)), "min_size": types.Int64Value(int64(ng.MinSize)), "max_size": types.Int64Value(int64(ng.MaxSize)),
		"labels": mapOf(labels), "taints": types.SetValueMust(types.ObjectType{AttrTypes: taintTypes}, taints),
		"colocate_with_storage": colocated, "version": types.StringValue(ng.Version), "release_version": types.StringValue(ng.ReleaseVersion),
		"capacity_reservation": reservationObject(ng.Reservation, prior)})
}

// kubernetesObject is what llmd_model_fleet and llmd_prefix_router take as
// `cluster`: how to reach the API (tokens are minted from the provider's AWS
// credentials for the region), where GPU pods go and where the router and
// the staging Job go (the system node group), in Kubernetes terms.
func kubernetesObject(m inferenceClusterModel, region string, gpu, system *awsinfra.NodeGroup) types.Object {
	gpuLabels, gpuTaints := nodeGroupFacts(gpu)
	sysLabels, sysTaints := nodeGroupFacts(system)
	if system != nil && len(system.Labels) == 0 {
		// EKS labels every node of a managed node group with its name: a
		// system group without labels of its own is still found (as the
		// monitoring add-on finds it, nodeGroupPlacement).
		sysLabels = mapOf(map[string]string{"eks.amazonaws.com/nodegroup": system.Name})
	}
	instanceType, gpuSize, sysSize := types.StringNull(), types.Int64Null(), types.Int64Null()
	if gpu != nil {
		instanceType, gpuSize = types.StringValue(gpu.InstanceType), types.Int64Value(int64(gpu.DesiredSize))
	}
	if system != nil {
		sysSize = types.Int64Value(int64(system.DesiredSize))
	}
	mirrors := m.ImageMirrors
	if mirrors.IsNull() {
		// A model an import builds has no mirrors, not even their type.
		mirrors = types.MapNull(types.StringType)
	}
	return types.ObjectValueMust(kubernetesTypes, map[string]attr.Value{"name": m.Name, "endpoint": m.Endpoint,
		"cluster_ca_certificate": m.ClusterCACertificate, "region": types.StringValue(region),
		"gpu_instance_type": instanceType, "gpu_node_labels": gpuLabels, "gpu_node_taints": gpuTaints,
		"gpu_node_desired_size": gpuSize, "system_node_labels": sysLabels, "system_node_taints": sysTaints, "system_node_desired_size": sysSize,
		"image_mirrors": mirrors})
}

// nodeGroupFacts is a node group's labels and its taints as
// `key=value:Effect` (sorted); null for a node group that does not exist.
func nodeGroupFacts(ng *awsinfra.NodeGroup) (types.Map, types.List) {
	if ng == nil {
		return types.MapNull(types.StringType), types.ListNull(types.StringType)
	}
	l := ng.Labels
	if l == nil {
		l = map[string]string{}
	}
	var names []string
	for _, t := range ng.Taints {
		names = append(names, t.Key+"="+t.Value+":"+kubernetesTaintEffect(t.Effect))
	}
	sort.Strings(names)
	ts := []attr.Value{}
	for _, n := range names {
		ts = append(ts, types.StringValue(n))
	}
	return mapOf(l), types.ListValueMust(types.StringType, ts)
}

// kubernetesTaintEffect spells an EKS taint effect (NO_SCHEDULE) as Kubernetes does (NoSchedule).
func kubernetesTaintEffect(eks string) string {
	switch eks {
	case "NO_EXECUTE":
		return "NoExecute"
	case "PREFER_NO_SCHEDULE":
		return "PreferNoSchedule"
	}
	return "NoSchedule"
}
