package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/llmd-dev/terraform-provider-llmd/internal/awsinfra"
)

// modelStorageModel is the model_storage object: the FSx for Lustre file
// system holding the weights. The computed attributes are what
// llmd_model_fleet.storage reads (file_system_id, dns_name, mount_name).
type modelStorageModel struct {
	Enabled                  types.Bool   `tfsdk:"enabled"`
	DeploymentType           types.String `tfsdk:"deployment_type"`
	StorageCapacityGiB       types.Int64  `tfsdk:"storage_capacity_gib"`
	PerUnitStorageThroughput types.Int64  `tfsdk:"per_unit_storage_throughput"`
	FileSystemTypeVersion    types.String `tfsdk:"file_system_type_version"`
	AvailabilityZone         types.String `tfsdk:"availability_zone"`
	S3Import                 types.Object `tfsdk:"s3_import"`
	DeletionProtection       types.Bool   `tfsdk:"deletion_protection"`
	FileSystemID             types.String `tfsdk:"file_system_id"`
	DNSName                  types.String `tfsdk:"dns_name"`
	MountName                types.String `tfsdk:"mount_name"`
	SecurityGroupID          types.String `tfsdk:"security_group_id"`
	AssociationID            types.String `tfsdk:"association_id"`
}

type s3ImportModel struct {
	URI        types.String `tfsdk:"uri"`
	AutoImport types.Bool   `tfsdk:"auto_import"`
}

var (
	s3ImportTypes     = map[string]attr.Type{"uri": types.StringType, "auto_import": types.BoolType}
	modelStorageTypes = map[string]attr.Type{"enabled": types.BoolType, "deployment_type": types.StringType, "storage_capacity_gib": types.Int64Type,
		"per_unit_storage_throughput": types.Int64Type, "file_system_type_version": types.StringType, "availability_zone": types.StringType,
		"s3_import": types.ObjectType{AttrTypes: s3ImportTypes}, "deletion_protection": types.BoolType, "file_system_id": types.StringType,
		"dns_name": types.StringType, "mount_name": types.StringType, "security_group_id": types.StringType, "association_id": types.StringType}
	// storageComputed are the attributes AWS assigns; a plan keeps them from
	// state unless the file system is created or replaced.
	storageComputed = []string{"file_system_id", "dns_name", "mount_name", "security_group_id", "association_id"}
)

func modelStorageAttribute() schema.SingleNestedAttribute {
	computed := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, MarkdownDescription: desc}
	}
	return schema.SingleNestedAttribute{
		Optional: true, Computed: true,
		Default: objectdefault.StaticValue(types.ObjectValueMust(modelStorageTypes, map[string]attr.Value{
			"enabled": types.BoolValue(true), "deployment_type": types.StringValue(awsinfra.DeploymentScratch2), "storage_capacity_gib": types.Int64Value(1200),
			"per_unit_storage_throughput": types.Int64Null(), "file_system_type_version": types.StringValue("2.15"), "availability_zone": types.StringNull(),
			"s3_import": types.ObjectNull(s3ImportTypes), "deletion_protection": types.BoolValue(true), "file_system_id": types.StringNull(),
			"dns_name": types.StringNull(), "mount_name": types.StringNull(), "security_group_id": types.StringNull(), "association_id": types.StringNull()})),
		MarkdownDescription: "The FSx for Lustre file system holding the model weights, on by default (`enabled = false` for a cluster without one). " +
			"It lives in one private subnet; the GPU node group is placed in its zone (`gpu_node_group.colocate_with_storage`). Its security group admits " +
			"TCP 988 and 1018-1023 from itself and from the cluster security group. It is created beside the EKS control plane, so the two longest waits " +
			"overlap. Pass the whole object as `storage` to `llmd_model_fleet`, which reads `file_system_id`, `dns_name` and `mount_name`. Capacity increases, " +
			"PERSISTENT_2 throughput and `s3_import` change in place; a change of `deployment_type`, `file_system_type_version` or `availability_zone`, " +
			"a smaller capacity, or `enabled = false` deletes the file system, which `deletion_protection` refuses at plan time.",
		Attributes: map[string]schema.Attribute{
			"enabled": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				MarkdownDescription: "Whether the cluster has a file system; default `true`."},
			"deployment_type": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(awsinfra.DeploymentScratch2),
				Validators: []validator.String{stringvalidator.OneOf(awsinfra.DeploymentScratch2, awsinfra.DeploymentPersistent2)},
				MarkdownDescription: "`SCRATCH_2` (default: the cheapest, for weights that are a copy of Hugging Face or S3) or `PERSISTENT_2` " +
					"(replicated in its zone, with a throughput tier)."},
			"storage_capacity_gib": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(1200),
				Validators:          []validator.Int64{int64validator.AtLeast(1200)},
				MarkdownDescription: "Capacity in GiB: 1200, 2400 or a multiple of 2400; default 1200."},
			"per_unit_storage_throughput": schema.Int64Attribute{Optional: true,
				MarkdownDescription: "MB/s per TiB, `PERSISTENT_2` only and required there: 125, 250, 500 or 1000. It bounds how fast the replicas cold-load the weights."},
			"file_system_type_version": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("2.15"),
				MarkdownDescription: "Lustre version: `2.15` (default; the client AL2023 ships) or `2.12`."},
			"availability_zone": schema.StringAttribute{Optional: true, Computed: true,
				MarkdownDescription: "Zone of the file system; defaults to the zone of the first private subnet."},
			"s3_import": schema.SingleNestedAttribute{Optional: true,
				MarkdownDescription: "Link the file system's root to S3 with a data repository association: object metadata is imported on create (files load lazily on first read) and, with `auto_import`, kept in step with the bucket.",
				Attributes: map[string]schema.Attribute{
					"uri": schema.StringAttribute{Required: true, MarkdownDescription: "S3 URI of the weights, e.g. `s3://my-models/qwen/`."},
					"auto_import": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
						MarkdownDescription: "Import new, changed and deleted objects as they happen; default `true`."},
				}},
			"deletion_protection": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				MarkdownDescription: "While `true` (default), a plan that would delete the file system (destroy, replacement of the cluster or of the file system, `enabled = false`) is an error. Set it to `false` and apply first."},
			"file_system_id":    computed("ID of the file system (`fs-...`), the static volume's `volumeHandle`."),
			"dns_name":          computed("DNS name of the file system, the volume's `dnsname` attribute."),
			"mount_name":        computed("Lustre mount name, the volume's `mountname` attribute."),
			"security_group_id": computed("Security group of the file system."),
			"association_id":    computed("ID of the S3 data repository association; empty without `s3_import`."),
		},
	}
}

// storageSpec is the plan's file system, nil when disabled.
func storageSpec(ctx context.Context, obj types.Object, diags *diag.Diagnostics) *awsinfra.StorageSpec {
	if obj.IsNull() || obj.IsUnknown() {
		return nil
	}
	var m modelStorageModel
	diags.Append(obj.As(ctx, &m, asObject)...)
	if !m.Enabled.ValueBool() {
		return nil
	}
	s := &awsinfra.StorageSpec{DeploymentType: m.DeploymentType.ValueString(), StorageCapacityGiB: int32(m.StorageCapacityGiB.ValueInt64()),
		PerUnitStorageThroughput: int32(m.PerUnitStorageThroughput.ValueInt64()), FileSystemTypeVersion: m.FileSystemTypeVersion.ValueString(),
		AvailabilityZone: m.AvailabilityZone.ValueString()}
	if !m.S3Import.IsNull() && !m.S3Import.IsUnknown() {
		var s3 s3ImportModel
		diags.Append(m.S3Import.As(ctx, &s3, asObject)...)
		s.S3ImportURI, s.AutoImport = s3.URI.ValueString(), s3.AutoImport.ValueBool()
	}
	return s
}

// storageObject is model_storage as read back; prior supplies what AWS does
// not hold (deletion_protection, enabled = false and its inputs).
func storageObject(ctx context.Context, st *awsinfra.Storage, prior types.Object) types.Object {
	var p modelStorageModel
	if !prior.IsNull() && !prior.IsUnknown() {
		_ = prior.As(ctx, &p, asObject)
	}
	protect := p.DeletionProtection
	if protect.IsNull() || protect.IsUnknown() {
		protect = types.BoolValue(true)
	}
	if st == nil {
		if !p.Enabled.IsNull() && !p.Enabled.ValueBool() {
			return knownOrNull(prior, modelStorageTypes)
		}
		if prior.IsNull() || prior.IsUnknown() {
			// Import of a cluster without a file system.
			return types.ObjectValueMust(modelStorageTypes, storageValues(false, awsinfra.StorageSpec{DeploymentType: awsinfra.DeploymentScratch2,
				StorageCapacityGiB: 1200, FileSystemTypeVersion: "2.15"}, protect, nil))
		}
		// Enabled but gone (deleted behind Terraform's back): computed
		// attributes empty, so the plan creates it again.
		v := prior.Attributes()
		for _, k := range storageComputed {
			v[k] = types.StringNull()
		}
		return types.ObjectValueMust(modelStorageTypes, v)
	}
	return types.ObjectValueMust(modelStorageTypes, storageValues(true, st.StorageSpec, protect, st))
}

func storageValues(enabled bool, s awsinfra.StorageSpec, protect types.Bool, st *awsinfra.Storage) map[string]attr.Value {
	throughput := types.Int64Null()
	// SCRATCH_2 reports its fixed 200 MB/s/TiB; the attribute is PERSISTENT_2's choice.
	if s.DeploymentType == awsinfra.DeploymentPersistent2 && s.PerUnitStorageThroughput > 0 {
		throughput = types.Int64Value(int64(s.PerUnitStorageThroughput))
	}
	s3 := types.ObjectNull(s3ImportTypes)
	if s.S3ImportURI != "" {
		s3 = types.ObjectValueMust(s3ImportTypes, map[string]attr.Value{"uri": types.StringValue(s.S3ImportURI), "auto_import": types.BoolValue(s.AutoImport)})
	}
	v := map[string]attr.Value{"enabled": types.BoolValue(enabled), "deployment_type": types.StringValue(s.DeploymentType),
		"storage_capacity_gib": types.Int64Value(int64(s.StorageCapacityGiB)), "per_unit_storage_throughput": throughput,
		"file_system_type_version": types.StringValue(s.FileSystemTypeVersion), "availability_zone": types.StringNull(), "s3_import": s3,
		"deletion_protection": protect}
	for _, k := range storageComputed {
		v[k] = types.StringNull()
	}
	if st != nil {
		v["availability_zone"] = types.StringValue(st.AvailabilityZone)
		v["file_system_id"], v["dns_name"], v["mount_name"] = types.StringValue(st.FileSystemID), types.StringValue(st.DNSName), types.StringValue(st.MountName)
		v["security_group_id"], v["association_id"] = types.StringValue(st.SecurityGroupID), types.StringValue(st.AssociationID)
	}
	return v
}

// planStorage validates the planned file system, enforces deletion
// protection, and keeps the computed attributes from state unless the file
// system is created or replaced. replacing says the whole cluster is.
func planStorage(ctx context.Context, plan, prior types.Object, configZone types.String, destroy, replacing bool) (types.Object, diag.Diagnostics) {
	var diags diag.Diagnostics
	at := path.Root("model_storage")
	want := storageSpec(ctx, plan, &diags)
	if want != nil {
		if err := awsinfra.ValidateStorage(*want); err != nil {
			field, msg, _ := strings.Cut(err.Error(), ": ")
			diags.AddAttributeError(at.AtName(strings.TrimPrefix(field, "model_storage.")), "Invalid model_storage", field+": "+msg)
			return plan, diags
		}
	}
	var have modelStorageModel
	exists := !prior.IsNull() && !prior.IsUnknown() && !prior.As(ctx, &have, asObject).HasError() && have.FileSystemID.ValueString() != ""
	if !exists {
		switch {
		case want != nil:
			// To be created (or created again after a delete behind
			// Terraform's back, which a plan equal to state would not show).
			plan = unknownStorageComputed(plan, configZone)
		case !plan.IsNull() && !plan.IsUnknown():
			// Off: AWS assigns nothing, whatever the framework marked
			// unknown for another attribute's change.
			plan = knownOrNull(plan, modelStorageTypes)
		}
		return plan, diags
	}
	haveSpec := storageSpec(ctx, prior, &diags)
	var reason string
	switch {
	case destroy:
		reason = "destroying the cluster deletes it"
	case replacing:
		reason = "this plan replaces the whole cluster, which deletes it"
	case want == nil:
		reason = "model_storage.enabled = false deletes it"
	case haveSpec != nil && awsinfra.StorageReplaced(*haveSpec, withZone(*want, configZone, haveSpec.AvailabilityZone)):
		reason = "the change of deployment_type, file_system_type_version, availability_zone or a smaller storage_capacity_gib needs a new file system"
	}
	if reason == "" {
		return keepStorageComputed(plan, prior), diags
	}
	if have.DeletionProtection.ValueBool() {
		diags.AddAttributeError(at.AtName("deletion_protection"), "model_storage is protected from deletion",
			fmt.Sprintf("FSx file system %s holds the model weights and %s. model_storage.deletion_protection is true: set it to false and apply, then run this plan again.",
				have.FileSystemID.ValueString(), reason))
		return plan, diags
	}
	if !destroy && !replacing && want != nil {
		diags.AddAttributeWarning(at, "model_storage will be replaced",
			fmt.Sprintf("FSx file system %s is deleted and a new one created: %s. The cluster and its node groups stay.", have.FileSystemID.ValueString(), reason))
	}
	return plan, diags
}

func unknownStorageComputed(plan types.Object, configZone types.String) types.Object {
	v := plan.Attributes()
	for _, k := range storageComputed {
		v[k] = types.StringUnknown()
	}
	if configZone.IsNull() || configZone.IsUnknown() {
		v["availability_zone"] = types.StringUnknown()
	}
	return types.ObjectValueMust(modelStorageTypes, v)
}

// withZone is want with the zone it will get: the configured one, else the current one.
func withZone(want awsinfra.StorageSpec, configZone types.String, current string) awsinfra.StorageSpec {
	if configZone.IsNull() || configZone.IsUnknown() {
		want.AvailabilityZone = current
	}
	return want
}

// keepStorageComputed carries AWS's values from state into a plan for the
// same file system, so a cluster update does not make llmd_model_fleet's
// storage unknown.
func keepStorageComputed(plan, prior types.Object) types.Object {
	if plan.IsNull() || plan.IsUnknown() {
		return plan
	}
	v := plan.Attributes()
	old := prior.Attributes()
	for _, k := range append([]string{"availability_zone"}, storageComputed...) {
		if v[k].IsUnknown() || v[k].IsNull() {
			v[k] = old[k]
		}
	}
	// A changed S3 link gets a new association id.
	if !v["s3_import"].Equal(old["s3_import"]) {
		v["association_id"] = types.StringUnknown()
	}
	return types.ObjectValueMust(modelStorageTypes, v)
}

// knownOrNull replaces the unknown attributes of a planned object with null:
// what a disabled part reports after apply.
func knownOrNull(obj types.Object, attrTypes map[string]attr.Type) types.Object {
	v := obj.Attributes()
	for k, a := range v {
		if a.IsUnknown() {
			v[k] = nullOf(attrTypes[k])
		}
	}
	return types.ObjectValueMust(attrTypes, v)
}

func nullOf(t attr.Type) attr.Value {
	switch t {
	case types.StringType:
		return types.StringNull()
	case types.BoolType:
		return types.BoolNull()
	case types.Int64Type:
		return types.Int64Null()
	}
	if ot, ok := t.(types.ObjectType); ok {
		return types.ObjectNull(ot.AttrTypes)
	}
	return types.StringNull()
}
