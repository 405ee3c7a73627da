// Package provider maps Terraform schemas to the internal packages: the
// provider configuration, and one file per resource or data source.
package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/action"
	"github.com/hashicorp/terraform-plugin-framework/datasource"
	"github.com/hashicorp/terraform-plugin-framework/ephemeral"
	"github.com/hashicorp/terraform-plugin-framework/list"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/provider"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/llmd-dev/terraform-provider-llmd/internal/awsinfra"
)

var (
	_ provider.Provider                       = (*llmdProvider)(nil)
	_ provider.ProviderWithListResources      = (*llmdProvider)(nil)
	_ provider.ProviderWithActions            = (*llmdProvider)(nil)
	_ provider.ProviderWithEphemeralResources = (*llmdProvider)(nil)
)

// New returns a constructor of the provider at the given version; the version
// names the router image the provider pins and is sent in the user agent.
func New(version string) func() provider.Provider {
	return func() provider.Provider { return &llmdProvider{version: version} }
}

type llmdProvider struct {
	version string
}

// providerModel is the provider block. It deliberately holds no Kubernetes
// settings: resources build their Kubernetes clients from the cluster they are
// given, so one apply can create the cluster and deploy onto it.
type providerModel struct {
	Region                 types.String      `tfsdk:"region"`
	Profile                types.String      `tfsdk:"profile"`
	SharedConfigFiles      types.List        `tfsdk:"shared_config_files"`
	SharedCredentialsFiles types.List        `tfsdk:"shared_credentials_files"`
	MaxRetries             types.Int64       `tfsdk:"max_retries"`
	RetryMode              types.String      `tfsdk:"retry_mode"`
	AssumeRole             *assumeRoleModel  `tfsdk:"assume_role"`
	WebIdentity            *webIdentityModel `tfsdk:"assume_role_with_web_identity"`
	Endpoints              *endpointsModel   `tfsdk:"endpoints"`
	DefaultTags            *defaultTagsModel `tfsdk:"default_tags"`
}

type assumeRoleModel struct {
	RoleARN     types.String `tfsdk:"role_arn"`
	SessionName types.String `tfsdk:"session_name"`
	ExternalID  types.String `tfsdk:"external_id"`
	Duration    types.String `tfsdk:"duration"`
}

type webIdentityModel struct {
	RoleARN              types.String `tfsdk:"role_arn"`
	SessionName          types.String `tfsdk:"session_name"`
	WebIdentityToken     types.String `tfsdk:"web_identity_token"`
	WebIdentityTokenFile types.String `tfsdk:"web_identity_token_file"`
	Duration             types.String `tfsdk:"duration"`
}

type endpointsModel struct {
	EC2           types.String `tfsdk:"ec2"`
	EKS           types.String `tfsdk:"eks"`
	Events        types.String `tfsdk:"events"`
	FSx           types.String `tfsdk:"fsx"`
	IAM           types.String `tfsdk:"iam"`
	S3            types.String `tfsdk:"s3"`
	ServiceQuotas types.String `tfsdk:"servicequotas"`
	SQS           types.String `tfsdk:"sqs"`
	STS           types.String `tfsdk:"sts"`
}

type defaultTagsModel struct {
	Tags types.Map `tfsdk:"tags"`
}

// providerData is what Configure hands to every resource and data source.
type providerData struct {
	AWS     *awsinfra.Clients
	Version string
}

func (p *llmdProvider) Metadata(_ context.Context, _ provider.MetadataRequest, resp *provider.MetadataResponse) {
	resp.TypeName = "llmd"
	resp.Version = p.version
}

func (p *llmdProvider) Schema(_ context.Context, _ provider.SchemaRequest, resp *provider.SchemaResponse) {
	endpoint := func(service string) schema.StringAttribute {
		return schema.StringAttribute{
			Optional:            true,
			MarkdownDescription: fmt.Sprintf("Base URL that replaces the %s endpoint, e.g. for a VPC endpoint or a local emulator.", service),
		}
	}
	s3Endpoint := endpoint("S3")
	s3Endpoint.MarkdownDescription += " S3 serves `model_bucket`; its buckets are addressed path-style at an endpoint given by IP address, virtual-hosted otherwise, " +
		"as the AWS SDK's endpoint rules do."
	resp.Schema = schema.Schema{
		MarkdownDescription: "Runs LLM inference with prefix-cache-aware routing on AWS EKS: " +
			"`llmd_inference_cluster`, `llmd_model_fleet` and `llmd_prefix_router` come up in one `terraform apply`. " +
			"The provider block holds AWS settings only; Kubernetes access is derived per resource from the cluster it targets.",
		Attributes: map[string]schema.Attribute{
			"region": schema.StringAttribute{
				Optional:            true,
				MarkdownDescription: "AWS region, e.g. `us-west-2`. Defaults to `AWS_REGION` or the shared config.",
			},
			"profile": schema.StringAttribute{
				Optional:            true,
				MarkdownDescription: "Shared-config profile to take credentials and settings from. Defaults to `AWS_PROFILE` or the default chain.",
			},
			"shared_config_files": schema.ListAttribute{
				ElementType: types.StringType,
				Optional:    true,
				MarkdownDescription: "Shared config files to read instead of `~/.aws/config` (or `AWS_CONFIG_FILE`). " +
					"HCP Terraform's dynamic credentials arrive this way: `[var.tfc_aws_dynamic_credentials.default.shared_config_file]`.",
			},
			"shared_credentials_files": schema.ListAttribute{
				ElementType:         types.StringType,
				Optional:            true,
				MarkdownDescription: "Shared credentials files to read instead of `~/.aws/credentials` (or `AWS_SHARED_CREDENTIALS_FILE`).",
			},
			"max_retries": schema.Int64Attribute{
				Optional:            true,
				MarkdownDescription: "Maximum attempts per AWS API call, including the first. Defaults to the SDK's (3).",
			},
			"retry_mode": schema.StringAttribute{
				Optional:            true,
				MarkdownDescription: "AWS SDK retry mode: `standard` (default) or `adaptive` (client-side rate limiting).",
				Validators:          []validator.String{stringvalidator.OneOf("standard", "adaptive")},
			},
		},
		Blocks: map[string]schema.Block{
			"assume_role": schema.SingleNestedBlock{
				MarkdownDescription: "Assume this IAM role through STS for every call.",
				Attributes: map[string]schema.Attribute{
					"role_arn": schema.StringAttribute{
						Optional:            true,
						MarkdownDescription: "ARN of the role to assume. Required when the block is present.",
					},
					"session_name": schema.StringAttribute{
						Optional:            true,
						MarkdownDescription: "Session name; shows in CloudTrail and in the assumed-role ARN.",
					},
					"external_id": schema.StringAttribute{
						Optional:            true,
						MarkdownDescription: "External ID the role's trust policy requires, if any.",
					},
					"duration": schema.StringAttribute{
						Optional:            true,
						MarkdownDescription: "Session duration as a Go duration (`1h`, `30m`); 15m to 12h. Defaults to 15m.",
					},
				},
			},
			"assume_role_with_web_identity": schema.SingleNestedBlock{
				MarkdownDescription: "Take credentials from an OIDC token through STS `AssumeRoleWithWebIdentity` (a CI system's workload identity); " +
					"`assume_role`, when also set, then assumes its role from these credentials. The token is sensitive and never logged; " +
					"provider settings are never stored in state.",
				Attributes: map[string]schema.Attribute{
					"role_arn": schema.StringAttribute{
						Optional:            true,
						MarkdownDescription: "ARN of the role to assume; its trust policy names the token's OIDC provider. Required when the block is present.",
					},
					"session_name": schema.StringAttribute{
						Optional:            true,
						MarkdownDescription: "Session name; shows in CloudTrail and in the assumed-role ARN. Defaults to one the SDK makes from the time.",
					},
					"web_identity_token": schema.StringAttribute{
						Optional:            true,
						Sensitive:           true,
						MarkdownDescription: "The OIDC token itself. Exactly one of this and `web_identity_token_file`.",
					},
					"web_identity_token_file": schema.StringAttribute{
						Optional:            true,
						MarkdownDescription: "File holding the OIDC token, read again at every refresh (issuers rotate it). Exactly one of this and `web_identity_token`.",
					},
					"duration": schema.StringAttribute{
						Optional:            true,
						MarkdownDescription: "Session duration as a Go duration (`1h`, `30m`); 15m to 12h, within the role's maximum. Defaults to STS's (1h).",
					},
				},
			},
			"endpoints": schema.SingleNestedBlock{
				MarkdownDescription: "Per-service endpoint overrides.",
				Attributes: map[string]schema.Attribute{
					"ec2":           endpoint("EC2"),
					"eks":           endpoint("EKS"),
					"events":        endpoint("EventBridge (Karpenter's interruption rules)"),
					"fsx":           endpoint("FSx"),
					"iam":           endpoint("IAM"),
					"s3":            s3Endpoint,
					"servicequotas": endpoint("Service Quotas"),
					"sqs":           endpoint("SQS (Karpenter's interruption queue)"),
					"sts":           endpoint("STS"),
				},
			},
			"default_tags": schema.SingleNestedBlock{
				MarkdownDescription: "Tags applied to every AWS object the provider creates, beneath each resource's own tags.",
				Attributes: map[string]schema.Attribute{
					"tags": schema.MapAttribute{
						ElementType:         types.StringType,
						Optional:            true,
						MarkdownDescription: "Key-value tags.",
					},
				},
			},
		},
	}
}

func (p *llmdProvider) Configure(ctx context.Context, req provider.ConfigureRequest, resp *provider.ConfigureResponse) {
	var cfg providerModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &cfg)...)
	if resp.Diagnostics.HasError() {
		return
	}
	settings, err := cfg.settings(ctx, p.version)
	if err != nil {
		resp.Diagnostics.AddError("Invalid provider configuration", err.Error())
		return
	}
	awsCfg, err := awsinfra.LoadConfig(ctx, settings)
	if err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("region"), "Configuring AWS", err.Error())
		return
	}
	tflog.Debug(ctx, "configured AWS", map[string]any{"region": awsCfg.Region, "endpoint_overrides": len(settings.Endpoints)})
	data := &providerData{AWS: awsinfra.NewClients(awsCfg, settings), Version: p.version}
	resp.ResourceData = data
	resp.DataSourceData = data
	resp.ListResourceData = data
	resp.ActionData = data
	resp.EphemeralResourceData = data
}

// settings converts the provider block to awsinfra.Settings. Unknown values
// (from resources not yet created) cannot configure a provider and are refused.
func (m providerModel) settings(ctx context.Context, version string) (awsinfra.Settings, error) {
	s := awsinfra.Settings{
		Region:     m.Region.ValueString(),
		Profile:    m.Profile.ValueString(),
		MaxRetries: int(m.MaxRetries.ValueInt64()),
		RetryMode:  m.RetryMode.ValueString(),
		UserAgent:  "terraform-provider-llmd/" + version,
		Endpoints:  map[string]string{},
	}
	for name, files := range map[string]struct {
		list types.List
		dst  *[]string
	}{"shared_config_files": {m.SharedConfigFiles, &s.SharedConfigFiles}, "shared_credentials_files": {m.SharedCredentialsFiles, &s.SharedCredentialsFiles}} {
		if files.list.IsNull() {
			continue
		}
		if diags := files.list.ElementsAs(ctx, files.dst, false); diags.HasError() {
			return s, fmt.Errorf("%s: every path must be a known string", name)
		}
	}
	if ar := m.AssumeRole; ar != nil {
		s.AssumeRole = &awsinfra.AssumeRole{
			RoleARN:     ar.RoleARN.ValueString(),
			SessionName: ar.SessionName.ValueString(),
			ExternalID:  ar.ExternalID.ValueString(),
		}
		var err error
		if s.AssumeRole.Duration, err = sessionDuration("assume_role.duration", ar.Duration); err != nil {
			return s, err
		}
	}
	if w := m.WebIdentity; w != nil {
		s.WebIdentity = &awsinfra.WebIdentity{
			RoleARN:     w.RoleARN.ValueString(),
			SessionName: w.SessionName.ValueString(),
			Token:       w.WebIdentityToken.ValueString(),
			TokenFile:   w.WebIdentityTokenFile.ValueString(),
		}
		var err error
		if s.WebIdentity.Duration, err = sessionDuration("assume_role_with_web_identity.duration", w.Duration); err != nil {
			return s, err
		}
	}
	if e := m.Endpoints; e != nil {
		for name, v := range map[string]types.String{"ec2": e.EC2, "eks": e.EKS, "fsx": e.FSx, "iam": e.IAM, "s3": e.S3, "servicequotas": e.ServiceQuotas, "sts": e.STS,
			"events": e.Events, "sqs": e.SQS} {
			if v.ValueString() != "" {
				s.Endpoints[name] = v.ValueString()
			}
		}
	}
	if m.DefaultTags != nil && !m.DefaultTags.Tags.IsNull() {
		tags := map[string]string{}
		if diags := m.DefaultTags.Tags.ElementsAs(ctx, &tags, false); diags.HasError() {
			return s, fmt.Errorf("default_tags.tags: every value must be a known string")
		}
		s.DefaultTags = tags
	}
	return s, s.Validate()
}

// sessionDuration parses an STS session duration; zero when unset.
func sessionDuration(field string, v types.String) (time.Duration, error) {
	d := v.ValueString()
	if d == "" {
		return 0, nil
	}
	dur, err := time.ParseDuration(d)
	if err != nil || dur < 15*time.Minute || dur > 12*time.Hour {
		return 0, fmt.Errorf("%s: %q must be a Go duration between 15m and 12h, e.g. \"1h\"", field, d)
	}
	return dur, nil
}

func (p *llmdProvider) Resources(context.Context) []func() resource.Resource {
	return []func() resource.Resource{newInferenceClusterResource, newModelFleetResource, newPrefixRouterResource}
}

// Actions are invoked by `terraform apply -invoke` or an action_trigger
// (Terraform 1.14+) and change no managed state.
func (p *llmdProvider) Actions(context.Context) []func() action.Action {
	return []func() action.Action{newModelFleetRestartAction, newABBenchmarkAction}
}

// EphemeralResources are opened for a run and never stored (Terraform 1.10+).
func (p *llmdProvider) EphemeralResources(context.Context) []func() ephemeral.EphemeralResource {
	return []func() ephemeral.EphemeralResource{newClusterCredentials}
}

// ListResources serve `terraform query` (Terraform 1.14+): each lists what
// its resource made.
func (p *llmdProvider) ListResources(context.Context) []func() list.ListResource {
	return []func() list.ListResource{newInferenceClusterList, newModelFleetList, newPrefixRouterList}
}

func (p *llmdProvider) DataSources(context.Context) []func() datasource.DataSource {
	return []func() datasource.DataSource{newCallerIdentityDataSource}
}
