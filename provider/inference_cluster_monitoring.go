package provider

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/objectdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"github.com/hashicorp/terraform-plugin-log/tflog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/rest"

	"github.com/llmd-dev/terraform-provider-llmd/internal/addons"
	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
)

// Monitoring: kube-prometheus-stack through internal/addons (Helm), the
// Grafana admin Secret it reads, and llmd's dashboards beside it.

// monitoringDeployed is Helm's status of a release that is up to date.
const monitoringDeployed = "deployed"

// GrafanaAdminSecret is the Secret in the monitoring namespace Grafana's
// admin comes from (keys admin-user and admin-password): written by llmd,
// never in Helm values or Terraform state.
const grafanaAdminSecret = "llmd-grafana-admin"

// defaultRetention is kube-prometheus-stack's own default, spelled out so
// the plan shows it.
const defaultRetention = "10d"

type monitoringModel struct {
	Enabled         types.Bool   `tfsdk:"enabled"`
	ChartRepository types.String `tfsdk:"chart_repository"`
	ChartVersion    types.String `tfsdk:"chart_version"`
	Namespace       types.String `tfsdk:"namespace"`
	Retention       types.String `tfsdk:"retention"`
	StorageGiB      types.Int64  `tfsdk:"storage_gib"`
	StorageClass    types.String `tfsdk:"storage_class"`
	Status          types.String `tfsdk:"status"`
	Version         types.String `tfsdk:"version"`
	Revision        types.Int64  `tfsdk:"revision"`
}

var (
	monitoringTypes = map[string]attr.Type{"enabled": types.BoolType, "chart_repository": types.StringType, "chart_version": types.StringType,
		"namespace": types.StringType, "retention": types.StringType, "storage_gib": types.Int64Type, "storage_class": types.StringType,
		"status": types.StringType, "version": types.StringType, "revision": types.Int64Type}
	monitoringType    = types.ObjectType{AttrTypes: monitoringTypes}
	monitoringDefault = types.ObjectValueMust(monitoringTypes, map[string]attr.Value{"enabled": types.BoolValue(true),
		"chart_repository": types.StringValue(addons.DefaultRepository), "chart_version": types.StringValue(addons.DefaultChartVersion),
		"namespace": types.StringValue(addons.DefaultNamespace), "retention": types.StringValue(defaultRetention),
		"storage_gib": types.Int64Value(0), "storage_class": types.StringNull(),
		"status": types.StringNull(), "version": types.StringNull(), "revision": types.Int64Null()})
	// monitoringSettings are the inputs whose change makes the apply upgrade the release.
	monitoringSettings = []string{"enabled", "chart_repository", "chart_version", "namespace", "retention", "storage_gib", "storage_class"}
)

func monitoringAttribute() schema.SingleNestedAttribute {
	return schema.SingleNestedAttribute{
		Optional: true, Computed: true, Default: objectdefault.StaticValue(monitoringDefault),
		MarkdownDescription: "kube-prometheus-stack (Prometheus, Alertmanager, Grafana, the prometheus-operator) through Helm, on the system node group, with " +
			"Grafana dashboards for the vLLM fleet and the router as ConfigMaps the Grafana sidecar loads, and llmd's alerts as the PrometheusRule `" + workloads.AlertsName + "` " +
			"(a router that sees no ready engine, or keeps one out of scoring, without its KV events or without its load, for 5 minutes; each fleet and " +
			"router carries its own rule for its pods, its KV cache and its staging Job): they fire in Prometheus and Alertmanager, which pages nobody until it has a " +
			"receiver (the chart's default configuration routes every alert to its `null` receiver). Prometheus scrapes every ServiceMonitor and PodMonitor " +
			"of the cluster (the fleet's and the router's included). The chart's CRDs are applied server-side before every install and upgrade (Helm never upgrades " +
			"CRDs); a release an interrupted apply left `pending-*` is recovered by the next apply. Uninstalling keeps the CRDs (deleting them would delete every " +
			"monitor of the cluster). Grafana's admin password: see `grafana_admin_password`.",
		Attributes: map[string]schema.Attribute{
			"enabled": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true),
				MarkdownDescription: "Install monitoring; default `true`. `false` uninstalls the release and removes the dashboards, the alerts and the admin Secret."},
			"chart_repository": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(addons.DefaultRepository),
				MarkdownDescription: "Chart repository: `https://...` serving `index.yaml`, or `oci://registry/path`; default `" + addons.DefaultRepository +
					"`. Point it at a private mirror for VPCs without internet access (no credentials in the URL)."},
			"chart_version": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(addons.DefaultChartVersion),
				MarkdownDescription: "Exact kube-prometheus-stack chart version; default `" + addons.DefaultChartVersion + "`, pinned by this provider release. A change upgrades the release (CRDs first)."},
			"namespace": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(addons.DefaultNamespace),
				Validators:          []validator.String{stringvalidator.LengthBetween(1, 63)},
				MarkdownDescription: "Namespace of the release, the dashboards and the admin Secret; default `" + addons.DefaultNamespace + "`. A change moves the release (uninstalled, then installed in the new namespace)."},
			"retention": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(defaultRetention),
				MarkdownDescription: "Prometheus retention, a Prometheus duration such as `15d`; default `" + defaultRetention + "`."},
			"storage_gib": schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(0),
				Validators: []validator.Int64{int64validator.AtLeast(0)},
				MarkdownDescription: "Prometheus volume in GiB; default `0`, an emptyDir (metrics are lost with the pod). A volume needs a StorageClass: EKS clusters from 1.30 on " +
					"have no default one and this cluster installs no EBS CSI driver, so set `storage_class` to one you provide."},
			"storage_class": schema.StringAttribute{Optional: true,
				MarkdownDescription: "StorageClass of Prometheus' volume (with `storage_gib`); unset: the cluster's default class."},
			"status": schema.StringAttribute{Computed: true,
				MarkdownDescription: "Helm's status of the release (`deployed`); `drift: ...` naming what differs (values edited with `helm upgrade`, a release left `pending-upgrade`, " +
					"a dashboard deleted, the admin Secret missing), or `unreachable: ...`; both plan a repair. Null when disabled."},
			"version":  schema.StringAttribute{Computed: true, MarkdownDescription: "Chart version of the deployed release."},
			"revision": schema.Int64Attribute{Computed: true, MarkdownDescription: "Helm revision of the release (1 on install, +1 per upgrade)."},
		},
	}
}

// grafanaPasswordAttributes are top-level: a write-only attribute cannot sit
// inside a computed nested attribute such as addons.
func grafanaPasswordAttributes() map[string]schema.Attribute {
	return map[string]schema.Attribute{
		"grafana_admin_password": schema.StringAttribute{Optional: true, WriteOnly: true, Sensitive: true,
			Validators: []validator.String{stringvalidator.LengthAtLeast(8)},
			MarkdownDescription: "Grafana's admin password for `addons.monitoring` (write-only: never in the plan or state; Terraform 1.11+). Written into the Secret `" +
				grafanaAdminSecret + "` of the monitoring namespace when the release is installed or upgraded, and whenever `grafana_admin_password_version` changes. " +
				"Unset: a random password is generated into that Secret once and never overwritten; read it with " +
				"`kubectl -n monitoring get secret " + grafanaAdminSecret + " -o jsonpath='{.data.admin-password}' | base64 -d` (user `admin`). " +
				"Grafana reads it when its pod starts: after a change, `kubectl -n monitoring rollout restart deployment kube-prometheus-stack-grafana`."},
		"grafana_admin_password_version": schema.StringAttribute{Optional: true,
			MarkdownDescription: "Any value; change it to write a new `grafana_admin_password` (Terraform cannot see a change of a write-only value)."},
	}
}

// monitoringPlan is the release llmd wants.
type monitoringPlan struct {
	addons.Monitoring
}

// monitoringPlan decodes addons.monitoring; nil when disabled.
func (m inferenceClusterModel) monitoringPlan(ctx context.Context, diags *diag.Diagnostics) *monitoringPlan {
	if m.Addons.IsNull() || m.Addons.IsUnknown() {
		return nil
	}
	o, ok := m.Addons.Attributes()["monitoring"].(types.Object)
	if !ok || o.IsNull() || o.IsUnknown() {
		return nil
	}
	var mm monitoringModel
	diags.Append(o.As(ctx, &mm, asObject)...)
	if !mm.Enabled.ValueBool() {
		return nil
	}
	sel, tols := nodeGroupPlacement(ctx, m.SystemNodeGroup, systemDefaults.name, diags)
	return &monitoringPlan{addons.Monitoring{Namespace: mm.Namespace.ValueString(), Release: addons.DefaultRelease,
		Repository: mm.ChartRepository.ValueString(), Chart: addons.DefaultChart, Version: mm.ChartVersion.ValueString(),
		NodeSelector: sel, Tolerations: tols, Retention: mm.Retention.ValueString(), StorageGiB: mm.StorageGiB.ValueInt64(),
		StorageClass: mm.StorageClass.ValueString(), GrafanaAdminSecret: grafanaAdminSecret, DashboardLabel: workloads.DashboardLabel}}
}

// monitoringInstalledBefore: the state records a release (enabled or not yet removed).
func (m inferenceClusterModel) monitoringInstalledBefore() bool {
	if m.Addons.IsNull() || m.Addons.IsUnknown() {
		return false
	}
	o, ok := m.Addons.Attributes()["monitoring"].(types.Object)
	return ok && !o.IsNull() && !o.IsUnknown() && !o.Attributes()["revision"].IsNull() && !o.Attributes()["revision"].IsUnknown()
}

// monitoringObjects are llmd's own objects beside the release: its
// namespace, the dashboards and the alerts, the PrometheusRule last (the
// admin Secret is written apart, never overwritten when generated).
func monitoringObjects(m *monitoringPlan) (namespace kube.Object, objs []kube.Object, err error) {
	namespace, err = kube.FromApplyConfiguration(corev1ac.Namespace(m.Namespace).WithLabels(map[string]string{"app.kubernetes.io/managed-by": "llmd"}))
	if err != nil {
		return namespace, nil, err
	}
	objs, err = workloads.DashboardConfigMaps(m.Namespace)
	if err != nil {
		return namespace, nil, err
	}
	alerts, err := workloads.AlertsPrometheusRule(m.Namespace)
	return namespace, append(objs, alerts), err
}

// alertsServed asks whether the cluster serves the PrometheusRule CRD the
// release installs (addons.Apply waits until it does); it can be missing
// only when someone deleted the CRDs behind llmd's back.
func alertsServed(c *kube.Client) (bool, error) {
	return c.Serves(workloads.PrometheusRuleKind.GroupVersionKind())
}

func grafanaSecretRef(namespace string) kube.Ref {
	return kube.Ref{Version: "v1", Kind: "Secret", Namespace: namespace, Name: grafanaAdminSecret}
}

// applyMonitoring makes monitoring what the plan says: the release of the
// prior state uninstalled when monitoring is turned off or moves namespace,
// then the namespace, the admin Secret, the release (only when the plan
// expects a change: act) and the dashboards. It returns llmd's objects
// (for the inventory), also on error, and records the release's status.
func (r *inferenceClusterResource) applyMonitoring(ctx context.Context, k *inClusterKube, state *inferenceClusterModel, want, prior *monitoringPlan,
	password string, act bool) ([]kube.Ref, error) {
	if prior != nil && (want == nil || prior.Namespace != want.Namespace) {
		tflog.Info(ctx, "uninstalling monitoring", map[string]any{"namespace": prior.Namespace, "release": prior.Release})
		if err := addons.Uninstall(ctx, k.cfg, prior.Monitoring); err != nil {
			return nil, fmt.Errorf("uninstalling monitoring from namespace %s: %w", prior.Namespace, err)
		}
	}
	if want == nil {
		state.Addons = withMonitoringRelease(state.Addons, nil)
		return nil, nil
	}
	ns, objs, err := monitoringObjects(want)
	if err != nil {
		return nil, err
	}
	refs := []kube.Ref{ns.Ref}
	if err := k.c.Apply(ctx, []kube.Object{ns}, true); err != nil {
		return nil, err
	}
	refs = append(refs, grafanaSecretRef(want.Namespace))
	if err := writeGrafanaSecret(ctx, k.c, want.Namespace, password); err != nil {
		return refs, err
	}
	if act {
		st, err := addons.Apply(ctx, k.cfg, want.Monitoring, func(format string, args ...any) { tflog.Info(ctx, fmt.Sprintf(format, args...)) })
		if st.Revision > 0 {
			state.Addons = withMonitoringRelease(state.Addons, &st)
		}
		if err != nil {
			state.Addons = withInClusterStatus(state.Addons, "monitoring", "failed: "+err.Error())
			// addons names its own fields (Version, Repository): say which attributes they are.
			return refs, fmt.Errorf("installing monitoring (addons.monitoring.chart_version %s from chart_repository %s): %w", want.Version, want.Repository, err)
		}
	}
	served, err := alertsServed(k.c)
	if err == nil && !served {
		err = fmt.Errorf("the cluster does not serve %s, whose CRD the monitoring release installs: the CRDs were deleted; "+
			"apply again: the refresh reports the drift and the apply installs the release and its CRDs again", workloads.PrometheusRuleKind.GroupVersionKind())
	}
	if err == nil {
		err = k.c.Apply(ctx, objs, true)
	}
	if err != nil {
		state.Addons = withInClusterStatus(state.Addons, "monitoring", "failed: "+err.Error())
		return refs, err
	}
	return append(refs, kube.Refs(objs)...), nil
}

// writeGrafanaSecret writes the configured password, or generates one when
// the Secret does not exist yet; a generated password is never overwritten.
func writeGrafanaSecret(ctx context.Context, c *kube.Client, namespace, password string) error {
	if password == "" {
		_, err := c.Typed.CoreV1().Secrets(namespace).Get(ctx, grafanaAdminSecret, metav1.GetOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading Secret %s/%s: %w", namespace, grafanaAdminSecret, err)
		}
		raw := make([]byte, 24)
		if _, err := rand.Read(raw); err != nil {
			return fmt.Errorf("generating Grafana's admin password: %w", err)
		}
		password = base64.RawURLEncoding.EncodeToString(raw)
		tflog.Info(ctx, "generated Grafana's admin password into Secret "+namespace+"/"+grafanaAdminSecret)
	}
	o, err := kube.FromApplyConfiguration(corev1ac.Secret(grafanaAdminSecret, namespace).
		WithLabels(map[string]string{"app.kubernetes.io/managed-by": "llmd", "app.kubernetes.io/component": "monitoring"}).
		WithData(map[string][]byte{addons.GrafanaAdminUserKey: []byte("admin"), addons.GrafanaAdminPasswordKey: []byte(password)}))
	if err != nil {
		return err
	}
	return c.Apply(ctx, []kube.Object{o}, true)
}

// readMonitoring refreshes monitoring's status from the release and llmd's
// objects beside it. found reports a release (what an import records).
func (r *inferenceClusterResource) readMonitoring(ctx context.Context, k *inClusterKube, state *inferenceClusterModel, want *monitoringPlan, importing bool) (bool, []kube.Ref, error) {
	if want == nil {
		return false, nil, nil
	}
	st, drift, err := addons.Read(ctx, k.cfg, want.Monitoring)
	if err != nil {
		return false, nil, fmt.Errorf("reading monitoring: %w", err)
	}
	if st == nil {
		if importing {
			return false, nil, nil
		}
		state.Addons = withMonitoringRelease(state.Addons, nil)
		state.Addons = withInClusterStatus(state.Addons, "monitoring", fmt.Sprintf("drift: release %s/%s is missing", want.Namespace, want.Release))
		return false, nil, nil
	}
	ns, objs, err := monitoringObjects(want)
	if err != nil {
		return true, nil, err
	}
	served, err := alertsServed(k.c)
	if err != nil {
		return true, nil, err
	}
	if !served {
		objs = objs[:len(objs)-1]
		drift = append(drift, workloads.PrometheusRuleKind.GroupVersionKind().String()+" is not served (the CRDs are gone)")
	}
	objDrift, err := k.c.Drift(ctx, objs)
	if err != nil {
		return true, nil, err
	}
	for _, d := range objDrift {
		drift = append(drift, d.String())
	}
	if _, err := k.c.Typed.CoreV1().Secrets(want.Namespace).Get(ctx, grafanaAdminSecret, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		drift = append(drift, "Secret "+want.Namespace+"/"+grafanaAdminSecret+" is missing")
	} else if err != nil {
		return true, nil, fmt.Errorf("reading Secret %s/%s: %w", want.Namespace, grafanaAdminSecret, err)
	}
	state.Addons = withMonitoringRelease(state.Addons, st)
	if importing {
		state.Addons = withAddonAttr(state.Addons, "monitoring", "chart_version", types.StringValue(st.ChartVersion))
	}
	if len(drift) > 0 {
		state.Addons = withInClusterStatus(state.Addons, "monitoring", "drift: "+strings.Join(drift, "; "))
	}
	refs := append([]kube.Ref{ns.Ref, grafanaSecretRef(want.Namespace)}, kube.Refs(objs)...)
	return true, refs, nil
}

// uninstallMonitoring removes the release the state records, before the inventory goes.
func (r *inferenceClusterResource) uninstallMonitoring(ctx context.Context, k *inClusterKube, state inferenceClusterModel) error {
	var diags diag.Diagnostics
	m := state.monitoringPlan(ctx, &diags)
	if m == nil {
		m = state.recordedMonitoring(ctx, &diags)
	}
	if diags.HasError() {
		return fmt.Errorf("%v", diags)
	}
	if m == nil {
		return nil
	}
	return addons.Uninstall(ctx, k.cfg, m.Monitoring)
}

// recordedMonitoring is the release a state records even when disabled
// (turned off, not yet removed): where to uninstall it from.
func (m inferenceClusterModel) recordedMonitoring(ctx context.Context, diags *diag.Diagnostics) *monitoringPlan {
	if !m.monitoringInstalledBefore() {
		return nil
	}
	var mm monitoringModel
	diags.Append(m.Addons.Attributes()["monitoring"].(types.Object).As(ctx, &mm, asObject)...)
	return &monitoringPlan{addons.Monitoring{Namespace: mm.Namespace.ValueString(), Release: addons.DefaultRelease}}
}

// withMonitoringRelease records the release's status, version and revision (nil: none).
func withMonitoringRelease(a types.Object, st *addons.Status) types.Object {
	if st == nil {
		a = withAddonAttr(a, "monitoring", "status", types.StringNull())
		a = withAddonAttr(a, "monitoring", "version", types.StringNull())
		return withAddonAttr(a, "monitoring", "revision", types.Int64Null())
	}
	a = withAddonAttr(a, "monitoring", "status", types.StringValue(st.Status))
	a = withAddonAttr(a, "monitoring", "version", types.StringValue(st.ChartVersion))
	return withAddonAttr(a, "monitoring", "revision", types.Int64Value(int64(st.Revision)))
}

// planMonitoring keeps status, version and revision while the release stays
// as it is, and reports whether it does. Anything else (enabled, a changed
// setting or placement, a new password version, a release that is not
// deployed or drifted) leaves them unknown: the apply upgrades the release.
func planMonitoring(plan, prior *inferenceClusterModel, priorAddons map[string]attr.Value) bool {
	o, ok := plan.Addons.Attributes()["monitoring"].(types.Object)
	if !ok || o.IsNull() || o.IsUnknown() {
		return false
	}
	v := o.Attributes()
	var p map[string]attr.Value
	if po, ok := priorAddons["monitoring"].(types.Object); ok && !po.IsNull() && !po.IsUnknown() {
		p = po.Attributes()
	}
	enabled := v["enabled"].Equal(types.BoolValue(true))
	wasEnabled := p != nil && p["enabled"].Equal(types.BoolValue(true))
	same := p != nil && prior != nil && plan.GrafanaAdminPasswordVersion.Equal(prior.GrafanaAdminPasswordVersion) &&
		samePlacement(plan.SystemNodeGroup, prior.SystemNodeGroup)
	for _, k := range monitoringSettings {
		if same && !v[k].Equal(p[k]) {
			same = false
		}
	}
	kept := enabled == wasEnabled
	switch {
	case !enabled:
		v["status"], v["version"], v["revision"] = types.StringNull(), types.StringNull(), types.Int64Null()
		if p != nil && !p["revision"].IsNull() {
			kept = false // the apply uninstalls the release
		}
	case same && p["status"].Equal(types.StringValue(monitoringDeployed)):
		v["status"], v["version"], v["revision"] = p["status"], p["version"], p["revision"]
	default:
		v["status"], v["version"], v["revision"] = types.StringUnknown(), types.StringUnknown(), types.Int64Unknown()
		kept = false
	}
	plan.Addons = withAddonObject(plan.Addons, "monitoring", types.ObjectValueMust(monitoringTypes, v))
	return kept
}

// monitoringFields name addons.monitoring's attributes for the fields
// addons.Monitoring.Validate names at the start of each error line.
var monitoringFields = map[string]string{"Repository": "chart_repository", "Version": "chart_version", "Namespace": "namespace",
	"Retention": "retention", "StorageGiB": "storage_gib", "StorageClass": "storage_class"}

// validateMonitoring checks addons.monitoring at plan time, without
// reaching the cluster or the repository.
func validateMonitoring(ctx context.Context, plan inferenceClusterModel) diag.Diagnostics {
	var diags diag.Diagnostics
	if !fullyKnown(plan.Addons) || !fullyKnown(plan.SystemNodeGroup) {
		return diags
	}
	m := plan.monitoringPlan(ctx, &diags)
	if m == nil || diags.HasError() {
		return diags
	}
	if err := m.Validate(); err != nil {
		var lines []string
		for _, line := range strings.Split(err.Error(), "\n") {
			field, rest, _ := strings.Cut(line, " ")
			if attr, ok := monitoringFields[field]; ok {
				line = "addons.monitoring." + attr + " " + rest
			}
			lines = append(lines, line)
		}
		diags.AddAttributeError(path.Root("addons").AtName("monitoring"), "Invalid monitoring add-on", strings.Join(lines, "\n"))
	}
	return diags
}

// samePlacement: a node group's labels and taints (where the stack's pods
// go) stay; other attributes (sizes, versions) do not move them.
func samePlacement(planned, prior types.Object) bool {
	if planned.IsNull() || prior.IsNull() || planned.IsUnknown() || prior.IsUnknown() {
		return planned.IsNull() && prior.IsNull()
	}
	p, s := planned.Attributes(), prior.Attributes()
	return p["labels"].Equal(s["labels"]) && p["taints"].Equal(s["taints"])
}

// monitoringActs: the plan expects the release to change.
func monitoringActs(plan inferenceClusterModel) bool {
	if plan.Addons.IsNull() || plan.Addons.IsUnknown() {
		return false
	}
	o, ok := plan.Addons.Attributes()["monitoring"].(types.Object)
	return ok && !o.IsNull() && !o.IsUnknown() && o.Attributes()["status"].IsUnknown()
}

// inClusterKube is one client for the cluster and the configuration Helm takes.
type inClusterKube struct {
	c   *kube.Client
	cfg *rest.Config
}
