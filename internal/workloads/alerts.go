package workloads

import (
	_ "embed"
	"fmt"

	"sigs.k8s.io/yaml"

	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
)

// PrometheusRuleKind is the prometheus-operator type of the alerting rules.
var PrometheusRuleKind = kube.Ref{Group: "monitoring.coreos.com", Version: "v1", Kind: "PrometheusRule"}

// alert is one Prometheus alerting rule.
type alert struct {
	Name, Expr, For, Severity, Summary, Description string
}

// The series the alerts select: vLLM's own (vllm/v1/metrics/loggers.py),
// kube-state-metrics' (internal/store/deployment.go and job.go:
// kube_deployment_spec_replicas, kube_deployment_status_replicas_available,
// kube_deployment_status_replicas_updated, kube_job_failed; kube-prometheus-stack
// installs it) and Prometheus' own up, with the namespace, pod and service
// labels the operator's scrape configs add.

// fleetAlerts are the on-call's alerts for one fleet.
func (f Fleet) fleetAlerts() []alert {
	dep := fmt.Sprintf(`namespace=%q, deployment=%q`, f.Namespace, f.Name)
	vllm := fmt.Sprintf(`namespace=%q, model_name=%q`, f.Namespace, f.ServedName)
	alerts := []alert{
		{Name: "LLMDFleetPodNotReady", For: "15m", Severity: "warning",
			// Not while a rollout replaces pods one by one (each cold start takes minutes).
			Expr: fmt.Sprintf(`(kube_deployment_spec_replicas{%[1]s} - kube_deployment_status_replicas_available{%[1]s}) > 0 `+
				`and on (namespace, deployment) (kube_deployment_status_replicas_updated{%[1]s} == kube_deployment_spec_replicas{%[1]s})`, dep),
			Summary:     fmt.Sprintf("vLLM fleet %s/%s has pods not ready", f.Namespace, f.Name),
			Description: "{{ $value }} replica(s) of the fleet have not been ready for 15 minutes outside a rollout: GPU capacity is paid for and not serving. kubectl describe the pods (image pull, mount, crash loop, GPU)."},
		{Name: "LLMDFleetKVCacheFull", For: "10m", Severity: "warning",
			Expr: fmt.Sprintf(`max by (namespace, pod) (vllm:kv_cache_usage_perc{%[1]s}) > 0.95 `+
				`and on (namespace, pod) max by (namespace, pod) (vllm:num_requests_waiting{%[1]s}) > 0`, vllm),
			Summary:     fmt.Sprintf("vLLM pod {{ $labels.pod }} of %s/%s has its KV cache full with requests waiting", f.Namespace, f.Name),
			Description: "KV-cache usage above 95% with requests queued for 10 minutes: the pod is at capacity and latency grows. Add replicas or lower max_num_seqs / max_model_len."},
	}
	if f.Staging != nil {
		alerts = append(alerts, alert{Name: "LLMDStagingJobFailed", Severity: "warning",
			Expr:        fmt.Sprintf(`kube_job_failed{namespace=%q, job_name=~%q, condition="true"} > 0`, f.Namespace, f.Name+"-stage-.*"),
			Summary:     fmt.Sprintf("Staging the weights of %s/%s failed", f.Namespace, f.Name),
			Description: "The staging Job {{ $labels.job_name }} failed (its last log line names the Hugging Face answer); the fleet keeps serving the previous revision. Fix the cause and apply again: the next apply runs the Job anew."})
	}
	return alerts
}

// routerAlerts are the on-call's alerts for one router.
func (r Router) routerAlerts() []alert {
	dep := fmt.Sprintf(`namespace=%q, deployment=%q`, r.Namespace, r.Name)
	return []alert{
		{Name: "LLMDRouterDown", For: "2m", Severity: "critical",
			Expr:        fmt.Sprintf(`kube_deployment_status_replicas_available{%s} == 0`, dep),
			Summary:     fmt.Sprintf("No llmd-router pod of %s/%s is available", r.Namespace, r.Name),
			Description: "Every request through the router fails. kubectl describe the router pods; the fleet's baseline Service still reaches vLLM directly."},
		{Name: "LLMDRouterPodsOut", For: "10m", Severity: "warning",
			Expr:        fmt.Sprintf(`kube_deployment_status_replicas_available{%[1]s} < kube_deployment_spec_replicas{%[1]s}`, dep),
			Summary:     fmt.Sprintf("llmd-router %s/%s runs below its replicas", r.Namespace, r.Name),
			Description: "Fewer router pods are available than asked for 10 minutes: one more failure takes the router down."},
		{Name: "LLMDRouterSilent", For: "5m", Severity: "critical",
			Expr:        fmt.Sprintf(`absent(up{namespace=%q, service=%q} == 1)`, r.Namespace, r.Name),
			Summary:     fmt.Sprintf("Prometheus scrapes no llmd-router pod of %s/%s", r.Namespace, r.Name),
			Description: "No router pod answers /metrics for 5 minutes (down, or its ServiceMonitor is not selected): the dashboards and the other alerts are blind."},
	}
}

// prometheusRule is the PrometheusRule of one group of alerts.
func prometheusRule(name, namespace string, labels map[string]string, alerts []alert) any {
	rules := make([]any, 0, len(alerts))
	for _, a := range alerts {
		rule := map[string]any{"alert": a.Name, "expr": a.Expr, "labels": map[string]any{"severity": a.Severity},
			"annotations": map[string]any{"summary": a.Summary, "description": a.Description}}
		if a.For != "" {
			rule["for"] = a.For
		}
		rules = append(rules, rule)
	}
	return map[string]any{
		"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
		"metadata": map[string]any{"name": name, "namespace": namespace, "labels": labels},
		"spec":     map[string]any{"groups": []any{map[string]any{"name": "llmd-" + namespace + "-" + name, "rules": rules}}},
	}
}

// AlertRule is the fleet's PrometheusRule (applied when the cluster serves the CRD).
func (f Fleet) AlertRule() (kube.Object, error) {
	return kube.FromApplyConfiguration(prometheusRule(f.Name, f.Namespace, f.Labels(), f.fleetAlerts()))
}

// AlertRule is the router's PrometheusRule (applied when the cluster serves the CRD).
func (r Router) AlertRule() (kube.Object, error) {
	return kube.FromApplyConfiguration(prometheusRule(r.Name, r.Namespace, r.Labels(), r.routerAlerts()))
}

// alertRules are the cluster-wide alerts in Prometheus's rule file format:
// the router's view of every engine (out of scoring, no KV events, load
// not read, none ready), by the router's own series, for every router of
// the cluster. Each fleet and router carries its own PrometheusRule for its
// pods and its staging Job (AlertRule).
//
//go:embed alerts/llmd.rules.yaml
var alertRules []byte

// AlertsName names the PrometheusRule in the monitoring namespace.
const AlertsName = "llmd-alerts"

// RuleGroup is one group of a Prometheus rule file.
type RuleGroup struct {
	Name  string `json:"name"`
	Rules []Rule `json:"rules"`
}

// Rule is one alerting rule.
type Rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// AlertRuleGroups are the embedded alert groups, decoded strictly (an
// unknown field is a typo that Prometheus would reject).
func AlertRuleGroups() ([]RuleGroup, error) {
	var f struct {
		Groups []RuleGroup `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(alertRules, &f); err != nil {
		return nil, fmt.Errorf("decoding the embedded alert rules: %w", err)
	}
	if len(f.Groups) == 0 {
		return nil, fmt.Errorf("the embedded alert rules hold no group")
	}
	return f.Groups, nil
}

// AlertsPrometheusRule is the alerts as a PrometheusRule in the monitoring
// namespace. kube-prometheus-stack's Prometheus selects it as llmd
// installs the chart (every rule in every namespace, see
// addons.Monitoring.Values); the chart's Alertmanager routes what fires.
func AlertsPrometheusRule(namespace string) (kube.Object, error) {
	if namespace == "" {
		return kube.Object{}, fmt.Errorf("addons.monitoring.namespace: must be set")
	}
	groups, err := AlertRuleGroups()
	if err != nil {
		return kube.Object{}, err
	}
	return kube.FromApplyConfiguration(map[string]any{
		"apiVersion": PrometheusRuleKind.Group + "/" + PrometheusRuleKind.Version, "kind": PrometheusRuleKind.Kind,
		"metadata": map[string]any{"name": AlertsName, "namespace": namespace, "labels": map[string]string{
			"app.kubernetes.io/component": "alerts", "app.kubernetes.io/part-of": "llmd", "app.kubernetes.io/managed-by": "llmd"}},
		"spec": map[string]any{"groups": groups},
	})
}
