package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/action"
	"github.com/hashicorp/terraform-plugin-framework/action/schema"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/types"
	appsv1 "k8s.io/api/apps/v1"
)

var (
	_ action.ActionWithConfigure      = (*modelFleetRestartAction)(nil)
	_ action.ActionWithValidateConfig = (*modelFleetRestartAction)(nil)
)

func newModelFleetRestartAction() action.Action { return &modelFleetRestartAction{} }

// modelFleetRestartAction is llmd_model_fleet_restart (Terraform 1.14+): a
// rollout restart of a fleet's vLLM pods, one pod at a time as the fleet's
// rollout settings allow (no spare GPU for a surge), waiting until every new
// pod is Ready. It changes no managed state: the fleet's own attributes and
// objects stay as applied, so the next plan is empty.
type modelFleetRestartAction struct {
	data *providerData
}

// modelFleetRestartModel is the action's configuration.
type modelFleetRestartModel struct {
	Cluster    types.Object `tfsdk:"cluster"`
	Kubernetes types.Object `tfsdk:"kubernetes"`
	Namespace  types.String `tfsdk:"namespace"`
	Name       types.String `tfsdk:"name"`
	Timeout    types.String `tfsdk:"timeout"`
}

// defaultRestartTimeout covers a rollout of 8 pods one at a time, each
// loading ~15 GB of weights (the fleet's startup probe allows 20 minutes
// per pod; a warm FSx read takes a few).
const defaultRestartTimeout = 60 * time.Minute

func (a *modelFleetRestartAction) Metadata(_ context.Context, req action.MetadataRequest, resp *action.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_model_fleet_restart"
}

func (a *modelFleetRestartAction) Schema(_ context.Context, _ action.SchemaRequest, resp *action.SchemaResponse) {
	resp.Schema = schema.Schema{
		MarkdownDescription: "Restarts a model fleet's vLLM pods (Terraform 1.14+), as `kubectl rollout restart` does: the pods are " +
			"replaced through the fleet's own rollout settings (`rollout.max_unavailable`, no surge by default) and the action waits until " +
			"every new pod is Ready, reporting progress. It changes no managed state, so the fleet's next plan is empty. Use it after " +
			"changing something the pods read only at start, or to clear engines' caches.",
		Attributes: map[string]schema.Attribute{
			"cluster": schema.ObjectAttribute{Optional: true, AttributeTypes: kubernetesTypes,
				MarkdownDescription: "The fleet's cluster, `llmd_inference_cluster.<name>.kubernetes`, as the fleet takes it."},
			"kubernetes": schema.ObjectAttribute{Optional: true, AttributeTypes: directTypes,
				MarkdownDescription: "A cluster made elsewhere, instead of `cluster`, as the fleet's `kubernetes` block takes it. Pass a token from a sensitive value (an ephemeral resource or a sensitive variable) so the plan does not show it."},
			"namespace": schema.StringAttribute{Optional: true,
				MarkdownDescription: "The fleet's namespace; default `llmd`, the fleet's default."},
			"name": schema.StringAttribute{Required: true,
				MarkdownDescription: "The fleet's name (`llmd_model_fleet.<name>.name`)."},
			"timeout": schema.StringAttribute{Optional: true,
				MarkdownDescription: "How long to wait for every new pod to be Ready, a Go duration; default `60m`."},
		},
	}
}

func (a *modelFleetRestartAction) Configure(_ context.Context, req action.ConfigureRequest, resp *action.ConfigureResponse) {
	a.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (a *modelFleetRestartAction) ValidateConfig(ctx context.Context, req action.ValidateConfigRequest, resp *action.ValidateConfigResponse) {
	var m modelFleetRestartModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	validateActionConnection(m.Cluster, m.Kubernetes, &resp.Diagnostics)
	if _, err := durationOr(m.Timeout, defaultRestartTimeout); err != nil {
		resp.Diagnostics.AddAttributeError(path.Root("timeout"), "Invalid timeout", err.Error())
	}
}

func (a *modelFleetRestartAction) Invoke(ctx context.Context, req action.InvokeRequest, resp *action.InvokeResponse) {
	var m modelFleetRestartModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	namespace := m.Namespace.ValueString()
	if namespace == "" {
		namespace = "llmd"
	}
	ref := namespace + "/" + m.Name.ValueString()
	fail := func(err error) { resp.Diagnostics.AddError("Restarting model fleet "+ref, err.Error()) }
	timeout, err := durationOr(m.Timeout, defaultRestartTimeout)
	if err != nil {
		fail(err)
		return
	}
	conn, err := decodeConnection(ctx, m.Cluster, m.Kubernetes)
	if err != nil {
		fail(err)
		return
	}
	c, dep, err := liveDeployment(ctx, conn, a.data, ref)
	if err == nil && dep == nil {
		err = fmt.Errorf("no Deployment %s in the cluster: check name and namespace", ref)
	}
	if err != nil {
		fail(err)
		return
	}
	if _, err := importedSettings(dep, settingsAnnotation, "llmd_model_fleet"); err != nil {
		fail(err)
		return
	}
	// The wait's progress lines become the action's progress messages.
	progress := func(_ context.Context, msg string, _ map[string]any) {
		resp.SendProgress(action.InvokeProgressEvent{Message: msg})
	}
	c.Log, c.Progress = progress, 10*time.Second
	if err := c.RestartDeployment(ctx, namespace, m.Name.ValueString(), time.Now()); err != nil {
		fail(err)
		return
	}
	progress(ctx, fmt.Sprintf("restarting %d pods of %s", replicasOf(dep), ref), nil)
	wait, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := c.WaitDeployment(wait, namespace, m.Name.ValueString()); err != nil {
		fail(fmt.Errorf("%s (the Deployment rolls on; see `kubectl -n %s rollout status deployment/%s`)", explain(err), namespace, m.Name.ValueString()))
	}
}

// replicasOf is a Deployment's desired replicas (1 when unset, as the API defaults it).
func replicasOf(dep *appsv1.Deployment) int32 {
	if dep.Spec.Replicas != nil {
		return *dep.Spec.Replicas
	}
	return 1
}
