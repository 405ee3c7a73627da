package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/llmd-dev/terraform-provider-llmd/internal/awsinfra"
)

var (
	_ resource.Resource                   = (*inferenceClusterResource)(nil)
	_ resource.ResourceWithConfigure      = (*inferenceClusterResource)(nil)
	_ resource.ResourceWithImportState    = (*inferenceClusterResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*inferenceClusterResource)(nil)
	_ resource.ResourceWithValidateConfig = (*inferenceClusterResource)(nil)
)

// Default timeouts: EKS control planes take 10-15 minutes, node groups and
// NAT gateways a few more.
const (
	defaultCreateTimeout = 60 * time.Minute
	defaultUpdateTimeout = 60 * time.Minute
	defaultDeleteTimeout = 45 * time.Minute
)

func newInferenceClusterResource() resource.Resource { return &inferenceClusterResource{} }

// inferenceClusterResource is llmd_inference_cluster; awsinfra does the AWS
// work, this file maps it to Terraform.
type inferenceClusterResource struct {
	data *providerData
}

func (r *inferenceClusterResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_inference_cluster"
}

func (r *inferenceClusterResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

// clients are the provider's clients logging through tflog; a copy, because
// the provider's are shared by every resource.
func (r *inferenceClusterResource) clients() *awsinfra.Clients {
	c := *r.data.AWS
	c.Log = func(ctx context.Context, msg string, fields map[string]any) { tflog.Info(ctx, msg, fields) }
	return &c
}

func (r *inferenceClusterResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan inferenceClusterModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	// No partial state on failure: the next apply's create adopts the parts
	// by their owner tags, where tainted state would make Terraform delete them.
	r.apply(ctx, plan, plan.Timeouts.Create, defaultCreateTimeout, "Creating", (*awsinfra.Clients).CreateCluster,
		"\n\nThe parts already created are kept and carry the tag "+awsinfra.OwnerTag+"="+plan.Name.ValueString()+"; apply again to resume.",
		resp.State.Set, &resp.Diagnostics)
}

// apply runs a create or an update of the planned cluster within the
// operation's timeout and records what AWS reports afterwards.
func (r *inferenceClusterResource) apply(ctx context.Context, plan inferenceClusterModel,
	timeoutOf func(context.Context, time.Duration) (time.Duration, diag.Diagnostics), defaultTimeout time.Duration, verb string,
	op func(*awsinfra.Clients, context.Context, awsinfra.ClusterSpec) (*awsinfra.Cluster, error), hint string,
	set func(context.Context, any) diag.Diagnostics, diags *diag.Diagnostics) {
	timeout, d := timeoutOf(ctx, defaultTimeout)
	diags.Append(d...)
	spec, d := plan.spec(ctx)
	diags.Append(d...)
	if diags.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c := r.clients()
	cl, err := op(c, ctx, spec)
	if err != nil {
		diags.AddError(verb+" inference cluster "+spec.Name, err.Error()+hint)
		return
	}
	r.setState(ctx, c, plan, cl, spec, set, diags)
}

// setState records the cluster as read back, keeping the plan's inputs that
// AWS does not report and the admin principal.
func (r *inferenceClusterResource) setState(ctx context.Context, c *awsinfra.Clients, plan inferenceClusterModel, cl *awsinfra.Cluster,
	spec awsinfra.ClusterSpec, set func(context.Context, any) diag.Diagnostics, diags *diag.Diagnostics) {
	if cl == nil {
		diags.AddError("Reading inference cluster "+spec.Name, "the cluster vanished right after it was applied")
		return
	}
	state := plan
	state.refresh(ctx, c, cl)
	if spec.BootstrapCreatorAdmin {
		state.AdminPrincipalARN = types.StringValue("")
	} else if state.AdminPrincipalARN.IsUnknown() || state.AdminPrincipalARN.IsNull() {
		id, err := awsinfra.FindCallerIdentity(ctx, c)
		if err != nil {
			diags.AddError("Reading caller identity", err.Error())
			return
		}
		state.AdminPrincipalARN = types.StringValue(id.PrincipalARN)
	}
	diags.Append(set(ctx, &state)...)
}

func (r *inferenceClusterResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state inferenceClusterModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	c := r.clients()
	name := state.Name.ValueString()
	gpu, system := nodeGroupNames(ctx, state)
	cl, err := c.FindClusterByName(ctx, name, gpu, system)
	if err != nil {
		resp.Diagnostics.AddError("Reading inference cluster "+name, err.Error())
		return
	}
	if cl == nil {
		tflog.Warn(ctx, "EKS cluster is gone; removing it from state", map[string]any{"name": name})
		resp.State.RemoveResource(ctx)
		return
	}
	importing := state.AdminAccess.IsNull()
	state.refresh(ctx, c, cl)
	if importing {
		// The admin entry is found by its tag, not by who imports: importing
		// as another identity (a CI role) must not plan a replacement.
		principal, err := c.FindAdminPrincipal(ctx, name)
		if err != nil {
			resp.Diagnostics.AddError("Reading inference cluster "+name, err.Error())
			return
		}
		if state.AdminAccess.IsNull() {
			state.AdminAccess = types.StringValue(map[bool]string{true: "access_entry", false: "bootstrap_creator"}[principal != ""])
		}
		state.AdminPrincipalARN = types.StringValue(principal)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// nodeGroupNames are the node group names recorded in state, or the defaults on import.
func nodeGroupNames(ctx context.Context, m inferenceClusterModel) (gpu, system string) {
	gpu, system = gpuDefaults.name, systemDefaults.name
	var ng nodeGroupModel
	if !m.GPUNodeGroup.IsNull() && !m.GPUNodeGroup.As(ctx, &ng, asObject).HasError() && ng.Name.ValueString() != "" {
		gpu = ng.Name.ValueString()
	}
	if !m.SystemNodeGroup.IsNull() && !m.SystemNodeGroup.As(ctx, &ng, asObject).HasError() && ng.Name.ValueString() != "" {
		system = ng.Name.ValueString()
	}
	return gpu, system
}

func (r *inferenceClusterResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	var plan, prior inferenceClusterModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	resp.Diagnostics.Append(req.State.Get(ctx, &prior)...)
	if resp.Diagnostics.HasError() {
		return
	}
	plan.AdminPrincipalARN = prior.AdminPrincipalARN
	r.apply(ctx, plan, plan.Timeouts.Update, defaultUpdateTimeout, "Updating", (*awsinfra.Clients).UpdateCluster, "", resp.State.Set, &resp.Diagnostics)
}

func (r *inferenceClusterResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state inferenceClusterModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	if resp.Diagnostics.HasError() {
		return
	}
	timeout, diags := state.Timeouts.Delete(ctx, defaultDeleteTimeout)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := r.clients().DeleteCluster(ctx, state.Name.ValueString()); err != nil {
		resp.Diagnostics.AddError("Deleting inference cluster "+state.Name.ValueString(), err.Error())
	}
}

// ImportState takes the cluster name; Read fills in the rest from AWS.
func (r *inferenceClusterResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
}
