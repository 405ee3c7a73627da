package provider

import (
	"context"

	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/datasource/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/llmd-dev/terraform-provider-llmd/internal/awsinfra"
)

var (
	_ datasource.DataSource              = (*callerIdentityDataSource)(nil)
	_ datasource.DataSourceWithConfigure = (*callerIdentityDataSource)(nil)
)

func newCallerIdentityDataSource() datasource.DataSource { return &callerIdentityDataSource{} }

// callerIdentityDataSource shows who the provider acts as, and the IAM principal
// the cluster resource grants Kubernetes admin to. It doubles as a check that the
// provider's credentials, role assumption and endpoints work before a long apply.
type callerIdentityDataSource struct {
	data *providerData
}

type callerIdentityModel struct {
	AccountID    types.String `tfsdk:"account_id"`
	ARN          types.String `tfsdk:"arn"`
	UserID       types.String `tfsdk:"user_id"`
	PrincipalARN types.String `tfsdk:"principal_arn"`
}

func (d *callerIdentityDataSource) Metadata(_ context.Context, req datasource.MetadataRequest, resp *datasource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_caller_identity"
}

func (d *callerIdentityDataSource) Schema(_ context.Context, _ datasource.SchemaRequest, resp *datasource.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "The AWS identity the provider acts as, with an assumed-role session resolved to its IAM role.",
		Attributes: map[string]schema.Attribute{
			"account_id":    schema.StringAttribute{Computed: true, MarkdownDescription: "AWS account ID."},
			"arn":           schema.StringAttribute{Computed: true, MarkdownDescription: "Caller ARN as STS reports it (an assumed-role session ARN for roles)."},
			"user_id":       schema.StringAttribute{Computed: true, MarkdownDescription: "Unique ID of the caller."},
			"principal_arn": schema.StringAttribute{Computed: true, MarkdownDescription: "IAM principal ARN (the role, with its path, for an assumed role): what an EKS access entry takes."},
		},
	}
}

func (d *callerIdentityDataSource) Configure(_ context.Context, req datasource.ConfigureRequest, resp *datasource.ConfigureResponse) {
	d.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (d *callerIdentityDataSource) Read(ctx context.Context, _ datasource.ReadRequest, resp *datasource.ReadResponse) {
	id, err := awsinfra.FindCallerIdentity(ctx, d.data.AWS)
	if err != nil {
		resp.Diagnostics.AddError("Reading caller identity", err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, callerIdentityModel{
		AccountID:    types.StringValue(id.AccountID),
		ARN:          types.StringValue(id.ARN),
		UserID:       types.StringValue(id.UserID),
		PrincipalARN: types.StringValue(id.PrincipalARN),
	})...)
}
