package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
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
	r.apply(ctx, plan, nil, req.Config, plan.Timeouts.Create, defaultCreateTimeout, "Creating", (*awsinfra.Clients).CreateCluster,
		"\n\nThe parts already created are kept and carry the tag "+awsinfra.OwnerTag+"="+plan.Name.ValueString()+"; apply again to resume.",
		resp.State.Set, &resp.Diagnostics)
}

// apply runs a create or an update of the planned cluster within the
// operation's timeout, then the in-cluster add-ons once the node groups are
// active, and records what AWS and the cluster report afterwards. prior is
// nil for a create.
func (r *inferenceClusterResource) apply(ctx context.Context, plan inferenceClusterModel, prior *inferenceClusterModel, config tfsdk.Config,
	timeoutOf func(context.Context, time.Duration) (time.Duration, diag.Diagnostics), defaultTimeout time.Duration, verb string,
	op func(*awsinfra.Clients, context.Context, awsinfra.ClusterSpec) (*awsinfra.Cluster, error), hint string,
	set func(context.Context, any) diag.Diagnostics, diags *diag.Diagnostics) {
	timeout, d := timeoutOf(ctx, defaultTimeout)
	diags.Append(d...)
	spec, d := plan.spec(ctx)
	diags.Append(d...)
	password := writeOnlyString(ctx, config, "grafana_admin_password", diags)
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
	state, ok := r.readBack(ctx, c, plan, cl, spec, diags)
	if !ok {
		return
	}
	if err := r.applyInCluster(ctx, &state, prior, password); err != nil {
		if prior == nil {
			// No state: a created resource with an error is tainted, and a
			// tainted cluster would be replaced. The next apply's create
			// adopts the cluster by its tags and resumes here.
			diags.AddError(verb+" inference cluster "+spec.Name+": in-cluster add-ons", explain(err)+
				"\n\nThe AWS parts are created and kept (tagged "+awsinfra.OwnerTag+"="+spec.Name+"); apply again to resume with the add-ons: "+
				"the cluster is adopted, not created again. To go on without them, set addons.nvidia_device_plugin.enabled or addons.monitoring.enabled to false.")
			return
		}
		diags.AddError(verb+" inference cluster "+spec.Name+": in-cluster add-ons", explain(err)+
			"\n\nThe AWS parts are updated; the state records the add-ons as they stand, so the next plan shows what is left to repair.")
	}
	diags.Append(set(ctx, &state)...)
}

// readBack is the cluster as read back, keeping the plan's inputs that
// AWS does not report and the admin principal.
func (r *inferenceClusterResource) readBack(ctx context.Context, c *awsinfra.Clients, plan inferenceClusterModel, cl *awsinfra.Cluster,
	spec awsinfra.ClusterSpec, diags *diag.Diagnostics) (inferenceClusterModel, bool) {
	if cl == nil {
		diags.AddError("Reading inference cluster "+spec.Name, "the cluster vanished right after it was applied")
		return plan, false
	}
	state := plan
	state.refresh(ctx, c, cl)
	if spec.BootstrapCreatorAdmin {
		state.AdminPrincipalARN = types.StringValue("")
	} else if state.AdminPrincipalARN.IsUnknown() || state.AdminPrincipalARN.IsNull() {
		id, err := awsinfra.FindCallerIdentity(ctx, c)
		if err != nil {
			diags.AddError("Reading caller identity", err.Error())
			return state, false
		}
		state.AdminPrincipalARN = types.StringValue(id.PrincipalARN)
	}
	return state, true
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
	r.readInCluster(ctx, &state, importing, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
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
	r.apply(ctx, plan, &prior, req.Config, plan.Timeouts.Update, defaultUpdateTimeout, "Updating", (*awsinfra.Clients).UpdateCluster, "", resp.State.Set, &resp.Diagnostics)
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
	// In-cluster add-ons first: the release's volumes and the DaemonSet go
	// while the nodes and the API are still there.
	if !r.deleteInCluster(ctx, state, &resp.Diagnostics) {
		return
	}
	if err := r.clients().DeleteCluster(ctx, state.Name.ValueString()); err != nil {
		resp.Diagnostics.AddError("Deleting inference cluster "+state.Name.ValueString(), err.Error())
	}
}

// ImportState takes the cluster name; Read fills in the rest from AWS.
func (r *inferenceClusterResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
}
