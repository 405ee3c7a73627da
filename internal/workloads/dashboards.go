package workloads

import (
	"embed"
	"encoding/json"
	"fmt"
	"path"
	"sort"
	"strings"

	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
)

// dashboardFiles are Grafana dashboards authored for llmd: one for the vLLM
// fleet (metric names as vLLM exposes them), one for the router (the
// router's own collectors).
//
//go:embed dashboards/*.json
var dashboardFiles embed.FS

// Grafana's dashboard sidecar in kube-prometheus-stack loads every
// ConfigMap carrying this label (its chart's default label and value).
const (
	DashboardLabel      = "grafana_dashboard"
	DashboardLabelValue = "1"
)

// Dashboard is one embedded dashboard.
type Dashboard struct {
	// Name is the file's base name: "vllm", "router".
	Name string
	JSON []byte
}

// Dashboards are the embedded dashboards, sorted by name.
func Dashboards() ([]Dashboard, error) {
	entries, err := dashboardFiles.ReadDir("dashboards")
	if err != nil {
		return nil, fmt.Errorf("reading the embedded dashboards: %w", err)
	}
	var out []Dashboard
	for _, e := range entries {
		b, err := dashboardFiles.ReadFile(path.Join("dashboards", e.Name()))
		if err != nil {
			return nil, fmt.Errorf("reading dashboard %s: %w", e.Name(), err)
		}
		if !json.Valid(b) {
			return nil, fmt.Errorf("dashboard %s is not valid JSON", e.Name())
		}
		out = append(out, Dashboard{Name: strings.TrimSuffix(e.Name(), ".json"), JSON: b})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// DashboardConfigMaps are the dashboards as ConfigMaps in the monitoring
// namespace, labelled for Grafana's sidecar: `llmd-dashboard-<name>`, one
// `<name>.json` key each.
func DashboardConfigMaps(namespace string) ([]kube.Object, error) {
	if namespace == "" {
		return nil, fmt.Errorf("addons.monitoring.namespace: must be set")
	}
	ds, err := Dashboards()
	if err != nil {
		return nil, err
	}
	labels := map[string]string{
		DashboardLabel:                 DashboardLabelValue,
		"app.kubernetes.io/component":  "dashboard",
		"app.kubernetes.io/part-of":    "llmd",
		"app.kubernetes.io/managed-by": "llmd",
	}
	var out []kube.Object
	for _, d := range ds {
		o, err := kube.FromApplyConfiguration(corev1ac.ConfigMap("llmd-dashboard-"+d.Name, namespace).WithLabels(labels).
			WithData(map[string]string{d.Name + ".json": string(d.JSON)}))
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}
