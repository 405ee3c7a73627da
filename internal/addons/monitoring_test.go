package addons

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func validMonitoring() Monitoring {
	return Monitoring{
		Version:            "1.0.0",
		NodeSelector:       map[string]string{"llmd.dev/pool": "system"},
		Tolerations:        []corev1.Toleration{{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists}},
		Retention:          "15d",
		StorageGiB:         50,
		StorageClass:       "gp3",
		GrafanaAdminSecret: "grafana-admin",
	}
}

func at(t *testing.T, v map[string]any, path ...string) any {
	t.Helper()
	var cur any = v
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			t.Fatalf("values: %s is not a map", strings.Join(path, "."))
		}
		cur = m[p]
	}
	return cur
}

func TestValuesSetWhatLLMDNeeds(t *testing.T) {
	m := validMonitoring()
	v := m.Values()
	spec := []string{"prometheus", "prometheusSpec"}
	for _, sel := range []string{"serviceMonitor", "podMonitor", "rule", "probe", "scrapeConfig"} {
		if got := at(t, v, append(spec, sel+"SelectorNilUsesHelmValues")...); got != false {
			t.Errorf("%sSelectorNilUsesHelmValues = %v, want false (select every release's monitors)", sel, got)
		}
	}
	if got := at(t, v, append(spec, "retention")...); got != "15d" {
		t.Errorf("retention = %v", got)
	}
	claim := at(t, v, append(spec, "storageSpec", "volumeClaimTemplate", "spec")...).(map[string]any)
	if claim["storageClassName"] != "gp3" || at(t, claim, "resources", "requests", "storage") != "50Gi" {
		t.Errorf("storage claim = %v", claim)
	}
	wantSel := map[string]any{"llmd.dev/pool": "system"}
	wantTol := []any{map[string]any{"key": "CriticalAddonsOnly", "operator": "Exists"}}
	for _, c := range [][]string{spec, {"alertmanager", "alertmanagerSpec"}, {"prometheusOperator"},
		{"prometheusOperator", "admissionWebhooks", "patch"}, {"kube-state-metrics"}, {"grafana"}} {
		if got := at(t, v, append(c, "nodeSelector")...); !reflect.DeepEqual(got, wantSel) {
			t.Errorf("%s.nodeSelector = %v", strings.Join(c, "."), got)
		}
		if got := at(t, v, append(c, "tolerations")...); !reflect.DeepEqual(got, wantTol) {
			t.Errorf("%s.tolerations = %#v", strings.Join(c, "."), got)
		}
	}
	if got := at(t, v, "grafana", "admin", "existingSecret"); got != "grafana-admin" {
		t.Errorf("grafana.admin.existingSecret = %v", got)
	}
	dash := at(t, v, "grafana", "sidecar", "dashboards").(map[string]any)
	want := map[string]any{"enabled": true, "label": DefaultDashboardLabel, "labelValue": "1", "searchNamespace": "ALL"}
	if !reflect.DeepEqual(dash, want) {
		t.Errorf("grafana.sidecar.dashboards = %v, want %v", dash, want)
	}
	if !reflect.DeepEqual(v, m.Values()) || m.ValuesHash() != m.ValuesHash() {
		t.Error("Values is not deterministic")
	}
	if m.ValuesHash() != valuesHash(normalize(v)) {
		t.Error("ValuesHash differs from the hash of the values as Helm stores them (JSON round trip)")
	}
}

func TestValuesOmitEmptyPlacementAndStorage(t *testing.T) {
	m := validMonitoring()
	m.NodeSelector, m.Tolerations, m.StorageGiB, m.StorageClass, m.Retention = nil, nil, 0, "", ""
	v := m.Values()
	spec := at(t, v, "prometheus", "prometheusSpec").(map[string]any)
	for _, k := range []string{"nodeSelector", "tolerations", "storageSpec", "retention"} {
		if _, ok := spec[k]; ok {
			t.Errorf("prometheusSpec.%s set although its field is empty (the chart default should hold)", k)
		}
	}
	if _, ok := at(t, v, "grafana").(map[string]any)["nodeSelector"]; ok {
		t.Error("grafana.nodeSelector set although NodeSelector is empty")
	}
}

func TestValidateNamesTheFieldAndTheFix(t *testing.T) {
	for _, tc := range []struct {
		name   string
		edit   func(*Monitoring)
		wantIn []string
	}{
		{"empty version", func(m *Monitoring) { m.Version = "" }, []string{"Version is empty", DefaultChartVersion}},
		{"version range", func(m *Monitoring) { m.Version = "^91.0.0" }, []string{"Version \"^91.0.0\"", "not a range"}},
		{"version with v", func(m *Monitoring) { m.Version = "v1.0.0" }, []string{"Version \"v1.0.0\""}},
		{"ftp repository", func(m *Monitoring) { m.Repository = "ftp://charts.example.com" }, []string{"Repository \"ftp://charts.example.com\"", "https, http or oci"}},
		{"repository without host", func(m *Monitoring) { m.Repository = "https:///charts" }, []string{"has no host"}},
		{"repository not a URL", func(m *Monitoring) { m.Repository = "://bad" }, []string{"Repository \"://bad\" is not a URL"}},
		{"repository with password", func(m *Monitoring) { m.Repository = "https://u:p@charts.example.com" }, []string{"credentials in the URL"}},
		{"chart path", func(m *Monitoring) { m.Chart = "prometheus-community/kube-prometheus-stack" }, []string{"Chart", "bare name"}},
		{"retention", func(m *Monitoring) { m.Retention = "15 days" }, []string{"Retention \"15 days\"", "\"15d\""}},
		{"negative storage", func(m *Monitoring) { m.StorageGiB = -1 }, []string{"StorageGiB -1"}},
		{"class without storage", func(m *Monitoring) { m.StorageGiB = 0 }, []string{"StorageClass \"gp3\" is set but StorageGiB is 0"}},
		{"no grafana secret", func(m *Monitoring) { m.GrafanaAdminSecret = "" }, []string{"GrafanaAdminSecret is empty", "admin-user", "admin-password"}},
		{"bad namespace", func(m *Monitoring) { m.Namespace = "Monitoring" }, []string{"Namespace \"Monitoring\""}},
		{"bad release", func(m *Monitoring) { m.Release = strings.Repeat("a", 54) }, []string{"Release", "53 characters"}},
		{"bad node selector", func(m *Monitoring) { m.NodeSelector = map[string]string{"pool": "sys tem"} }, []string{"NodeSelector pool=sys tem"}},
		{"bad dashboard label", func(m *Monitoring) { m.DashboardLabel = "grafana dashboard" }, []string{"DashboardLabel \"grafana dashboard\""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := validMonitoring()
			tc.edit(&m)
			err := m.Validate()
			if err == nil {
				t.Fatal("Validate accepted it")
			}
			for _, w := range tc.wantIn {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	if err := validMonitoring().Validate(); err != nil {
		t.Errorf("a valid Monitoring: %v", err)
	}
	oci := validMonitoring()
	oci.Repository = "oci://ghcr.io/prometheus-community/charts"
	if err := oci.Validate(); err != nil {
		t.Errorf("an OCI repository: %v", err)
	}
}

func TestDriftLinesAreSortedPathsWithoutSecrets(t *testing.T) {
	m := validMonitoring()
	deployed := normalize(m.Values())
	deployed["prometheus"].(map[string]any)["prometheusSpec"].(map[string]any)["retention"] = "10d"
	deployed["prometheus"].(map[string]any)["prometheusSpec"].(map[string]any)["nodeSelector"] = map[string]any{"llmd.dev/pool": "gpu"}
	deployed["grafana"].(map[string]any)["adminPassword"] = "hunter2"
	delete(deployed["grafana"].(map[string]any)["sidecar"].(map[string]any)["dashboards"].(map[string]any), "searchNamespace")
	s := Status{Chart: "kube-prometheus-stack", ChartVersion: "0.9.0", Status: "pending-upgrade"}
	got := drift(s, deployed, m.chartRelease())
	want := []string{
		"chart version 0.9.0, want 1.0.0",
		"status pending-upgrade",
		"values: grafana.adminPassword = (sensitive), want (unset)",
		"values: grafana.sidecar.dashboards.searchNamespace = (unset), want ALL",
		`values: prometheus.prometheusSpec.nodeSelector["llmd.dev/pool"] = gpu, want system`,
		"values: prometheus.prometheusSpec.retention = 10d, want 15d",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("drift:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if d := drift(Status{Chart: "kube-prometheus-stack", ChartVersion: "1.0.0", Status: "deployed"}, normalize(m.Values()), m.chartRelease()); len(d) != 0 {
		t.Errorf("drift of the desired values themselves: %v", d)
	}
}
