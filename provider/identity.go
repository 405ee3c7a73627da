package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/identityschema"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
)

// Resource identity (Terraform 1.12+) names the remote object; import by
// identity takes it instead of an import id. Each resource sets it in Create
// from the plan before any call that can wait (the inputs that make it up
// replace the resource when they change, so it never changes after), in
// Update and Read from the same inputs, and in ImportState. Setting it only
// after a long wait is how the kubernetes provider 3.2.1 shipped "Unexpected
// Identity Change" on slow resources (GH-2859).

// clusterIdentityModel is llmd_inference_cluster's identity: an EKS cluster
// name is unique in its region and account, and the provider's credentials
// pick the account.
type clusterIdentityModel struct {
	Region types.String `tfsdk:"region"`
	Name   types.String `tfsdk:"name"`
}

// inClusterIdentityModel is the identity of llmd_model_fleet and
// llmd_prefix_router: the cluster's identity and the Deployment's namespace
// and name, the parts of their import id `<cluster>/<namespace>/<name>`.
type inClusterIdentityModel struct {
	ClusterRegion types.String `tfsdk:"cluster_region"`
	ClusterName   types.String `tfsdk:"cluster_name"`
	Namespace     types.String `tfsdk:"namespace"`
	Name          types.String `tfsdk:"name"`
}

const regionIdentityDescription = "AWS region of the EKS cluster. Optional for import: the provider's region; another region is an error, as the provider's clients work in one."

func clusterIdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = identityschema.Schema{Attributes: map[string]identityschema.Attribute{
		"region": identityschema.StringAttribute{OptionalForImport: true, Description: regionIdentityDescription},
		"name":   identityschema.StringAttribute{RequiredForImport: true, Description: "Name of the EKS cluster."},
	}}
}

func inClusterIdentitySchema(_ context.Context, _ resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	resp.IdentitySchema = identityschema.Schema{Attributes: map[string]identityschema.Attribute{
		"cluster_region": identityschema.StringAttribute{OptionalForImport: true, Description: regionIdentityDescription +
			" Null for a resource on a cluster made elsewhere (`kubernetes`), which cannot be imported."},
		"cluster_name": identityschema.StringAttribute{RequiredForImport: true, Description: "Name of the EKS cluster (`cluster.name`); " +
			"null for a resource on a cluster made elsewhere (`kubernetes`)."},
		"namespace": identityschema.StringAttribute{RequiredForImport: true, Description: "Namespace of the resource's objects."},
		"name":      identityschema.StringAttribute{RequiredForImport: true, Description: "Name of the resource's Deployment."},
	}}
}

// inClusterIdentity is the identity of a fleet or router in namespace/name
// on the cluster given as `cluster` (null for a `kubernetes` connection).
func inClusterIdentity(ctx context.Context, cluster types.Object, namespace, name types.String) (inClusterIdentityModel, diag.Diagnostics) {
	id := inClusterIdentityModel{ClusterRegion: types.StringNull(), ClusterName: types.StringNull(), Namespace: namespace, Name: name}
	if cluster.IsNull() || cluster.IsUnknown() {
		return id, nil
	}
	var k kubernetesModel
	diags := cluster.As(ctx, &k, asObject)
	id.ClusterRegion, id.ClusterName = k.Region, k.Name
	return id, diags
}

// setInClusterIdentity sets identity from the state or plan fields f, with
// namespace and name from the id `<namespace>/<name>` when the fields lack
// them (right after an import, before the settings are restored).
func setInClusterIdentity(ctx context.Context, identity *tfsdk.ResourceIdentity, f anchoredFields) diag.Diagnostics {
	namespace, name := *f.namespace, *f.name
	if ns, n, ok := strings.Cut(f.id.ValueString(), "/"); ok && (name.IsNull() || name.IsUnknown()) {
		namespace, name = types.StringValue(ns), types.StringValue(n)
	}
	id, diags := inClusterIdentity(ctx, *f.cluster, namespace, name)
	if diags.HasError() {
		return diags
	}
	return identity.Set(ctx, id)
}

// importTarget is what an import names: an EKS cluster in the provider's
// region and, for resources inside it, a namespace and a name. It comes from
// the import id or, with Terraform 1.12+, the identity of an import block.
type importTarget struct {
	cluster, namespace, name string
}

// clusterImportTarget reads an llmd_inference_cluster import: the id is the
// cluster's name.
func clusterImportTarget(ctx context.Context, data *providerData, req resource.ImportStateRequest) (importTarget, diag.Diagnostics) {
	if req.ID != "" || req.Identity == nil {
		return importTarget{cluster: req.ID}, nil
	}
	var id clusterIdentityModel
	diags := req.Identity.Get(ctx, &id)
	if diags.HasError() {
		return importTarget{}, diags
	}
	if err := checkImportRegion(data, id.Region); err != nil {
		diags.AddError("Importing inference cluster", err.Error())
	}
	return importTarget{cluster: id.Name.ValueString()}, diags
}

// inClusterImportTarget reads a fleet or router import: the id
// `<cluster>/<namespace>/<name>`, or the identity's parts.
func inClusterImportTarget(ctx context.Context, data *providerData, what string, req resource.ImportStateRequest) (importTarget, diag.Diagnostics) {
	var diags diag.Diagnostics
	if req.ID != "" || req.Identity == nil {
		parts := strings.Split(req.ID, "/")
		if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
			diags.AddError("Importing "+what, fmt.Sprintf("import id %q: want <cluster>/<namespace>/<name>, e.g. prod/llmd/qwen", req.ID))
			return importTarget{}, diags
		}
		return importTarget{cluster: parts[0], namespace: parts[1], name: parts[2]}, nil
	}
	var id inClusterIdentityModel
	diags.Append(req.Identity.Get(ctx, &id)...)
	if diags.HasError() {
		return importTarget{}, diags
	}
	if err := checkImportRegion(data, id.ClusterRegion); err != nil {
		diags.AddError("Importing "+what, err.Error())
	}
	return importTarget{cluster: id.ClusterName.ValueString(), namespace: id.Namespace.ValueString(), name: id.Name.ValueString()}, diags
}

// checkImportRegion accepts an identity's region when it is unset or the
// provider's: every lookup runs in the provider's region.
func checkImportRegion(data *providerData, region types.String) error {
	if data == nil || region.IsNull() || region.ValueString() == "" || region.ValueString() == data.AWS.Config.Region {
		return nil
	}
	return fmt.Errorf("the identity's region %q is not the provider's (%q): import with a provider configured for %s", region.ValueString(), data.AWS.Config.Region, region.ValueString())
}
