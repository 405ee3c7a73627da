package provider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
)

var (
	_ resource.Resource                   = (*modelFleetResource)(nil)
	_ resource.ResourceWithConfigure      = (*modelFleetResource)(nil)
	_ resource.ResourceWithIdentity       = (*modelFleetResource)(nil)
	_ resource.ResourceWithImportState    = (*modelFleetResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*modelFleetResource)(nil)
	_ resource.ResourceWithValidateConfig = (*modelFleetResource)(nil)
)

// A cold start loads ~15 GB of weights per pod from FSx; eight pods roll one
// at a time on updates.
const (
	defaultFleetCreateTimeout = 60 * time.Minute
	defaultFleetUpdateTimeout = 90 * time.Minute
	defaultFleetDeleteTimeout = 20 * time.Minute
)

func newModelFleetResource() resource.Resource { return &modelFleetResource{} }

// modelFleetResource is llmd_model_fleet: internal/workloads builds the
// objects, internal/kube applies and watches them, this file maps Terraform.
type modelFleetResource struct {
	data *providerData
}

func (r *modelFleetResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_model_fleet"
}

func (r *modelFleetResource) IdentitySchema(ctx context.Context, req resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	inClusterIdentitySchema(ctx, req, resp)
}

func (r *modelFleetResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (r *modelFleetResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m modelFleetModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if p, msg := validateConnectionConfig(m.Cluster, m.Kubernetes); msg != "" {
		resp.Diagnostics.AddAttributeError(p, "Where the fleet runs", msg)
	}
	if !m.Autoscaling.IsNull() && !m.Replicas.IsNull() {
		resp.Diagnostics.AddAttributeError(path.Root("replicas"), "Fixed and autoscaled at once",
			"replicas sets a fixed size, autoscaling sizes the fleet on the router's counts: remove replicas and bound the fleet with autoscaling.min_replicas and max_replicas.")
	}
	if a := m.Autoscaling.Attributes(); len(a) > 0 {
		lo, hi := a["min_replicas"].(types.Int64), a["max_replicas"].(types.Int64)
		if !lo.IsUnknown() && !hi.IsUnknown() && !lo.IsNull() && !hi.IsNull() && hi.ValueInt64() < lo.ValueInt64() {
			resp.Diagnostics.AddAttributeError(path.Root("autoscaling").AtName("max_replicas"), "Autoscaling bounds",
				fmt.Sprintf("max_replicas (%d) is below min_replicas (%d).", hi.ValueInt64(), lo.ValueInt64()))
		}
	}
}

// desired is the fleet a model describes: its spec and objects (without the
// PodMonitor, which depends on the cluster) and their hash.
type desired struct {
	settings fleetSettings
	conn     connection
	fleet    workloads.Fleet
	objects  []kube.Object
	hash     string
}

// prior is the state the fleet had (nil on create): a fleet that applied its
// volume under the names of providers before the file system id was in them
// keeps them while its file system stays the same.
func (m modelFleetModel) desired(ctx context.Context, prior *modelFleetModel) (desired, error) {
	var d desired
	s, diags := m.settings(ctx)
	if diags.HasError() {
		return d, fmt.Errorf("%v", diags)
	}
	conn, err := decodeConnection(ctx, m.Cluster, m.Kubernetes)
	if err != nil {
		return d, err
	}
	f, err := s.fleet(ctx, conn)
	if err != nil {
		return d, err
	}
	f.Storage.UnversionedNames = keepsUnversionedVolume(ctx, prior, f.Storage.FileSystemID)
	f.Annotations = map[string]string{settingsAnnotation: s.annotation()}
	objs, err := f.Objects(false)
	if err != nil {
		return d, err
	}
	hash, err := workloads.Hash(objs)
	if err != nil {
		return d, err
	}
	return desired{settings: s, conn: conn, fleet: f, objects: objs, hash: hash}, nil
}

// withMonitoring adds the PodMonitor and the alerting rules when the
// cluster serves their CRDs (asked at apply and refresh, never at plan).
func (d desired) withMonitoring(c *kube.Client) ([]kube.Object, error) {
	served, err := c.Serves(workloads.PodMonitorKind.GroupVersionKind())
	if err != nil || !served {
		return d.objects, err
	}
	objs, err := d.fleet.Objects(true)
	if err != nil {
		return nil, err
	}
	return withAlertRule(c, objs, d.fleet.AlertRule)
}

// withAlertRule appends a PrometheusRule when the cluster serves its CRD.
func withAlertRule(c *kube.Client, objs []kube.Object, rule func() (kube.Object, error)) ([]kube.Object, error) {
	served, err := c.Serves(workloads.PrometheusRuleKind.GroupVersionKind())
	if err != nil || !served {
		return objs, err
	}
	o, err := rule()
	if err != nil {
		return nil, err
	}
	return append(objs, o), nil
}

func (r *modelFleetResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var plan modelFleetModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	// A fleet whose cluster is still unknown plans with unknown values and
	// calls no API; it never defers, even where the client allows it:
	// OpenTofu (1.11) allows deferral to every provider and fails the run
	// on one ("Resource configuration is incomplete": use -exclude), which
	// would break the one apply there, and Stacks need only a clean plan.
	if resp.Diagnostics.HasError() || !plan.known() {
		return
	}
	s, diags := plan.settings(ctx)
	resp.Diagnostics.Append(diags...)
	if diags.HasError() {
		return
	}
	// router_target depends on the settings alone, so the router's plan
	// sees it even while the cluster is still to be created; with weights
	// in S3 it also names the cluster's role, known once the cluster is.
	if !plan.Cluster.IsNull() && !plan.Cluster.IsUnknown() {
		var facts kubernetesModel
		if d := plan.Cluster.As(ctx, &facts, asObject); !d.HasError() {
			if at, msg := gpuRoomError(&facts, s); msg != "" {
				resp.Diagnostics.AddAttributeError(at, "Not enough GPU nodes for the fleet", msg)
				return
			}
		}
	}
	cluster := types.ObjectNull(nil)
	if s.Storage.Bucket != "" {
		if !fullyKnown(plan.Cluster) {
			plan.RouterTarget = types.ObjectUnknown(routerTargetTypes)
			resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
			return
		}
		cluster = plan.Cluster
	}
	conn, _ := decodeConnection(ctx, cluster, plan.Kubernetes)
	f, err := s.fleet(ctx, conn)
	if err != nil {
		resp.Diagnostics.AddError("Invalid model fleet", err.Error())
		return
	}
	var prior *modelFleetModel
	if !req.State.Raw.IsNull() {
		prior = &modelFleetModel{}
		resp.Diagnostics.Append(req.State.Get(ctx, prior)...)
	}
	f.Storage.UnversionedNames = keepsUnversionedVolume(ctx, prior, f.Storage.FileSystemID)
	plan.RouterTarget = routerTargetObject(desired{conn: conn, fleet: f}.target())
	plan.BaselineEndpoint = types.StringValue(baselineEndpoint(f))
	plan.ID = types.StringValue(s.Namespace + "/" + s.Name)
	if fullyKnown(plan.Cluster) && fullyKnown(plan.Kubernetes) {
		d, err := plan.desired(ctx, prior)
		if err != nil {
			resp.Diagnostics.AddError("Invalid model fleet", err.Error())
			return
		}
		plan.RenderedHash = types.StringValue(d.hash)
		if prior != nil {
			if prior.RenderedHash.ValueString() == d.hash {
				plan.Inventory = prior.Inventory
			} else {
				// A repair of drift is an apply like any other: what it leaves is known after.
				plan.Inventory = types.ListUnknown(types.StringType)
				plan.ReadyReplicas = types.Int64Unknown()
			}
		}
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

func (r *modelFleetResource) kind() anchoredKind[modelFleetModel] {
	return anchoredKind[modelFleetModel]{what: "model fleet", label: "llmd.dev/fleet",
		annotation: settingsAnnotation, typeName: "llmd_model_fleet", refresh: r.refresh, afterDelete: r.deleteWeightsAccess,
		createTimeout: defaultFleetCreateTimeout, updateTimeout: defaultFleetUpdateTimeout, deleteTimeout: defaultFleetDeleteTimeout,
		apply: func(ctx context.Context, plan modelFleetModel, prior *modelFleetModel, previous []kube.Ref, config tfsdk.Config, diags *diag.Diagnostics) (*modelFleetModel, error) {
			return r.apply(ctx, plan, prior, previous, writeOnlyString(ctx, config, "hf_token", diags))
		}}
}

func (r *modelFleetResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	createAnchored(ctx, r.kind(), req, resp)
}

func (r *modelFleetResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	updateAnchored(ctx, r.kind(), req, resp)
}

func (r *modelFleetResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	deleteAnchored(ctx, r.data, r.kind(), req, resp)
}

// apply applies the planned fleet, prunes what the previous inventory holds
// beyond it and waits for the rollout. On an error after the objects were
// applied it still returns the state with the new inventory.
func (r *modelFleetResource) apply(ctx context.Context, plan modelFleetModel, prior *modelFleetModel, previous []kube.Ref, token string) (*modelFleetModel, error) {
	d, err := plan.desired(ctx, prior)
	if err != nil {
		return nil, err
	}
	c, err := d.conn.client(ctx, r.data)
	if err != nil {
		return nil, err
	}
	objs, err := d.withMonitoring(c)
	if err != nil {
		return nil, err
	}
	tflog.Info(ctx, "applying model fleet", map[string]any{"objects": len(objs), "replicas": d.fleet.Replicas, "autoscaled": d.fleet.Autoscaling != nil})
	if d.fleet.Autoscaling != nil {
		// Applied without replicas from now on: they keep their value
		// until the autoscaler writes them.
		if err := c.HandOverReplicas(ctx, d.fleet.Namespace, d.fleet.Name); err != nil {
			return nil, err
		}
	}
	if d.fleet.Autoscaling == nil && prior != nil && !prior.Autoscaling.IsNull() {
		// Autoscaling off: the HPA goes first, so it cannot scale again
		// after the apply, and the replicas are llmd's again, taken back
		// from the autoscaler that wrote them last.
		var hpa []kube.Ref
		for _, r := range previous {
			if r.Kind == "HorizontalPodAutoscaler" {
				hpa = append(hpa, r)
			}
		}
		if err := c.Delete(ctx, hpa); err != nil {
			return nil, err
		}
		d.settings.ForceConflicts = true
	}
	if err := r.ensureWeightsAccess(ctx, d); err != nil {
		return nil, err
	}
	keep, applyErr := r.applyObjects(ctx, c, d, objs, previous, token)
	state := plan
	state.ID = types.StringValue(d.fleet.Namespace + "/" + d.fleet.Name)
	state.RenderedHash = types.StringValue(d.hash)
	state.RouterTarget = routerTargetObject(d.target())
	state.BaselineEndpoint = types.StringValue(baselineEndpoint(d.fleet))
	state.Inventory = inventoryList(kube.Refs(keep))
	state.ReadyReplicas = types.Int64Value(0)
	if applyErr != nil {
		return &state, applyErr
	}
	if err := c.Prune(ctx, previous, keep); err != nil {
		return &state, err
	}
	if prior != nil && d.fleet.Storage.S3 == nil {
		// Off S3: the pods reading the bucket are gone with the prune.
		if err := r.deleteWeightsAccess(ctx, prior); err != nil {
			return &state, err
		}
	}
	if d.settings.WaitForRollout {
		if err := c.WaitDeployment(ctx, d.fleet.Namespace, d.fleet.Name); err != nil {
			return &state, err
		}
	}
	ready, err := c.ReadyReplicas(ctx, d.fleet.Namespace, d.fleet.Name)
	if err != nil {
		return &state, err
	}
	state.ReadyReplicas = types.Int64Value(ready)
	return &state, nil
}

// applyObjects applies the fleet's objects in order. With staging, the
// Hub token's Secret (when given) and the Job go first and the Job must
// complete before the Deployment is applied, so pods never start on an
// empty volume. It returns what the inventory keeps: the objects, and the
// token's Secret once it exists.
func (r *modelFleetResource) applyObjects(ctx context.Context, c *kube.Client, d desired, objs []kube.Object, previous []kube.Ref, token string) ([]kube.Object, error) {
	jobAt := slices.IndexFunc(objs, func(o kube.Object) bool { return o.Kind == "Job" })
	if jobAt < 0 {
		return objs, c.Apply(ctx, objs, d.settings.ForceConflicts)
	}
	keep := objs
	secretRef := kube.Ref{Version: "v1", Kind: "Secret", Namespace: d.fleet.Namespace, Name: d.fleet.TokenSecretName()}
	if token != "" || slices.Contains(previous, secretRef) {
		keep = append(slices.Clone(objs), kube.Object{Ref: secretRef})
	}
	if err := c.Apply(ctx, objs[:jobAt], d.settings.ForceConflicts); err != nil {
		return keep, err
	}
	if token != "" {
		secret, err := kube.FromApplyConfiguration(d.fleet.TokenSecret(token))
		if err != nil {
			return keep, err
		}
		if err := c.Apply(ctx, []kube.Object{secret}, true); err != nil {
			return keep, err
		}
	}
	// A Job that failed (a Hub outage, a token granted since) is run anew;
	// its download directory, with the files finished so far, stays.
	if _, err := c.ReplaceFailedJob(ctx, d.fleet.Namespace, d.fleet.StagingJobName()); err != nil {
		return keep, err
	}
	if err := c.Apply(ctx, objs[jobAt:jobAt+1], d.settings.ForceConflicts); err != nil {
		return keep, err
	}
	if err := c.WaitJob(ctx, d.fleet.Namespace, d.fleet.StagingJobName()); err != nil {
		return keep, fmt.Errorf("staging the weights from %s@%s: %w", d.fleet.Staging.Repo, d.fleet.Staging.Revision, err)
	}
	if err := c.DeleteOtherJobs(ctx, d.fleet.Namespace, d.fleet.StagingSelector(), d.fleet.StagingJobName()); err != nil {
		return keep, err
	}
	return keep, c.Apply(ctx, objs[jobAt+1:], d.settings.ForceConflicts)
}

// writeOnlyString reads a write-only attribute from the configuration (the
// only place it exists).
func writeOnlyString(ctx context.Context, config tfsdk.Config, name string, diags *diag.Diagnostics) string {
	var v types.String
	diags.Append(config.GetAttribute(ctx, path.Root(name), &v)...)
	return v.ValueString()
}

// explain adds the fix to errors whose fix is a setting.
func explain(err error) string {
	var conflict *kube.ConflictError
	if errors.As(err, &conflict) {
		return err.Error() + "\n\nSet force_conflicts = true to take these fields back, or stop the other manager from changing them."
	}
	var rollout *kube.RolloutError
	if errors.As(err, &rollout) && rollout.Reason == "Unschedulable" {
		return err.Error() + "\n\nThe cluster has no room for every replica: lower replicas, add GPU nodes, or check scheduling."
	}
	return err.Error()
}

func (r *modelFleetResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	readAnchored(ctx, r.data, r.kind(), req, resp)
}

// refresh is the fleet's part of a refresh: its desired objects and hash,
// and the computed attributes the live cluster gives.
func (r *modelFleetResource) refresh(ctx context.Context, c *kube.Client, dep *appsv1.Deployment, state *modelFleetModel) ([]kube.Object, string, error) {
	d, err := state.desired(ctx, state)
	if err != nil {
		return nil, "", err
	}
	objs, err := d.withMonitoring(c)
	state.RouterTarget = routerTargetObject(d.target())
	state.BaselineEndpoint = types.StringValue(baselineEndpoint(d.fleet))
	state.ReadyReplicas = types.Int64Value(int64(dep.Status.ReadyReplicas))
	hash := d.hash
	if left := leftovers(ctx, state.Inventory, objs, d.fleet); len(left) > 0 {
		// A failed apply's objects (a staging Job that failed) stay in the
		// inventory; configuring the last good settings again must still
		// plan the update that prunes them.
		hash = "drift: left by an earlier apply: " + strings.Join(left, ", ")
	}
	return objs, hash, err
}

// keepsUnversionedVolume reports whether a fleet keeps the volume and claim
// names of providers before the file system id was in them: its prior state
// applied the volume under that name, for the same file system. A fleet
// created since, or one given a new file system, has the id in the names.
func keepsUnversionedVolume(ctx context.Context, prior *modelFleetModel, fileSystemID string) bool {
	if prior == nil || fileSystemID == "" {
		return false
	}
	s, diags := prior.settings(ctx)
	if diags.HasError() || s.Storage.FileSystemID != fileSystemID {
		return false
	}
	var refs []kube.Ref
	if inventoryRefs(ctx, prior.Inventory, &refs).HasError() {
		return false
	}
	legacy := workloads.LegacyVolumeName(s.Namespace, s.Name)
	return slices.ContainsFunc(refs, func(r kube.Ref) bool { return r.Kind == "PersistentVolume" && r.Name == legacy })
}

// leftovers are the inventory's objects the settings no longer render
// (the Hub token's Secret, applied beside them, excepted).
func leftovers(ctx context.Context, inventory types.List, objs []kube.Object, f workloads.Fleet) []string {
	var refs []kube.Ref
	if inventoryRefs(ctx, inventory, &refs).HasError() {
		return nil
	}
	want := map[kube.Ref]bool{{Kind: "Secret", Namespace: f.Namespace, Name: f.TokenSecretName()}: true}
	for _, o := range objs {
		r := o.Ref
		r.Group, r.Version = "", ""
		want[r] = true
	}
	var left []string
	for _, r := range refs {
		k := r
		k.Group, k.Version = "", ""
		if !want[k] {
			left = append(left, r.Describe())
		}
	}
	return left
}

// ImportState takes `<cluster>/<namespace>/<name>` (or the identity's
// parts): the EKS cluster's name
// (in the provider's region) tells the refresh how to reach it, as the
// cluster's own `kubernetes` object would. A refresh has no configuration to
// read a connection from, so a fleet on a cluster made elsewhere cannot be
// imported.
func (r *modelFleetResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importInCluster(ctx, r.data, "model fleet", req, resp)
}

// importInCluster sets `cluster`, `id` and the identity from an import id
// `<cluster>/<namespace>/<name>` or an identity, finding the EKS cluster by
// name in the provider's region; the refresh that follows reads the rest.
func importInCluster(ctx context.Context, data *providerData, what string, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	target, diags := inClusterImportTarget(ctx, data, what, req)
	resp.Diagnostics.Append(diags...)
	if resp.Diagnostics.HasError() {
		return
	}
	if data == nil {
		resp.Diagnostics.AddError("Importing "+what, "the provider is not configured")
		return
	}
	ref := target.cluster + "/" + target.namespace + "/" + target.name
	k, err := clusterByName(ctx, data, target.cluster)
	if err != nil {
		resp.Diagnostics.AddError("Importing "+what+" "+ref, err.Error())
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("cluster"), k)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), target.namespace+"/"+target.name)...)
	id, diags := inClusterIdentity(ctx, k, types.StringValue(target.namespace), types.StringValue(target.name))
	resp.Diagnostics.Append(diags...)
	resp.Diagnostics.Append(resp.Identity.Set(ctx, id)...)
}

// clusterByName is the `cluster` object (llmd_inference_cluster's
// `kubernetes`) of the EKS cluster name in the provider's region, read from
// AWS with the default node group names, as an import or a list finds it.
func clusterByName(ctx context.Context, data *providerData, name string) (types.Object, error) {
	cluster, err := data.AWS.FindClusterByName(ctx, name, gpuDefaults.name, systemDefaults.name)
	if err == nil && cluster == nil {
		err = fmt.Errorf("no EKS cluster %q in %s", name, data.AWS.Config.Region)
	}
	if err != nil {
		return types.ObjectNull(kubernetesTypes), err
	}
	return kubernetesObject(inferenceClusterModel{Name: types.StringValue(cluster.Name), Endpoint: types.StringValue(cluster.Endpoint),
		ClusterCACertificate: types.StringValue(cluster.CertificateAuthority)}, data.AWS.Config.Region, cluster.GPU, cluster.System), nil
}

// fullyKnown reports whether a value holds no unknown anywhere inside.
func fullyKnown(v attr.Value) bool {
	tv, err := v.ToTerraformValue(context.Background())
	return err == nil && tv.IsFullyKnown()
}

func inventoryList(refs []kube.Ref) types.List {
	vals := make([]attr.Value, len(refs))
	for i, r := range refs {
		vals[i] = types.StringValue(r.String())
	}
	return types.ListValueMust(types.StringType, vals)
}

func inventoryRefs(ctx context.Context, l types.List, out *[]kube.Ref) diag.Diagnostics {
	var diags diag.Diagnostics
	var entries []string
	diags.Append(l.ElementsAs(ctx, &entries, false)...)
	for _, e := range entries {
		ref, err := kube.ParseRef(e)
		if err != nil {
			diags.AddError("Reading the fleet's inventory", err.Error())
			continue
		}
		*out = append(*out, ref)
	}
	return diags
}

func mergeInventories(a, b types.List) types.List {
	seen := map[string]bool{}
	var vals []attr.Value
	for _, l := range []types.List{a, b} {
		for _, e := range l.Elements() {
			if s, ok := e.(types.String); ok && !seen[s.ValueString()] {
				seen[s.ValueString()] = true
				vals = append(vals, s)
			}
		}
	}
	return types.ListValueMust(types.StringType, append([]attr.Value{}, vals...))
}
