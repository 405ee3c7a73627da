package provider

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"time"

	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/llmd-dev/terraform-provider-llmd/internal/awsinfra"
	"github.com/llmd-dev/terraform-provider-llmd/internal/ekscredential"
	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
)

var _ ephemeral.EphemeralResourceWithConfigure = (*clusterCredentials)(nil)

func newClusterCredentials() ephemeral.EphemeralResource { return &clusterCredentials{} }

// clusterCredentials is llmd_cluster_credentials (Terraform 1.10+): what
// the kubernetes and helm providers need to reach an EKS cluster, never
// stored in plan or state. Its token lasts fifteen minutes; its `exec`
// block runs this provider's binary as a client-go credential plugin, which
// mints a new token whenever the one held is due, for as long as a run.
type clusterCredentials struct {
	data *providerData
}

// clusterCredentialsModel is the ephemeral resource's configuration and result.
type clusterCredentialsModel struct {
	ClusterName          types.String `tfsdk:"cluster_name"`
	Host                 types.String `tfsdk:"host"`
	ClusterCACertificate types.String `tfsdk:"cluster_ca_certificate"`
	Token                types.String `tfsdk:"token"`
	Expiration           types.String `tfsdk:"expiration"`
	Exec                 types.Object `tfsdk:"exec"`
}

// execTypes are the `exec` object's attribute types: the kubernetes and
// helm providers' exec block.
var execTypes = map[string]attr.Type{"api_version": types.StringType, "command": types.StringType,
	"args": types.ListType{ElemType: types.StringType}, "env": types.MapType{ElemType: types.StringType}}

func (e *clusterCredentials) Metadata(_ context.Context, req ephemeral.MetadataRequest, resp *ephemeral.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_cluster_credentials"
}

func (e *clusterCredentials) Schema(_ context.Context, _ ephemeral.SchemaRequest, resp *ephemeral.SchemaResponse) {
	computed := func(desc string) schema.StringAttribute {
		return schema.StringAttribute{Computed: true, MarkdownDescription: desc}
	}
	resp.Schema = schema.Schema{
		MarkdownDescription: "Credentials for the kubernetes and helm providers on an EKS cluster in the provider's region (Terraform 1.10+), " +
			"never written to plan or state. Prefer `exec`: it runs this provider's binary as a client-go credential plugin, which " +
			"mints a new token whenever the one held is ten minutes old, signed with the provider's own AWS settings (profile, " +
			"`assume_role`, web identity), so a long apply never meets an expired token. `token` alone lasts fifteen minutes, as " +
			"`aws_eks_cluster_auth`'s does.",
		Attributes: map[string]schema.Attribute{
			"cluster_name": schema.StringAttribute{Required: true,
				MarkdownDescription: "The EKS cluster's name, e.g. `llmd_inference_cluster.<name>.name`."},
			"host":                   computed("The Kubernetes API server's URL."),
			"cluster_ca_certificate": computed("The cluster's certificate authority, PEM (decoded, as the kubernetes provider takes it)."),
			"token": schema.StringAttribute{Computed: true, Sensitive: true,
				MarkdownDescription: "An EKS bearer token, accepted until `expiration` (fifteen minutes after it was signed, sooner when the credentials that signed it expire first)."},
			"expiration": computed("When EKS stops accepting `token`, RFC 3339 (UTC)."),
			"exec": schema.SingleNestedAttribute{Computed: true,
				MarkdownDescription: "A client-go exec credential plugin, as the kubernetes and helm providers' `exec` block takes it. " +
					"`command` is this provider's binary where Terraform installed it (valid for this run); `env` carries the provider's " +
					"AWS settings (secrets included, which is why the block is ephemeral). A token it mints lives as long as the " +
					"credentials that sign it: with `assume_role`, the role's session is assumed again when it ends.",
				Attributes: map[string]schema.Attribute{
					"api_version": computed("`" + ekscredential.APIVersion + "`."),
					"command":     computed("The provider binary's path."),
					"args":        schema.ListAttribute{Computed: true, ElementType: types.StringType, MarkdownDescription: "`eks-token --cluster <name> --region <region>`."},
					"env": schema.MapAttribute{Computed: true, Sensitive: true, ElementType: types.StringType,
						MarkdownDescription: "`" + ekscredential.SettingsEnv + "`: the provider's AWS settings."},
				},
			},
		},
	}
}

func (e *clusterCredentials) Configure(_ context.Context, req ephemeral.ConfigureRequest, resp *ephemeral.ConfigureResponse) {
	e.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (e *clusterCredentials) Open(ctx context.Context, req ephemeral.OpenRequest, resp *ephemeral.OpenResponse) {
	var m clusterCredentialsModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if e.data == nil {
		resp.Diagnostics.AddError("Provider not configured", "llmd_cluster_credentials needs the provider's AWS configuration")
		return
	}
	name := m.ClusterName.ValueString()
	host, ca, err := activeCluster(ctx, e.data.AWS, name)
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("cluster_name"), "Reading the cluster", err.Error())
		return
	}
	region := e.data.AWS.Config.Region
	token, expires, err := kube.NewTokenSource(e.data.AWS.Config, name, region, nil).Token(ctx)
	if err != nil {
		resp.Diagnostics.AddError("Minting an EKS token", err.Error())
		return
	}
	exec, err := execPlugin(e.data.AWS.Settings, name, region)
	if err != nil {
		resp.Diagnostics.AddError("Describing the credential plugin", err.Error())
		return
	}
	m.Host, m.ClusterCACertificate, m.Token = types.StringValue(host), types.StringValue(ca), types.StringValue(token)
	m.Expiration, m.Exec = types.StringValue(expires.UTC().Format(time.RFC3339)), exec
	resp.Diagnostics.Append(resp.Result.Set(ctx, &m)...)
}

// activeCluster is an ACTIVE EKS cluster's endpoint and PEM CA.
func activeCluster(ctx context.Context, clients *awsinfra.Clients, name string) (host, ca string, err error) {
	cl, err := clients.EKSCluster(ctx, name)
	if err != nil {
		return "", "", err
	}
	if cl == nil {
		return "", "", fmt.Errorf("no EKS cluster %q in %s: check cluster_name and the provider's region", name, clients.Config.Region)
	}
	// An UPDATING cluster's API server keeps serving (a version or
	// configuration update); any other state has none to reach.
	if cl.Status != ekstypes.ClusterStatusActive && cl.Status != ekstypes.ClusterStatusUpdating {
		return "", "", fmt.Errorf("EKS cluster %q is %s, not ACTIVE: its API server may not answer yet; depend on the cluster resource, "+
			"e.g. cluster_name = llmd_inference_cluster.<name>.name", name, cl.Status)
	}
	if cl.Endpoint == nil || cl.CertificateAuthority == nil || cl.CertificateAuthority.Data == nil {
		return "", "", fmt.Errorf("EKS cluster %q has no endpoint or certificate authority yet", name)
	}
	pem, err := base64.StdEncoding.DecodeString(*cl.CertificateAuthority.Data)
	if err != nil {
		return "", "", fmt.Errorf("EKS cluster %q's certificate authority is not base64: %w", name, err)
	}
	return *cl.Endpoint, string(pem), nil
}

// execPlugin is the `exec` object running this binary's eks-token command
// with the provider's settings.
func execPlugin(s awsinfra.Settings, cluster, region string) (types.Object, error) {
	self, err := os.Executable()
	if err != nil {
		return types.ObjectNull(execTypes), fmt.Errorf("locating the provider's binary: %w", err)
	}
	settings, err := json.Marshal(s)
	if err != nil {
		return types.ObjectNull(execTypes), err
	}
	args, _ := types.ListValueFrom(context.Background(), types.StringType, []string{ekscredential.Command, "--cluster", cluster, "--region", region})
	env, _ := types.MapValueFrom(context.Background(), types.StringType, map[string]string{ekscredential.SettingsEnv: string(settings)})
	obj, diags := types.ObjectValue(execTypes, map[string]attr.Value{"api_version": types.StringValue(ekscredential.APIVersion),
		"command": types.StringValue(self), "args": args, "env": env})
	if diags.HasError() {
		return types.ObjectNull(execTypes), fmt.Errorf("building exec: %v", diags)
	}
	return obj, nil
}
