package workloads

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"

	"github.com/prometheus/common/model"

	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
)

// checkRule parses one alert's expression with Prometheus's PromQL parser,
// checks every metric it selects against what the product deploys (vLLM
// v0.30.0's series, the router's registry, kube-state-metrics and
// Prometheus's up) and returns the families it selects.
func checkRule(t *testing.T, name, expr, forDuration, severity string, annotations map[string]string, sets ...metricSet) []string {
	t.Helper()
	where := "alert " + name
	if !regexp.MustCompile(`^LLMD[A-Z][A-Za-z]+$`).MatchString(name) {
		t.Errorf("%s: name not LLMD<CamelCase>", where)
	}
	if forDuration != "" {
		if _, err := model.ParseDuration(forDuration); err != nil {
			t.Errorf("%s: for %q: %v", where, forDuration, err)
		}
	}
	if severity != "warning" && severity != "critical" {
		t.Errorf("%s: severity %q, want warning or critical", where, severity)
	}
	if len(annotations["summary"]) < 20 || len(annotations["description"]) < 60 {
		t.Errorf("%s: summary %q and description %q: say what broke and what to check", where, annotations["summary"], annotations["description"])
	}
	for k, text := range annotations {
		// Prometheus expands annotations as Go templates with $labels and $value.
		if _, err := template.New(k).Parse("{{$labels := .Labels}}{{$value := .Value}}" + text); err != nil {
			t.Errorf("%s: annotation %s: %v", where, k, err)
		}
	}
	return checkSelects(t, where, expr, sets...)
}

// TestAlertRules: the fleet's and the router's PrometheusRules carry the
// on-call's alerts (a fleet pod not ready, KV cache full with requests
// waiting, a staging Job failed, the router's pods out or silent), each
// expression parsed by Prometheus's parser and selecting only series vLLM,
// kube-state-metrics and Prometheus itself export.
func TestAlertRules(t *testing.T) {
	vllm := vllmMetrics(t)
	f := stagedFleet("vllm/vllm-openai:v0.30.0", testCommit)
	r := testRouter()
	for _, tc := range []struct {
		alerts []alert
		obj    func() (kube.Object, error)
		want   []string
	}{
		{f.fleetAlerts(), f.AlertRule, []string{"LLMDFleetPodNotReady", "LLMDFleetKVCacheFull", "LLMDStagingJobFailed"}},
		{r.routerAlerts(), r.AlertRule, []string{"LLMDRouterDown", "LLMDRouterPodsOut", "LLMDRouterSilent"}},
	} {
		var names []string
		for _, a := range tc.alerts {
			names = append(names, a.Name)
			checkRule(t, a.Name, a.Expr, a.For, a.Severity, map[string]string{"summary": a.Summary, "description": a.Description}, vllm, kubeStateMetrics)
		}
		if !slices.Equal(names, tc.want) {
			t.Errorf("alerts %v, want %v", names, tc.want)
		}
		o, err := tc.obj()
		if err != nil || o.Ref.Kind != PrometheusRuleKind.Kind || o.Ref.Group != PrometheusRuleKind.Group {
			t.Errorf("rule object %v: %v", o.Ref, err)
		}
	}
	if got := len(testFleet().fleetAlerts()); got != 2 {
		t.Errorf("a fleet without staging has %d alerts, want no staging alert", got)
	}
}

// TestClusterAlertRules: the cluster-wide rules (llmd-alerts) parse, select
// only the router's real series, and cover an engine out of scoring, without
// KV events, with its load unread, or none ready.
func TestClusterAlertRules(t *testing.T) {
	router := routerMetrics(t)
	groups, err := AlertRuleGroups()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var selected []string
	for _, g := range groups {
		if g.Name == "" || len(g.Rules) == 0 {
			t.Errorf("group %q has no name or no rules", g.Name)
		}
		for _, r := range g.Rules {
			if seen[r.Alert] {
				t.Errorf("alert %s repeated", r.Alert)
			}
			seen[r.Alert] = true
			selected = append(selected, checkRule(t, r.Alert, r.Expr, r.For, r.Labels["severity"], r.Annotations, router)...)
		}
	}
	for _, want := range []string{"LLMDRouterNoReadyEngines", "LLMDRouterEngineOutOfScoring", "LLMDRouterEngineKVEventsSilent", "LLMDRouterEngineLoadStale"} {
		if !seen[want] {
			t.Errorf("no alert %s", want)
		}
	}
	for _, m := range []string{"llmd_router_pods", "llmd_router_pod_circuit", "llmd_router_pod_kv_events_silent", "llmd_router_pod_load_stale"} {
		if !slices.Contains(selected, m) {
			t.Errorf("no alert selects %s", m)
		}
	}
}

func TestAlertsPrometheusRule(t *testing.T) {
	o, err := AlertsPrometheusRule("monitoring")
	if err != nil {
		t.Fatal(err)
	}
	if want := (kube.Ref{Group: "monitoring.coreos.com", Version: "v1", Kind: "PrometheusRule", Namespace: "monitoring", Name: AlertsName}); o.Ref != want {
		t.Errorf("ref %+v", o.Ref)
	}
	spec, _ := o.Body().Object["spec"].(map[string]any)
	groups, _ := spec["groups"].([]any)
	want, err := AlertRuleGroups()
	if err != nil {
		t.Fatal(err)
	}
	if len(groups) != len(want) {
		t.Fatalf("spec.groups %v, want the %d embedded groups", spec, len(want))
	}
	if _, err := AlertsPrometheusRule(""); err == nil || !strings.Contains(err.Error(), "addons.monitoring.namespace") {
		t.Errorf("empty namespace: %v", err)
	}
}
