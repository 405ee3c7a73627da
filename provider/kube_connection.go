package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	corev1 "k8s.io/api/core/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/imageref"
	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
)

// directModel is `kubernetes`: a cluster made elsewhere.
type directModel struct {
	Host                 types.String `tfsdk:"host"`
	ClusterCACertificate types.String `tfsdk:"cluster_ca_certificate"`
	Token                types.String `tfsdk:"token"`
	ConfigPath           types.String `tfsdk:"config_path"`
	ConfigContext        types.String `tfsdk:"config_context"`
	InstanceType         types.String `tfsdk:"instance_type"`
	ImageMirrors         types.Map    `tfsdk:"image_mirrors"`
}

// directTypes are directModel's attribute types.
var directTypes = map[string]attr.Type{"host": types.StringType, "cluster_ca_certificate": types.StringType,
	"token": types.StringType, "config_path": types.StringType, "config_context": types.StringType,
	"instance_type": types.StringType, "image_mirrors": types.MapType{ElemType: types.StringType}}

// connectionAttributes are `cluster` and `kubernetes`, shared by every
// resource that works inside a cluster. A change of the cluster's name,
// endpoint or region (a new cluster: empty) replaces the resource.
func connectionAttributes(what string) map[string]schema.Attribute {
	optional := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Optional: true, MarkdownDescription: desc}
	}
	return map[string]schema.Attribute{
		"cluster": schema.SingleNestedAttribute{
			Optional: true,
			MarkdownDescription: "The cluster to run " + what + " on: `llmd_inference_cluster.<name>.kubernetes`, passed as is. Tokens are minted from " +
				"the provider's own AWS credentials (assume_role included) for each operation and re-minted before EKS's 15-minute limit; they are never stored. " +
				"No provider-level Kubernetes settings exist, so a cluster created in the same apply works. A change of name, endpoint or region replaces " + what + ".",
			PlanModifiers: []planmodifier.Object{objectplanmodifier.RequiresReplaceIf(clusterChanged,
				"A different cluster (name, endpoint or region) starts empty.", "A different cluster (name, endpoint or region) starts empty.")},
			Attributes: map[string]schema.Attribute{
				"name":                   optional("EKS cluster name (signed into the token)."),
				"endpoint":               optional("URL of the Kubernetes API server."),
				"cluster_ca_certificate": optional("Base64 PEM of the cluster's certificate authority."),
				"region":                 optional("AWS region of the cluster."),
				"gpu_instance_type":      optional("Instance type of the GPU nodes (sizes the pods)."),
				"gpu_node_labels":        schema.MapAttribute{ElementType: types.StringType, Optional: true, MarkdownDescription: "Labels of the GPU nodes."},
				"gpu_node_taints":        schema.ListAttribute{ElementType: types.StringType, Optional: true, MarkdownDescription: "Taints of the GPU nodes, `key=value:Effect`."},
				"gpu_node_desired_size": schema.Int64Attribute{Optional: true,
					MarkdownDescription: "Desired size of the GPU node group; the fleet's plan refuses more pods than those nodes hold. Unset: not checked."},
				"system_node_labels": schema.MapAttribute{ElementType: types.StringType, Optional: true,
					MarkdownDescription: "Labels of the system nodes (the router's and the staging Job's node selector). Unset (a cluster object from before this attribute): `llmd.dev/pool = system`, the default system node group's label."},
				"system_node_taints": schema.ListAttribute{ElementType: types.StringType, Optional: true,
					MarkdownDescription: "Taints of the system nodes, `key=value:Effect`, which the router and the staging Job tolerate."},
				"system_node_desired_size": schema.Int64Attribute{Optional: true,
					MarkdownDescription: "Desired size of the system node group; with 1 and more than one router replica, the plan warns that the replicas share a node."},
				"image_mirrors": schema.MapAttribute{ElementType: types.StringType, Optional: true,
					MarkdownDescription: "The cluster's `image_mirrors`: every image " + what + " deploys is pulled through them."},
			},
		},
		"kubernetes": schema.SingleNestedAttribute{
			Optional: true,
			MarkdownDescription: "A cluster made elsewhere, instead of `cluster`: `host` + `cluster_ca_certificate` + `token`, or `config_path` (+ `config_context`). " +
				"Never falls back to in-cluster configuration or `~/.kube/config`. A static token is kept in state (marked sensitive): prefer a kubeconfig " +
				"whose exec plugin mints short-lived tokens.",
			Attributes: map[string]schema.Attribute{
				"host":                   optional("URL of the Kubernetes API server."),
				"cluster_ca_certificate": optional("PEM (or base64 PEM) of the cluster's certificate authority."),
				"token":                  schema.StringAttribute{Optional: true, Sensitive: true, MarkdownDescription: "Bearer token."},
				"config_path":            optional("Path of a kubeconfig file."),
				"config_context":         optional("Context in that file; default its current context."),
				"instance_type":          optional("Instance type of the GPU nodes, for the default pod resources; default `g5.xlarge`."),
				"image_mirrors": schema.MapAttribute{ElementType: types.StringType, Optional: true,
					MarkdownDescription: "Upstream registry host to mirror prefix, as `llmd_inference_cluster`'s `image_mirrors`: every image " + what + " deploys is pulled through them."},
			},
		},
	}
}

func clusterChanged(ctx context.Context, req planmodifier.ObjectRequest, resp *objectplanmodifier.RequiresReplaceIfFuncResponse) {
	if req.StateValue.IsNull() || req.PlanValue.IsNull() {
		return
	}
	var prior, planned kubernetesModel
	resp.Diagnostics.Append(req.StateValue.As(ctx, &prior, asObject)...)
	resp.Diagnostics.Append(req.PlanValue.As(ctx, &planned, asObject)...)
	for _, pair := range [][2]types.String{{prior.Name, planned.Name}, {prior.Endpoint, planned.Endpoint}, {prior.Region, planned.Region}} {
		if pair[1].IsUnknown() || !pair[0].Equal(pair[1]) {
			resp.RequiresReplace = true
		}
	}
}

// connection is a resource's way to its cluster, decoded.
type connection struct {
	cluster *kubernetesModel
	direct  *directModel
}

// validateActionConnection checks an action's `cluster` and `kubernetes`
// once both are known (at plan they may not be).
func validateActionConnection(cluster, direct types.Object, diags *diag.Diagnostics) {
	if cluster.IsUnknown() || direct.IsUnknown() {
		return
	}
	if at, msg := validateConnectionConfig(cluster, direct); msg != "" {
		diags.AddAttributeError(at, "Invalid cluster", msg)
	}
}

func decodeConnection(ctx context.Context, cluster, direct types.Object) (connection, error) {
	var c connection
	if !cluster.IsNull() && !cluster.IsUnknown() {
		c.cluster = &kubernetesModel{}
		if d := cluster.As(ctx, c.cluster, asObject); d.HasError() {
			return c, fmt.Errorf("cluster: %v", d)
		}
	}
	if !direct.IsNull() && !direct.IsUnknown() {
		c.direct = &directModel{}
		if d := direct.As(ctx, c.direct, asObject); d.HasError() {
			return c, fmt.Errorf("kubernetes: %v", d)
		}
	}
	return c, nil
}

// validateConnectionConfig runs at plan time: exactly one of the two, and
// no call to any cluster.
func validateConnectionConfig(cluster, direct types.Object) (path.Path, string) {
	switch {
	case cluster.IsNull() && direct.IsNull():
		return path.Root("cluster"), "set cluster = llmd_inference_cluster.<name>.kubernetes, or a kubernetes block for a cluster made elsewhere"
	case !cluster.IsNull() && !direct.IsNull():
		return path.Root("kubernetes"), "set either cluster or kubernetes, not both"
	}
	return path.Empty(), ""
}

// target is how internal/kube reaches the cluster.
func (c connection) target() kube.Target {
	if c.cluster != nil {
		return kube.Target{ClusterName: c.cluster.Name.ValueString(), Endpoint: c.cluster.Endpoint.ValueString(),
			CACertificate: c.cluster.ClusterCACertificate.ValueString(), Region: c.cluster.Region.ValueString()}
	}
	if c.direct != nil {
		return kube.Target{Host: c.direct.Host.ValueString(), CACertificate: c.direct.ClusterCACertificate.ValueString(),
			Token: c.direct.Token.ValueString(), Kubeconfig: c.direct.ConfigPath.ValueString(), Context: c.direct.ConfigContext.ValueString()}
	}
	return kube.Target{}
}

// client builds a Kubernetes client for one operation, logging through tflog.
func (c connection) client(ctx context.Context, data *providerData) (*kube.Client, error) {
	if data == nil {
		return nil, fmt.Errorf("the provider is not configured yet")
	}
	t := c.target()
	if err := t.Validate(); err != nil {
		return nil, err
	}
	cfg, err := kube.RESTConfig(ctx, t, data.AWS.Config)
	if err != nil {
		return nil, err
	}
	return kube.NewClient(cfg, func(ctx context.Context, msg string, fields map[string]any) { tflog.Info(ctx, msg, fields) })
}

// imageMirrors is where the images are pulled from: the cluster's
// image_mirrors, or the kubernetes block's. Errors name the attribute.
func (c connection) imageMirrors(ctx context.Context) (imageref.Mirrors, error) {
	raw, field := types.MapNull(types.StringType), ""
	switch {
	case c.cluster != nil:
		raw, field = c.cluster.ImageMirrors, "cluster.image_mirrors"
	case c.direct != nil:
		raw, field = c.direct.ImageMirrors, "kubernetes.image_mirrors"
	}
	if raw.IsNull() || raw.IsUnknown() {
		return nil, nil
	}
	var m map[string]string
	if d := raw.ElementsAs(ctx, &m, false); d.HasError() {
		return nil, fmt.Errorf("%s: %v", field, d)
	}
	return imageref.NewMirrors(m, field)
}

// instanceType is the GPU instance type the pods are sized for.
func (c connection) instanceType() string {
	if c.cluster != nil && c.cluster.GPUInstanceType.ValueString() != "" {
		return c.cluster.GPUInstanceType.ValueString()
	}
	if c.direct != nil && c.direct.InstanceType.ValueString() != "" {
		return c.direct.InstanceType.ValueString()
	}
	return "g5.xlarge"
}

// gpuScheduling is where the cluster's GPU node group puts GPU pods: its
// labels as node selector, its taints tolerated. A cluster made elsewhere
// gets the taint EKS GPU node groups conventionally carry.
func (c connection) gpuScheduling(ctx context.Context) (map[string]string, []corev1.Toleration, error) {
	if c.cluster == nil || c.cluster.GPUNodeLabels.IsNull() {
		return nil, []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}, nil
	}
	return nodeScheduling(ctx, c.cluster.GPUNodeLabels, c.cluster.GPUNodeTaints, "cluster.gpu_node")
}

// systemScheduling is where the router and the staging Job go, off the GPU
// nodes: the cluster's system node group as its `kubernetes` object reports
// it (labels as node selector, taints tolerated). A cluster object written
// before it carried the system group's labels means the default system
// group's label; a cluster made elsewhere (no `cluster`) places nothing.
func (c connection) systemScheduling(ctx context.Context) (map[string]string, []corev1.Toleration, error) {
	if c.cluster == nil {
		return nil, nil, nil
	}
	if c.cluster.SystemNodeLabels.IsNull() {
		return systemDefaults.labels, nil, nil
	}
	return nodeScheduling(ctx, c.cluster.SystemNodeLabels, c.cluster.SystemNodeTaints, "cluster.system_node")
}

// nodeScheduling reads a node group's labels and `key=value:Effect` taints
// (attributes <field>_labels and <field>_taints) as a node selector and
// tolerations.
func nodeScheduling(ctx context.Context, labelsAttr types.Map, taintsAttr types.List, field string) (map[string]string, []corev1.Toleration, error) {
	var labels map[string]string
	var taints []string
	if d := labelsAttr.ElementsAs(ctx, &labels, false); d.HasError() {
		return nil, nil, fmt.Errorf("%s_labels: %v", field, d)
	}
	if d := taintsAttr.ElementsAs(ctx, &taints, false); d.HasError() {
		return nil, nil, fmt.Errorf("%s_taints: %v", field, d)
	}
	var tols []corev1.Toleration
	for _, t := range taints {
		tol, err := parseTaint(t)
		if err != nil {
			return nil, nil, fmt.Errorf("%s_taints: %w", field, err)
		}
		tols = append(tols, tol)
	}
	return labels, tols, nil
}

// parseTaint reads "key=value:Effect" (or "key:Effect") as a toleration of it.
func parseTaint(s string) (corev1.Toleration, error) {
	kv, effect, ok := strings.Cut(s, ":")
	if !ok || kv == "" {
		return corev1.Toleration{}, fmt.Errorf("%q: want key=value:Effect, e.g. nvidia.com/gpu=true:NoSchedule", s)
	}
	key, value, _ := strings.Cut(kv, "=")
	tol := corev1.Toleration{Key: key, Value: value, Operator: corev1.TolerationOpEqual, Effect: corev1.TaintEffect(effect)}
	if value == "" {
		tol.Operator = corev1.TolerationOpExists
	}
	switch tol.Effect {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute, corev1.TaintEffectPreferNoSchedule:
	default:
		return corev1.Toleration{}, fmt.Errorf("%q: effect %q is not NoSchedule, NoExecute or PreferNoSchedule", s, effect)
	}
	return tol, nil
}
