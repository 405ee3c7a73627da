package testenv

import (
	"embed"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"sigs.k8s.io/yaml"
)

//go:embed all:kpschart
var kpsChartFiles embed.FS

// KubePrometheusStack describes a test chart named kube-prometheus-stack,
// a small stand-in for the real one (which cannot be downloaded here):
//   - its "crds" subchart holds prometheus-operator's REAL CRDs (from the
//     Go module, see prometheusOperatorVersion) in crds/, where the real
//     chart keeps them;
//   - its templates read the value paths the real chart reads, so the values
//     llmd sets land where they would: a Prometheus and an Alertmanager object
//     (validated by the real CRDs) with retention, storage, nodeSelector,
//     tolerations and the monitor selectors; Deployments for the operator,
//     Prometheus (standing in for the operator's StatefulSet), Grafana (admin
//     from grafana.admin.existingSecret, dashboards sidecar settings as env)
//     and kube-state-metrics, each placed by its own nodeSelector/tolerations.
//
// On the test control plane the Deployments become ready once the nodes
// their selectors ask for exist (see AddSystemNodes). Building a chart reads
// 4 MB of CRDs: build each version once per test binary. In a test:
//
//	repo := testenv.StartChartRepo(t, testenv.KubePrometheusStack{Version: "1.0.0"}.Chart(t))
//	cluster.AddSystemNodes(t, "sys", 1) // for NodeSelector llmd.dev/pool=system
//	// write the Grafana admin Secret (keys admin-user, admin-password) in the release namespace
//	addons.Apply(ctx, cfg, addons.Monitoring{Repository: repo.URL, Version: "1.0.0", ...}, logf)
//
// The chart's CRDs are cluster-wide and stay after an uninstall; do not mix
// them with Cluster.InstallPrometheusOperatorCRD in one test binary (it
// deletes its CRD when its test ends).
type KubePrometheusStack struct {
	// Version is the chart version ("1.0.0"); AppVersion is prometheus-operator's.
	Version string
	// CRDMark, when set, replaces the operator.prometheus.io/version
	// annotation of every CRD (0.85.0 upstream), so a test sees which chart
	// version's CRDs the cluster serves, as a real operator bump changes them.
	CRDMark string
	// NeverReady makes the chart's default values add a Deployment whose pod
	// asks for a node no cluster has, so Helm's wait on the release never
	// ends: an upgrade to this version hangs until cancelled or timed out.
	NeverReady bool
}

// NeverReadyDeployment is the name suffix of the Deployment NeverReady adds
// (its full name is RELEASE-never-ready).
const NeverReadyDeployment = "never-ready"

// Chart builds the chart in memory; package and serve it with StartChartRepo.
func (k KubePrometheusStack) Chart(t testing.TB) *chart.Chart {
	t.Helper()
	ch := &chart.Chart{Metadata: &chart.Metadata{
		APIVersion:  chart.APIVersionV2,
		Name:        "kube-prometheus-stack",
		Version:     k.Version,
		AppVersion:  "v" + strings.TrimPrefix(prometheusOperatorVersion, "v"),
		Description: "Test stand-in for prometheus-community's kube-prometheus-stack (real CRDs, few templates)",
		Type:        "application",
		Dependencies: []*chart.Dependency{{
			Name: "crds", Version: "0.0.0", Condition: "crds.enabled",
		}},
	}}
	err := fs.WalkDir(kpsChartFiles, "kpschart", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := kpsChartFiles.ReadFile(path)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(path, "kpschart/")
		switch {
		case name == "values.yaml":
			if k.NeverReady {
				data = []byte(strings.Replace(string(data), "neverReady: false", "neverReady: true", 1))
			}
			ch.Raw = append(ch.Raw, &chart.File{Name: name, Data: data})
			ch.Values = map[string]any{}
			return yaml.Unmarshal(data, &ch.Values)
		case strings.HasPrefix(name, "templates/"):
			ch.Templates = append(ch.Templates, &chart.File{Name: name, Data: data})
		}
		return nil
	})
	if err != nil {
		t.Fatalf("testenv: reading the kube-prometheus-stack stand-in chart: %v", err)
	}
	ch.AddDependency(k.crdsSubchart(t))
	return ch
}

// crdsSubchart holds every prometheus-operator CRD of the module, as the
// real chart's charts/crds/crds/ does.
func (k KubePrometheusStack) crdsSubchart(t testing.TB) *chart.Chart {
	t.Helper()
	dir, err := prometheusOperatorCRDDir()
	if err != nil {
		unavailable(t, "prometheus-operator CRDs", err, "needs the Go module proxy (run .ci/run or make testenv once)")
	}
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("testenv: no CRDs in %s (%v)", dir, err)
	}
	sort.Strings(paths)
	sub := &chart.Chart{Metadata: &chart.Metadata{
		APIVersion: chart.APIVersionV2, Name: "crds", Version: "0.0.0",
		Description: "prometheus-operator " + prometheusOperatorVersion + " CRDs",
	}}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatalf("testenv: %v", err)
		}
		if k.CRDMark != "" {
			data = markCRD(t, data, k.CRDMark)
		}
		sub.Files = append(sub.Files, &chart.File{Name: "crds/" + filepath.Base(p), Data: data})
	}
	return sub
}

// CRDMarkAnnotation is the annotation CRDMark sets on every CRD.
const CRDMarkAnnotation = "operator.prometheus.io/version"

func markCRD(t testing.TB, data []byte, mark string) []byte {
	t.Helper()
	var obj map[string]any
	if err := yaml.Unmarshal(data, &obj); err != nil {
		t.Fatalf("testenv: decoding a CRD: %v", err)
	}
	meta, _ := obj["metadata"].(map[string]any)
	ann, _ := meta["annotations"].(map[string]any)
	if ann == nil {
		ann = map[string]any{}
		meta["annotations"] = ann
	}
	ann[CRDMarkAnnotation] = mark
	out, err := yaml.Marshal(obj)
	if err != nil {
		t.Fatalf("testenv: encoding a CRD: %v", err)
	}
	return out
}
