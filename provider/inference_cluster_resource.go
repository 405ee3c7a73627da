package provider

import (
	"context"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-go/tftypes"
	"github.com/hashicorp/terraform-plugin-log/tflog"

	"github.com/llmd-dev/terraform-provider-llmd/internal/awsinfra"
)

var (
	_ resource.Resource                   = (*inferenceClusterResource)(nil)
	_ resource.ResourceWithConfigure      = (*inferenceClusterResource)(nil)
	_ resource.ResourceWithIdentity       = (*inferenceClusterResource)(nil)
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

func (r *inferenceClusterResource) IdentitySchema(ctx context.Context, req resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	clusterIdentitySchema(ctx, req, resp)
}

// identity is the cluster's identity: its name in the provider's region.
func (r *inferenceClusterResource) identity(name types.String) clusterIdentityModel {
	return clusterIdentityModel{Region: types.StringValue(r.data.AWS.Config.Region), Name: name}
}

func (r *inferenceClusterResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

// clientsOrNil are clients(), or nil where the provider is not configured
// (a plan may run without it).
func (r *inferenceClusterResource) clientsOrNil() *awsinfra.Clients {
	if r.data == nil {
		return nil
	}
	return r.clients()
}

// clients are the provider's clients logging through tflog; a copy, because
// the provider's are shared by every resource.
func (r *inferenceClusterResource) clients() *awsinfra.Clients {
	c := *r.data.AWS
	c.Log = func(ctx context.Context, msg string, fields map[string]any) { tflog.Info(ctx, msg, fields) }
	return &c
}

// incompleteKey marks, in the resource's private state, a cluster whose
// create failed part way.
//
// A failed create saves state, so Terraform knows what it paid for: the
// attempt's parts (NAT gateway, FSx, GPU nodes) are found by their owner
// tags, so `terraform destroy` removes every one of them, even when the EKS
// control plane itself was never made (import could not find it then).
// Terraform taints a resource whose create failed and replaces it on the
// next apply: that converges, by deleting the attempt and creating anew.
// `terraform untaint` keeps the attempt instead: the next apply then resumes
// the create (every step adopts what exists by its tags), which is why the
// key, not the taint, tells Update to create. Saving no state (the old way)
// resumed by itself but left destroy blind to the parts and the bill
// running. An incomplete cluster's file system holds no weights yet, so
// deletion_protection does not hold it back.
const incompleteKey = "incomplete"

// privateState is the resource's private state in every CRUD response.
type privateState interface {
	GetKey(ctx context.Context, key string) ([]byte, diag.Diagnostics)
	SetKey(ctx context.Context, key string, value []byte) diag.Diagnostics
}

// incomplete reports whether the private state marks a failed create.
func incomplete(ctx context.Context, p interface {
	GetKey(context.Context, string) ([]byte, diag.Diagnostics)
}) bool {
	v, _ := p.GetKey(ctx, incompleteKey)
	return string(v) == "true"
}

// resumeHint tells a user whose create failed what destroy and apply do now.
func resumeHint(name string) string {
	return "\n\nThe parts created so far carry the tag " + awsinfra.OwnerTag + "=" + name + " and are recorded in the state: `terraform destroy` removes them. " +
		"Terraform marks the cluster tainted, so the next `terraform apply` deletes them and creates the cluster anew; to keep them and resume instead, run " +
		"`terraform untaint` on this resource and apply again to resume."
}

func (r *inferenceClusterResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	var plan inferenceClusterModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	// Before the create's long waits: a failed create records state too.
	resp.Diagnostics.Append(resp.Identity.Set(ctx, r.identity(plan.Name))...)
	r.apply(ctx, plan, nil, req.Config, plan.Timeouts.Create, defaultCreateTimeout, "Creating", (*awsinfra.Clients).CreateCluster,
		&resp.State, resp.Private, &resp.Diagnostics)
}

// apply runs a create or an update of the planned cluster within the
// operation's timeout, then the in-cluster add-ons once the node groups are
// active, and records what AWS and the cluster report afterwards. prior is
// nil for a create (and for resuming one); a create that fails records the
// plan (unknowns null) as an incomplete cluster.
func (r *inferenceClusterResource) apply(ctx context.Context, plan inferenceClusterModel, prior *inferenceClusterModel, config tfsdk.Config,
	timeoutOf func(context.Context, time.Duration) (time.Duration, diag.Diagnostics), defaultTimeout time.Duration, verb string,
	op func(*awsinfra.Clients, context.Context, awsinfra.ClusterSpec) (*awsinfra.Cluster, error),
	st *tfsdk.State, private privateState, diags *diag.Diagnostics) {
	timeout, d := timeoutOf(ctx, defaultTimeout)
	diags.Append(d...)
	spec, d := plan.spec(ctx)
	diags.Append(d...)
	if prior != nil {
		// A plan dropping model_bucket deletes the created bucket as the state's force_destroy says.
		spec.ForceDestroyBucket = forceDestroyBucket(ctx, plan.ModelBucket, prior.ModelBucket)
	}
	password := writeOnlyString(ctx, config, "grafana_admin_password", diags)
	if diags.HasError() {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if prior != nil && prior.nodePoolOn() && computeMode(prior.Compute) != computeMode(plan.Compute) {
		// Before AWS: Karpenter needs its role and queue, Auto Mode its
		// compute, to terminate their nodes.
		if !r.removeNodePoolFirst(ctx, *prior, diags) {
			return
		}
	}
	c := r.clients()
	cl, err := op(c, ctx, spec)
	if err != nil {
		if prior != nil {
			diags.AddError(verb+" inference cluster "+spec.Name, err.Error())
			return
		}
		diags.AddError(verb+" inference cluster "+spec.Name, err.Error()+resumeHint(spec.Name))
		plan.ID = plan.Name
		recordIncomplete(ctx, plan, st, private, diags)
		return
	}
	state, ok := r.readBack(ctx, c, plan, cl, spec, diags)
	if !ok {
		return
	}
	if err := r.applyInCluster(ctx, &state, prior, password, cl); err != nil {
		if prior == nil {
			diags.AddError(verb+" inference cluster "+spec.Name+": in-cluster add-ons", explain(err)+
				"\n\nThe AWS parts are created. To go on without the add-ons, set addons.nvidia_device_plugin.enabled or addons.monitoring.enabled to false."+
				resumeHint(spec.Name))
			recordIncomplete(ctx, state, st, private, diags)
			return
		}
		diags.AddError(verb+" inference cluster "+spec.Name+": in-cluster add-ons", explain(err)+
			"\n\nThe AWS parts are updated; the state records the add-ons as they stand, so the next plan shows what is left to repair.")
	}
	diags.Append(private.SetKey(ctx, incompleteKey, nil)...)
	diags.Append(st.Set(ctx, &state)...)
}

// recordIncomplete saves m, with what is still unknown null, as a cluster
// whose create failed (see incompleteKey).
func recordIncomplete(ctx context.Context, m inferenceClusterModel, st *tfsdk.State, private privateState, diags *diag.Diagnostics) {
	diags.Append(st.Set(ctx, &m)...)
	raw, err := tftypes.Transform(st.Raw, func(_ *tftypes.AttributePath, v tftypes.Value) (tftypes.Value, error) {
		if !v.IsKnown() {
			return tftypes.NewValue(v.Type(), nil), nil
		}
		return v, nil
	})
	if err != nil {
		diags.AddError("Recording the incomplete cluster", err.Error())
		return
	}
	st.Raw = raw
	diags.Append(private.SetKey(ctx, incompleteKey, []byte("true"))...)
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
	resp.Diagnostics.Append(resp.Identity.Set(ctx, r.identity(state.Name))...)
	c := r.clients()
	name := state.Name.ValueString()
	gpu, system := nodeGroupNames(ctx, state)
	cl, err := c.FindClusterByName(ctx, name, gpu, system)
	if err == nil && cl != nil && !state.ModelBucket.IsNull() {
		cl.ModelBucket, err = readModelBucket(ctx, c, name, state.ModelBucket, cl.Network.VPCID)
	}
	if err != nil {
		resp.Diagnostics.AddError("Reading inference cluster "+name, err.Error())
		return
	}
	unfinished := incomplete(ctx, req.Private)
	if cl == nil && unfinished {
		// A create that failed before the control plane: the state stays
		// while any part it made is left, so destroy removes them.
		parts, err := c.FindOwnedParts(ctx, name)
		if err != nil {
			resp.Diagnostics.AddError("Reading inference cluster "+name, err.Error())
			return
		}
		if len(parts) > 0 {
			return
		}
	}
	if cl == nil {
		tflog.Warn(ctx, "EKS cluster is gone; removing it from state", map[string]any{"name": name})
		resp.State.RemoveResource(ctx)
		return
	}
	if unfinished {
		// What the failed create planned stays in state, refreshed with
		// what AWS has; the in-cluster parts may never have been made.
		state.refresh(ctx, c, cl)
		resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
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
	r.readInCluster(ctx, &state, importing, cl, &resp.Diagnostics)
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
	resp.Diagnostics.Append(resp.Identity.Set(ctx, r.identity(plan.Name))...)
	if incomplete(ctx, req.Private) {
		// Untainted after a failed create: resume it, adopting what exists.
		r.apply(ctx, plan, nil, req.Config, plan.Timeouts.Update, defaultCreateTimeout, "Creating", (*awsinfra.Clients).CreateCluster,
			&resp.State, resp.Private, &resp.Diagnostics)
		return
	}
	r.apply(ctx, plan, &prior, req.Config, plan.Timeouts.Update, defaultUpdateTimeout, "Updating", (*awsinfra.Clients).UpdateCluster,
		&resp.State, resp.Private, &resp.Diagnostics)
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
	c := r.clients()
	name := state.Name.ValueString()
	opts := awsinfra.DeleteOptions{ForceDestroyBucket: forceDestroyBucket(ctx, state.ModelBucket, types.ObjectNull(modelBucketTypes))}
	// Before anything goes: a created bucket holding objects without
	// force_destroy leaves the whole cluster, and its state, as it is.
	if err := c.CheckModelBucketDeletable(ctx, name, opts.ForceDestroyBucket); err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("model_bucket").AtName("force_destroy"), "Deleting inference cluster "+name, err.Error())
		return
	}
	// In-cluster add-ons first: the release's volumes and the DaemonSet go
	// while the nodes and the API are still there.
	if !r.deleteInCluster(ctx, state, &resp.Diagnostics) {
		return
	}
	if err := c.DeleteClusterWith(ctx, name, opts); err != nil {
		resp.Diagnostics.AddError("Deleting inference cluster "+name, err.Error())
	}
}

// ImportState takes the cluster name, as the import id or the identity's
// name; Read fills in the rest from AWS.
func (r *inferenceClusterResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	target, diags := clusterImportTarget(ctx, r.data, req)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), target.cluster)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), target.cluster)...)
	resp.Diagnostics.Append(resp.Identity.Set(ctx, r.identity(types.StringValue(target.cluster)))...)
}
