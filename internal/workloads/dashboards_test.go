package workloads

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// grafanaDashboard is the part of Grafana's dashboard model the test reads.
type grafanaDashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []grafanaPanel `json:"panels"`
}

type grafanaPanel struct {
	ID         int    `json:"id"`
	Title      string `json:"title"`
	Datasource struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	// Panels are a collapsed row's panels.
	Panels []grafanaPanel `json:"panels"`
}

// queries are every PromQL expression of the dashboard: the variables'
// queries and each panel's targets, by where they are.
func (g grafanaDashboard) queries() map[string]string {
	out := map[string]string{}
	for _, v := range g.Templating.List {
		switch q := v.Query.(type) {
		case string:
			if v.Type == "query" {
				out["variable "+v.Name] = q
			}
		case map[string]any:
			if s, ok := q["query"].(string); ok {
				out["variable "+v.Name] = s
			}
		}
	}
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				out[fmt.Sprintf("panel %q target %s", p.Title, tg.RefID)] = tg.Expr
			}
			walk(p.Panels)
		}
	}
	walk(g.Panels)
	return out
}

// TestDashboardsQueryRealMetrics parses every query of both dashboards with
// Prometheus's PromQL parser and checks that each metric it selects is one
// vLLM v0.30.0 exposes (from its source) or the router's collectors
// register, so a renamed or removed series fails here, not on a blank panel.
func TestDashboardsQueryRealMetrics(t *testing.T) {
	vllm, router := vllmMetrics(t), routerMetrics(t)
	ds, err := Dashboards()
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 || ds[0].Name != "router" || ds[1].Name != "vllm" {
		t.Fatalf("dashboards %v, want router and vllm", ds)
	}
	// What an operator needs to see on each, at the least.
	wantShown := map[string][]string{
		"vllm": {"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc", "vllm:prefix_cache_hits",
			"vllm:prefix_cache_queries", "vllm:time_to_first_token_seconds", "vllm:request_time_per_output_token_seconds"},
		"router": {"llmd_router_decisions_total", "llmd_router_prefix_blocks_matched_ratio", "llmd_router_upstream_first_byte_seconds",
			"llmd_router_pod_in_flight", "llmd_router_pod_pending_prefill_tokens", "llmd_router_pod_circuit", "llmd_router_pod_kv_events_silent"},
	}
	for _, d := range ds {
		var g grafanaDashboard
		if err := json.Unmarshal(d.JSON, &g); err != nil {
			t.Fatalf("%s: %v", d.Name, err)
		}
		if g.UID == "" || g.Title == "" || len(g.Panels) == 0 || len(g.Templating.List) == 0 || g.Templating.List[0].Name != "datasource" {
			t.Fatalf("%s: uid %q title %q, %d panels, variables %+v", d.Name, g.UID, g.Title, len(g.Panels), g.Templating.List)
		}
		ids := map[int]bool{}
		for _, p := range g.Panels {
			if ids[p.ID] || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
				t.Errorf("%s panel %d %q: duplicate id, datasource %q or no targets", d.Name, p.ID, p.Title, p.Datasource.UID)
			}
			ids[p.ID] = true
		}
		var shown []string
		for where, expr := range g.queries() {
			shown = append(shown, checkSelects(t, d.Name+" "+where, expr, vllm, router)...)
		}
		for _, m := range wantShown[d.Name] {
			if !slices.Contains(shown, m) {
				t.Errorf("%s: no panel shows %s", d.Name, m)
			}
		}
	}
}

func TestDashboardConfigMaps(t *testing.T) {
	objs, err := DashboardConfigMaps("monitoring")
	if err != nil {
		t.Fatal(err)
	}
	var cm corev1.ConfigMap
	find(t, objs, "ConfigMap", "monitoring", "llmd-dashboard-vllm", &cm)
	if cm.Labels[DashboardLabel] != "1" || !json.Valid([]byte(cm.Data["vllm.json"])) {
		t.Errorf("ConfigMap labels %v, keys %v", cm.Labels, cm.Data)
	}
	find(t, objs, "ConfigMap", "monitoring", "llmd-dashboard-router", &cm)
	if _, err := DashboardConfigMaps(""); err == nil || !strings.Contains(err.Error(), "addons.monitoring.namespace") {
		t.Errorf("empty namespace: %v", err)
	}
}
