package provider

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/list"
	listschema "github.com/hashicorp/terraform-plugin-framework/list/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// List resources (Terraform 1.14+, `terraform query`) find what this
// provider made and yield each as an identity, from which Terraform writes
// the import block and, with include_resource or -generate-config-out, the
// resource's configuration read exactly as an import would read it.
//
// Each shares its resource's type name and configuration (Metadata,
// Configure); clusters are found by their ownership tag in the provider's
// region, fleets and routers by their labels in a cluster named in the list
// block (never the provider block: DESIGN.md decision 1).

var (
	_ list.ListResourceWithConfigure = (*inferenceClusterList)(nil)
	_ list.ListResourceWithConfigure = (*modelFleetList)(nil)
	_ list.ListResourceWithConfigure = (*prefixRouterList)(nil)
)

func newInferenceClusterList() list.ListResource { return &inferenceClusterList{} }
func newModelFleetList() list.ListResource       { return &modelFleetList{} }
func newPrefixRouterList() list.ListResource     { return &prefixRouterList{} }

// inferenceClusterList lists the llmd_inference_cluster clusters in the
// provider's region.
type inferenceClusterList struct{ inferenceClusterResource }

// modelFleetList lists the llmd_model_fleet fleets in a cluster.
type modelFleetList struct{ modelFleetResource }

// prefixRouterList lists the llmd_prefix_router routers in a cluster.
type prefixRouterList struct{ prefixRouterResource }

// clusterListModel is llmd_inference_cluster's list block configuration.
type clusterListModel struct {
	NamePrefix types.String `tfsdk:"name_prefix"`
}

func (l *inferenceClusterList) ListResourceConfigSchema(_ context.Context, _ list.ListResourceSchemaRequest, resp *list.ListResourceSchemaResponse) {
	resp.Schema = listschema.Schema{
		MarkdownDescription: "Lists the EKS clusters that `llmd_inference_cluster` made in the provider's region " +
			"(found by their `llmd.dev/owner` tag), each with its identity for an import block.",
		Attributes: map[string]listschema.Attribute{
			"name_prefix": listschema.StringAttribute{Optional: true,
				MarkdownDescription: "Only clusters whose name starts with this prefix."},
		},
	}
}

func (l *inferenceClusterList) List(ctx context.Context, req list.ListRequest, stream *list.ListResultsStream) {
	var cfg clusterListModel
	if diags := req.Config.Get(ctx, &cfg); diags.HasError() {
		stream.Results = list.ListResultsStreamDiagnostics(diags)
		return
	}
	if l.data == nil {
		stream.Results = listError("Listing inference clusters", "the provider is not configured")
		return
	}
	names, err := l.clients().ListOwnedClusters(ctx)
	if err != nil {
		stream.Results = listError("Listing inference clusters", err.Error())
		return
	}
	names = withPrefix(names, cfg.NamePrefix.ValueString())
	stream.Results = func(push func(list.ListResult) bool) {
		for i, name := range names {
			if req.Limit > 0 && int64(i) >= req.Limit {
				return
			}
			result := req.NewListResult(ctx)
			result.DisplayName = name
			result.Diagnostics.Append(result.Identity.Set(ctx, l.identity(types.StringValue(name)))...)
			if req.IncludeResource && !result.Diagnostics.HasError() {
				readImported(ctx, req, &result, resource.ImportStateRequest{ID: name}, l.ImportState, l.Read)
			}
			if !push(result) {
				return
			}
		}
	}
}

// inClusterListModel is the list block configuration of fleets and routers.
type inClusterListModel struct {
	ClusterName types.String `tfsdk:"cluster_name"`
	Namespace   types.String `tfsdk:"namespace"`
}

// inClusterListSchema is the list block of fleets or routers (what).
func inClusterListSchema(what, resourceType string) listschema.Schema {
	return listschema.Schema{
		MarkdownDescription: fmt.Sprintf("Lists the %ss that `%s` made in an EKS cluster of the provider's region "+
			"(found by their labels and settings annotation), each with its identity for an import block.", what, resourceType),
		Attributes: map[string]listschema.Attribute{
			"cluster_name": listschema.StringAttribute{Required: true,
				MarkdownDescription: "Name of the EKS cluster to look in (an `llmd_inference_cluster`'s `name`); " +
					"the cluster is found in the provider's region, as an import finds it."},
			"namespace": listschema.StringAttribute{Optional: true,
				MarkdownDescription: "Only this namespace; every namespace when unset."},
		},
	}
}

func (l *modelFleetList) ListResourceConfigSchema(_ context.Context, _ list.ListResourceSchemaRequest, resp *list.ListResourceSchemaResponse) {
	resp.Schema = inClusterListSchema("model fleet", "llmd_model_fleet")
}

func (l *modelFleetList) List(ctx context.Context, req list.ListRequest, stream *list.ListResultsStream) {
	stream.Results = listInCluster(ctx, l.data, l.kind(), req, l.ImportState, l.Read)
}

func (l *prefixRouterList) ListResourceConfigSchema(_ context.Context, _ list.ListResourceSchemaRequest, resp *list.ListResourceSchemaResponse) {
	resp.Schema = inClusterListSchema("prefix router", "llmd_prefix_router")
}

func (l *prefixRouterList) List(ctx context.Context, req list.ListRequest, stream *list.ListResultsStream) {
	stream.Results = listInCluster(ctx, l.data, l.kind(), req, l.ImportState, l.Read)
}

// Signatures of a resource's ImportState and Read, which a listed result
// with include_resource runs in turn, as `terraform import` would.
type (
	importFunc func(context.Context, resource.ImportStateRequest, *resource.ImportStateResponse)
	readFunc   func(context.Context, resource.ReadRequest, *resource.ReadResponse)
)

// listInCluster finds the Deployments of one kind (k.label) in the named
// cluster that carry k's settings annotation, i.e. that the resource made,
// and yields each with its identity.
func listInCluster[M any](ctx context.Context, data *providerData, k anchoredKind[M], req list.ListRequest,
	importState importFunc, read readFunc) func(func(list.ListResult) bool) {
	what := "Listing " + k.what + "s"
	var cfg inClusterListModel
	if diags := req.Config.Get(ctx, &cfg); diags.HasError() {
		return list.ListResultsStreamDiagnostics(diags)
	}
	if data == nil {
		return listError(what, "the provider is not configured")
	}
	clusterName := cfg.ClusterName.ValueString()
	if clusterName == "" {
		return listError(what, "cluster_name: must name an EKS cluster, e.g. cluster_name = \"prod\"")
	}
	what += " in " + clusterName
	cluster, err := clusterByName(ctx, data, clusterName)
	if err != nil {
		return listError(what, err.Error())
	}
	conn, err := decodeConnection(ctx, cluster, types.ObjectNull(nil))
	if err != nil {
		return listError(what, err.Error())
	}
	c, err := conn.client(ctx, data)
	if err != nil {
		return listError(what, err.Error())
	}
	deps, err := c.Typed.AppsV1().Deployments(cfg.Namespace.ValueString()).List(ctx,
		metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=llmd," + k.label})
	if err != nil {
		return listError(what, fmt.Sprintf("listing Deployments: %v", err))
	}
	var refs []string
	for _, d := range deps.Items {
		if _, ok := d.Annotations[k.annotation]; ok {
			refs = append(refs, d.Namespace+"/"+d.Name)
		}
	}
	sort.Strings(refs)
	return func(push func(list.ListResult) bool) {
		for i, ref := range refs {
			if req.Limit > 0 && int64(i) >= req.Limit {
				return
			}
			result := req.NewListResult(ctx)
			result.DisplayName = clusterName + "/" + ref
			namespace, name, _ := strings.Cut(ref, "/")
			id, diags := inClusterIdentity(ctx, cluster, types.StringValue(namespace), types.StringValue(name))
			result.Diagnostics.Append(diags...)
			result.Diagnostics.Append(result.Identity.Set(ctx, id)...)
			if req.IncludeResource && !result.Diagnostics.HasError() {
				readImported(ctx, req, &result, resource.ImportStateRequest{ID: clusterName + "/" + ref}, importState, read)
			}
			if !push(result) {
				return
			}
		}
	}
}

// readImported fills result.Resource as `terraform import` would: the
// resource's ImportState from the id, then its Read.
func readImported(ctx context.Context, req list.ListRequest, result *list.ListResult, imp resource.ImportStateRequest, importState importFunc, read readFunc) {
	empty := tfsdk.State{Schema: req.ResourceSchema, Raw: tftypes.NewValue(req.ResourceSchema.Type().TerraformType(ctx), nil)}
	identity := *result.Identity
	imported := resource.ImportStateResponse{State: empty, Identity: &identity}
	importState(ctx, imp, &imported)
	result.Diagnostics.Append(imported.Diagnostics...)
	if result.Diagnostics.HasError() {
		return
	}
	readResp := resource.ReadResponse{State: imported.State, Identity: &identity}
	read(ctx, resource.ReadRequest{State: imported.State, Identity: &identity}, &readResp)
	result.Diagnostics.Append(readResp.Diagnostics...)
	if result.Diagnostics.HasError() {
		return
	}
	if readResp.State.Raw.IsNull() {
		result.Diagnostics.AddError("Reading "+result.DisplayName, "it was deleted while it was being listed; run the query again")
		return
	}
	result.Resource = &tfsdk.Resource{Schema: readResp.State.Schema, Raw: readResp.State.Raw}
}

// listError is a list's single error result.
func listError(summary, detail string) func(func(list.ListResult) bool) {
	var diags diag.Diagnostics
	diags.AddError(summary, detail)
	return list.ListResultsStreamDiagnostics(diags)
}

// withPrefix keeps the names that start with prefix.
func withPrefix(names []string, prefix string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}
