package provider

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
)

var (
	_ resource.Resource                   = (*prefixRouterResource)(nil)
	_ resource.ResourceWithConfigure      = (*prefixRouterResource)(nil)
	_ resource.ResourceWithIdentity       = (*prefixRouterResource)(nil)
	_ resource.ResourceWithImportState    = (*prefixRouterResource)(nil)
	_ resource.ResourceWithModifyPlan     = (*prefixRouterResource)(nil)
	_ resource.ResourceWithValidateConfig = (*prefixRouterResource)(nil)
)

// Router pods start in seconds (no weights to load); a rollout waits for
// each new pod's first view of the fleet.
const (
	defaultRouterCreateTimeout = 10 * time.Minute
	defaultRouterUpdateTimeout = 15 * time.Minute
	defaultRouterDeleteTimeout = 10 * time.Minute
)

func newPrefixRouterResource() resource.Resource { return &prefixRouterResource{} }

// prefixRouterResource is llmd_prefix_router: internal/workloads builds the
// objects, internal/kube applies and watches them, this file maps Terraform.
type prefixRouterResource struct {
	data *providerData
}

func (r *prefixRouterResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_prefix_router"
}

func (r *prefixRouterResource) IdentitySchema(ctx context.Context, req resource.IdentitySchemaRequest, resp *resource.IdentitySchemaResponse) {
	inClusterIdentitySchema(ctx, req, resp)
}

func (r *prefixRouterResource) Configure(_ context.Context, req resource.ConfigureRequest, resp *resource.ConfigureResponse) {
	r.data = providerDataFrom(req.ProviderData, &resp.Diagnostics)
}

func (r *prefixRouterResource) version() string {
	if r.data == nil {
		return ""
	}
	return r.data.Version
}

func (r *prefixRouterResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	var m prefixRouterModel
	resp.Diagnostics.Append(req.Config.Get(ctx, &m)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if p, msg := validateConnectionConfig(m.Cluster, m.Kubernetes); msg != "" {
		resp.Diagnostics.AddAttributeError(p, "Where the router runs", msg)
	}
	// A write-only value is never compared between plans, so its version
	// stands for it in the plan: Terraform's documented pattern for
	// write-only arguments (developer.hashicorp.com/terraform/plugin/framework/resources/write-only-arguments).
	if m.APIKey.IsNull() != m.APIKeyVersion.IsNull() {
		resp.Diagnostics.AddAttributeError(path.Root("api_key_version"), "API key without its version",
			"set api_key and api_key_version together: the version (any string) is what the plan compares, and changing it rolls the router pods to a new key.")
	}
}

// routerDesired is the router a model describes: its spec, its objects
// (without the ServiceMonitor, which depends on the cluster) and their hashes.
type routerDesired struct {
	settings   routerSettings
	conn       connection
	router     workloads.Router
	objects    []kube.Object
	hash       string
	configHash string
}

func (m prefixRouterModel) desired(ctx context.Context) (routerDesired, error) {
	var d routerDesired
	s, diags := m.settings()
	if diags.HasError() {
		return d, fmt.Errorf("%v", diags)
	}
	if diags := s.contradictions(); diags.HasError() {
		return d, fmt.Errorf("%v", diags)
	}
	conn, err := decodeConnection(ctx, m.Cluster, m.Kubernetes)
	if err != nil {
		return d, err
	}
	rt, err := s.router(ctx, conn)
	if err != nil {
		return d, err
	}
	rt.Annotations = map[string]string{routerSettingsAnnotation: s.annotation()}
	_, configHash, err := rt.ConfigFile()
	if err != nil {
		return d, err
	}
	objs, err := rt.Objects(false)
	if err != nil {
		return d, err
	}
	hash, err := workloads.Hash(objs)
	if err != nil {
		return d, err
	}
	return routerDesired{settings: s, conn: conn, router: rt, objects: objs, hash: hash, configHash: configHash}, nil
}

// withMonitoring adds the ServiceMonitor as metrics.service_monitor says,
// asking the cluster whether it serves the CRD (at apply and refresh only),
// and with it the alerting rules when the cluster serves their CRD.
func (d routerDesired) withMonitoring(c *kube.Client) ([]kube.Object, error) {
	want := d.settings.wantServiceMonitor()
	if want != nil && !*want {
		return d.objects, nil
	}
	served, err := c.Serves(workloads.ServiceMonitorKind.GroupVersionKind())
	if err != nil {
		return nil, err
	}
	if !served {
		if want != nil {
			return nil, fmt.Errorf("metrics.service_monitor = true, but the cluster does not serve %s (install the prometheus-operator CRDs, or leave service_monitor unset to add it once they exist)",
				workloads.ServiceMonitorKind.GroupVersionKind())
		}
		return d.objects, nil
	}
	objs, err := d.router.Objects(true)
	if err != nil {
		return nil, err
	}
	return withAlertRule(c, objs, d.router.AlertRule)
}

func (r *prefixRouterResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	var plan prefixRouterModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if plan.Image.IsNull() || plan.Image.IsUnknown() {
		var config prefixRouterModel
		resp.Diagnostics.Append(req.Config.Get(ctx, &config)...)
		if config.Image.IsNull() {
			pinned := pinnedRouterImage(r.version())
			if pinned == "" {
				resp.Diagnostics.AddAttributeError(path.Root("image"), "No router image",
					fmt.Sprintf("this provider is a development build (version %q) and pins no router image: set image, e.g. the one `make image` builds from this commit.", r.version()))
				return
			}
			plan.Image = types.StringValue(pinned)
		}
	} else if pinned := pinnedRouterImage(r.version()); pinned != "" && plan.Image.ValueString() != pinned {
		resp.Diagnostics.AddAttributeWarning(path.Root("image"), "Router image not pinned by this provider",
			fmt.Sprintf("image %s is not %s, the router built with this provider version; its flags and configuration format may differ.", plan.Image.ValueString(), pinned))
	}
	if (plan.Namespace.IsUnknown() || plan.Namespace.IsNull()) && fullyKnown(plan.Fleet) && !plan.Fleet.IsNull() {
		if ns, ok := plan.Fleet.Attributes()["namespace"].(types.String); ok {
			plan.Namespace = ns
		}
	}
	if !plan.known() {
		resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
		return
	}
	s, diags := plan.settings()
	resp.Diagnostics.Append(diags...)
	resp.Diagnostics.Append(s.contradictions()...)
	if resp.Diagnostics.HasError() {
		return
	}
	conn, _ := decodeConnection(ctx, types.ObjectNull(nil), plan.Kubernetes)
	if fullyKnown(plan.Cluster) {
		conn, _ = decodeConnection(ctx, plan.Cluster, plan.Kubernetes)
	} else if !plan.Cluster.IsNull() {
		conn.cluster = &kubernetesModel{} // a cluster still to be made: its placement is checked at apply
	}
	rt, err := s.router(ctx, conn)
	if err == nil {
		err = rt.Validate()
	}
	if err != nil {
		resp.Diagnostics.AddError("Invalid prefix router", err.Error())
		return
	}
	_, configHash, err := rt.ConfigFile()
	if err != nil {
		resp.Diagnostics.AddError("Invalid prefix router", err.Error())
		return
	}
	if path, msg := sharedNodeWarning(conn, s); msg != "" {
		resp.Diagnostics.AddAttributeWarning(path, "Router replicas share one node", msg)
	}
	plan.ID = types.StringValue(s.Namespace + "/" + s.Name)
	plan.URL = types.StringValue(rt.URL())
	plan.InferencePool = s.inferencePoolName()
	plan.ConfigHash = types.StringValue(configHash)
	if fullyKnown(plan.Cluster) && fullyKnown(plan.Kubernetes) {
		d, err := plan.desired(ctx)
		if err != nil {
			resp.Diagnostics.AddError("Invalid prefix router", err.Error())
			return
		}
		plan.RenderedHash = types.StringValue(d.hash)
		if !req.State.Raw.IsNull() {
			var state prefixRouterModel
			resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
			if state.RenderedHash.ValueString() == d.hash {
				plan.Inventory = state.Inventory
				plan.LoadBalancerHostname = state.LoadBalancerHostname
			}
		}
	}
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

func (r *prefixRouterResource) kind() anchoredKind[prefixRouterModel] {
	return anchoredKind[prefixRouterModel]{what: "prefix router", label: "llmd.dev/router",
		annotation: routerSettingsAnnotation, typeName: "llmd_prefix_router", refresh: r.refresh, afterDelete: r.unbindWeightsReader,
		createTimeout: defaultRouterCreateTimeout, updateTimeout: defaultRouterUpdateTimeout, deleteTimeout: defaultRouterDeleteTimeout,
		apply: func(ctx context.Context, plan prefixRouterModel, _ *prefixRouterModel, previous []kube.Ref, config tfsdk.Config, diags *diag.Diagnostics) (*prefixRouterModel, error) {
			return r.apply(ctx, plan, previous, writeOnlyString(ctx, config, "api_key", diags))
		}}
}

func (r *prefixRouterResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	createAnchored(ctx, r.kind(), req, resp)
}

func (r *prefixRouterResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	updateAnchored(ctx, r.kind(), req, resp)
}

func (r *prefixRouterResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	deleteAnchored(ctx, r.data, r.kind(), req, resp)
}

// apply applies the planned router, prunes what the previous inventory holds
// beyond it and waits for the rollout. On an error after the objects were
// applied it still returns the state with the new inventory.
func (r *prefixRouterResource) apply(ctx context.Context, plan prefixRouterModel, previous []kube.Ref, apiKey string) (*prefixRouterModel, error) {
	d, err := plan.desired(ctx)
	if err != nil {
		return nil, err
	}
	if (d.router.APIKeyVersion != "") != (apiKey != "") {
		return nil, fmt.Errorf("api_key: set it with api_key_version (and api_key_version only with a non-empty api_key)")
	}
	c, err := d.conn.client(ctx, r.data)
	if err != nil {
		return nil, err
	}
	if d.router.Gateway != nil {
		if err := requireInferencePoolCRD(c); err != nil {
			return nil, err
		}
	}
	if d.router.Target.Autoscaled {
		if err := requireMetricsAPIFree(ctx, c, d.router); err != nil {
			return nil, err
		}
	}
	if err := r.bindWeightsReader(ctx, d); err != nil {
		return nil, err
	}
	objs, err := d.withMonitoring(c)
	if err != nil {
		return nil, err
	}
	tflog.Info(ctx, "applying prefix router", map[string]any{"objects": len(objs), "replicas": d.router.Replicas})
	keep := objs
	if apiKey != "" {
		// Before the Deployment, whose pods need it to start.
		secret, err := kube.FromApplyConfiguration(d.router.APIKeySecret(apiKey))
		if err != nil {
			return nil, err
		}
		if err := c.Apply(ctx, objs[:1], d.settings.ForceConflicts); err != nil { // the namespace
			return nil, err
		}
		if err := c.Apply(ctx, []kube.Object{secret}, true); err != nil {
			return nil, err
		}
		keep = append(slices.Clone(objs), kube.Object{Ref: secret.Ref})
	}
	if err := c.Apply(ctx, objs, d.settings.ForceConflicts); err != nil {
		return nil, err
	}
	state := plan
	state.ID = types.StringValue(d.router.Namespace + "/" + d.router.Name)
	state.RenderedHash = types.StringValue(d.hash)
	state.ConfigHash = types.StringValue(d.configHash)
	state.URL = types.StringValue(d.router.URL())
	state.InferencePool = d.settings.inferencePoolName()
	state.Inventory = inventoryList(kube.Refs(keep))
	state.LoadBalancerHostname = types.StringValue("")
	if err := c.Prune(ctx, previous, keep); err != nil {
		return &state, err
	}
	if d.settings.WaitForRollout {
		if err := c.WaitDeployment(ctx, d.router.Namespace, d.router.Name); err != nil {
			return &state, err
		}
	}
	host, err := loadBalancerHostname(ctx, c, d.router)
	if err != nil {
		return &state, err
	}
	state.LoadBalancerHostname = types.StringValue(host)
	return &state, nil
}

// loadBalancerHostname is what the cloud reports for the router's Service so
// far; the provider does not wait for it (a load balancer controller may take
// minutes, and the in-cluster url works without it).
func loadBalancerHostname(ctx context.Context, c *kube.Client, rt workloads.Router) (string, error) {
	if rt.Service.Type != "LoadBalancer" {
		return "", nil
	}
	svc, err := c.Typed.CoreV1().Services(rt.Namespace).Get(ctx, rt.Name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading Service %s/%s: %w", rt.Namespace, rt.Name, err)
	}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.Hostname != "" {
			return in.Hostname, nil
		}
		if in.IP != "" {
			return in.IP, nil
		}
	}
	return "", nil
}

func (r *prefixRouterResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	readAnchored(ctx, r.data, r.kind(), req, resp)
}

// refresh is the router's part of a refresh: its desired objects and hash,
// and the computed attributes the live cluster gives.
func (r *prefixRouterResource) refresh(ctx context.Context, c *kube.Client, _ *appsv1.Deployment, state *prefixRouterModel) ([]kube.Object, string, error) {
	d, err := state.desired(ctx)
	if err != nil {
		return nil, "", err
	}
	objs, err := d.withMonitoring(c)
	if err != nil {
		return nil, "", err
	}
	state.ConfigHash = types.StringValue(d.configHash)
	state.URL = types.StringValue(d.router.URL())
	state.InferencePool = d.settings.inferencePoolName()
	host, err := loadBalancerHostname(ctx, c, d.router)
	state.LoadBalancerHostname = types.StringValue(host)
	return objs, d.hash, err
}

// ImportState takes `<cluster>/<namespace>/<name>` or the identity's parts,
// as llmd_model_fleet does.
func (r *prefixRouterResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	importInCluster(ctx, r.data, "prefix router", req, resp)
}
