package addons

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// The chart versions the tests serve from the stand-in repository: v2
// changes every CRD (as an operator bump does), and "stuck" never becomes
// ready (its extra Deployment asks for a node that does not exist).
const (
	v1          = "1.0.0"
	v2          = "2.0.0"
	stuck       = "1.5.0"
	v2Mark      = "0.85.0-test-v2"
	releaseName = "kps"
)

var prometheusGVR = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheuses"}

type fixture struct {
	t    *testing.T
	c    *testenv.Cluster
	cfg  *rest.Config
	repo *testenv.ChartRepo
	m    Monitoring
	dyn  dynamic.Interface

	mu   sync.Mutex
	done bool
	logs []string
}

// charts builds the stand-in chart versions once per test binary (reading
// and packaging 4 MB of real CRDs is the slow part).
var (
	chartsOnce sync.Once
	charts     []*chart.Chart
)

// setup gives a test its namespace with the Grafana admin Secret, a system
// node for the stack to land on, the stand-in repository serving v1, v2 and
// the stuck version, and a Monitoring aimed at them.
func setup(t *testing.T) *fixture {
	t.Helper()
	c := testenv.StartCluster(t)
	chartsOnce.Do(func() {
		charts = []*chart.Chart{
			testenv.KubePrometheusStack{Version: v1}.Chart(t),
			testenv.KubePrometheusStack{Version: v2, CRDMark: v2Mark}.Chart(t),
			testenv.KubePrometheusStack{Version: stuck, NeverReady: true}.Chart(t),
		}
	})
	f := &fixture{t: t, c: c, repo: testenv.StartChartRepo(t, charts...)}
	c.AddSystemNodes(t, strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-")), 1)
	ns := c.Namespace(t)
	_, err := c.Client.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "grafana-admin"},
		StringData: map[string]string{GrafanaAdminUserKey: "admin", GrafanaAdminPasswordKey: "not-in-helm"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The token travels only in a transport wrapper, as the EKS token does:
	// if Helm's client lost WrapTransport, every request would be refused.
	f.cfg = c.RESTConfig()
	token := f.cfg.BearerToken
	f.cfg.BearerToken = ""
	f.cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			req = req.Clone(req.Context())
			req.Header.Set("Authorization", "Bearer "+token)
			return rt.RoundTrip(req)
		})
	}
	f.dyn, err = dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	f.m = Monitoring{
		Namespace:          ns,
		Release:            releaseName,
		Repository:         f.repo.URL,
		Version:            v1,
		NodeSelector:       map[string]string{testenv.SystemNodeLabel: "system"},
		Tolerations:        []corev1.Toleration{{Key: "CriticalAddonsOnly", Operator: corev1.TolerationOpExists}},
		Retention:          "15d",
		StorageGiB:         20,
		StorageClass:       "gp3",
		GrafanaAdminSecret: "grafana-admin",
		Timeout:            90 * time.Second,
	}
	t.Cleanup(func() {
		f.mu.Lock()
		f.done = true
		f.mu.Unlock()
	})
	return f
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (f *fixture) logf(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done {
		return
	}
	line := fmt.Sprintf(format, args...)
	f.logs = append(f.logs, line)
	if !strings.HasPrefix(line, "helm: ") {
		f.t.Log("apply: " + line)
	}
}

func (f *fixture) logged(substr string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.ContainsFunc(f.logs, func(l string) bool { return strings.Contains(l, substr) })
}

func (f *fixture) apply(t *testing.T, m Monitoring) Status {
	t.Helper()
	began := time.Now()
	s, err := Apply(context.Background(), f.cfg, m, f.logf)
	if err != nil {
		t.Fatalf("Apply %s: %v", m.Version, err)
	}
	t.Logf("Apply %s: revision %d %s in %s", m.Version, s.Revision, s.Status, time.Since(began).Round(time.Millisecond))
	return s
}

func (f *fixture) read(t *testing.T, m Monitoring) (*Status, []string) {
	t.Helper()
	s, d, err := Read(context.Background(), f.cfg, m)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	return s, d
}

func (f *fixture) crd(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	crd, err := f.dyn.Resource(crdResource).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("CRD %s: %v", name, err)
	}
	return crd
}

func (f *fixture) deployment(t *testing.T, component string) (*corev1.PodSpec, error) {
	t.Helper()
	d, err := f.c.Client.AppsV1().Deployments(f.m.Namespace).Get(context.Background(), releaseName+"-"+component, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return &d.Spec.Template.Spec, nil
}

// helmHomeUntouched points every directory Helm could use at an empty one
// and returns a check that it stayed empty.
func helmHomeUntouched(t *testing.T) func() {
	home := t.TempDir()
	for _, v := range []string{"HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "HELM_CONFIG_HOME", "HELM_CACHE_HOME", "HELM_DATA_HOME"} {
		t.Setenv(v, home)
	}
	return func() {
		t.Helper()
		var found []string
		filepath.WalkDir(home, func(p string, d os.DirEntry, err error) error {
			if p != home {
				found = append(found, p)
			}
			return nil
		})
		if len(found) > 0 {
			t.Errorf("Apply wrote into the user's Helm/XDG home: %v", found)
		}
	}
}

func TestApplyInstallsUpgradesAndUninstalls(t *testing.T) {
	f := setup(t)
	untouched := helmHomeUntouched(t)
	ctx := context.Background()

	s := f.apply(t, f.m)
	untouched()
	if s.Revision != 1 || s.Status != "deployed" || s.ChartVersion != v1 || s.Chart != "kube-prometheus-stack" || s.AppVersion != "v0.85.0" {
		t.Errorf("after install: %+v", s)
	}
	if s.ValuesHash != f.m.ValuesHash() {
		t.Errorf("ValuesHash %s, want %s (the values Apply set)", s.ValuesHash, f.m.ValuesHash())
	}
	// Every real prometheus-operator CRD of the chart is served and managed by llmd.
	for _, plural := range []string{"servicemonitors", "podmonitors", "prometheusrules", "prometheuses", "alertmanagers", "probes", "scrapeconfigs", "thanosrulers", "prometheusagents", "alertmanagerconfigs"} {
		crd := f.crd(t, plural+".monitoring.coreos.com")
		if ok, _ := crdCondition(crd, "Established"); !ok {
			t.Errorf("CRD %s not Established", plural)
		}
		if !slices.ContainsFunc(crd.GetManagedFields(), func(mf metav1.ManagedFieldsEntry) bool {
			return mf.Manager == "llmd" && mf.Operation == metav1.ManagedFieldsOperationApply
		}) {
			t.Errorf("CRD %s is not server-side applied by llmd: %v", plural, crd.GetManagedFields())
		}
	}
	// Served: a user's ServiceMonitor is accepted (and must survive uninstall).
	sm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
		"metadata": map[string]any{"name": "vllm", "namespace": f.m.Namespace},
		"spec": map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "vllm"}},
			"endpoints": []any{map[string]any{"port": "metrics"}}},
	}}
	smGVR := schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "servicemonitors"}
	if _, err := f.dyn.Resource(smGVR).Namespace(f.m.Namespace).Create(ctx, sm, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a ServiceMonitor: %v", err)
	}

	// The values land where the real chart reads them (the Prometheus object is validated by the real CRD).
	prom, err := f.dyn.Resource(prometheusGVR).Namespace(f.m.Namespace).Get(ctx, releaseName+"-prometheus", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := prom.Object["spec"].(map[string]any)
	if spec["retention"] != "15d" {
		t.Errorf("Prometheus retention %v", spec["retention"])
	}
	for _, sel := range []string{"serviceMonitorSelector", "podMonitorSelector", "ruleSelector", "probeSelector", "scrapeConfigSelector"} {
		if m, ok := spec[sel].(map[string]any); !ok || len(m) != 0 {
			t.Errorf("Prometheus %s = %v, want {} (every release's objects)", sel, spec[sel])
		}
	}
	if v, _, _ := unstructured.NestedString(spec, "storage", "volumeClaimTemplate", "spec", "resources", "requests", "storage"); v != "20Gi" {
		t.Errorf("Prometheus storage %q, want 20Gi", v)
	}
	if v, _, _ := unstructured.NestedString(spec, "storage", "volumeClaimTemplate", "spec", "storageClassName"); v != "gp3" {
		t.Errorf("Prometheus storage class %q, want gp3", v)
	}
	if v, _, _ := unstructured.NestedString(spec, "nodeSelector", testenv.SystemNodeLabel); v != "system" {
		t.Errorf("Prometheus nodeSelector %v", spec["nodeSelector"])
	}
	for _, comp := range []string{"prometheus", "operator", "grafana", "kube-state-metrics"} {
		pod, err := f.deployment(t, comp)
		if err != nil {
			t.Fatal(err)
		}
		if pod.NodeSelector[testenv.SystemNodeLabel] != "system" || len(pod.Tolerations) != 1 || pod.Tolerations[0].Key != "CriticalAddonsOnly" {
			t.Errorf("%s placed by %v / %v", comp, pod.NodeSelector, pod.Tolerations)
		}
	}
	grafana, _ := f.deployment(t, "grafana")
	env := map[string]string{}
	for _, c := range grafana.Containers {
		for _, e := range c.Env {
			env[e.Name] = e.Value
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				env[e.Name] = e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
			}
		}
	}
	for k, want := range map[string]string{"GF_SECURITY_ADMIN_PASSWORD": "grafana-admin/admin-password", "GF_SECURITY_ADMIN_USER": "grafana-admin/admin-user",
		"ENABLED": "true", "LABEL": DefaultDashboardLabel, "LABEL_VALUE": "1", "NAMESPACE": "ALL"} {
		if env[k] != want {
			t.Errorf("grafana env %s = %q, want %q", k, env[k], want)
		}
	}
	if got, d := f.read(t, f.m); got == nil || len(d) != 0 {
		t.Errorf("Read after install: %+v, drift %v", got, d)
	}

	// Upgrade to v2: its changed CRDs land before the chart upgrade (Helm itself never upgrades CRDs).
	up := f.m
	up.Version = v2
	if _, d := f.read(t, up); !slices.Equal(d, []string{"chart version 1.0.0, want 2.0.0"}) {
		t.Errorf("Read before the upgrade: drift %v", d)
	}
	s = f.apply(t, up)
	if s.Revision != 2 || s.Status != "deployed" || s.ChartVersion != v2 {
		t.Errorf("after upgrade: %+v", s)
	}
	for _, plural := range []string{"servicemonitors", "prometheuses"} {
		if got := f.crd(t, plural+".monitoring.coreos.com").GetAnnotations()[testenv.CRDMarkAnnotation]; got != v2Mark {
			t.Errorf("CRD %s annotation %s = %q after the upgrade, want v2's %q", plural, testenv.CRDMarkAnnotation, got, v2Mark)
		}
	}

	// Uninstall: the release and its objects go, the CRDs and the users' monitors stay.
	if err := Uninstall(ctx, f.cfg, up); err != nil {
		t.Fatalf("Uninstall: %v", err)
	}
	if got, d := f.read(t, up); got != nil || d != nil {
		t.Errorf("Read after uninstall: %+v %v", got, d)
	}
	if _, err := f.deployment(t, "grafana"); !apierrors.IsNotFound(err) {
		t.Errorf("grafana Deployment after uninstall: %v", err)
	}
	f.crd(t, "servicemonitors.monitoring.coreos.com")
	if _, err := f.dyn.Resource(smGVR).Namespace(f.m.Namespace).Get(ctx, "vllm", metav1.GetOptions{}); err != nil {
		t.Errorf("the user's ServiceMonitor after uninstall: %v", err)
	}
	if err := Uninstall(ctx, f.cfg, up); err != nil {
		t.Errorf("Uninstall with no release: %v", err)
	}
}

func TestReadReportsValuesDriftAndApplyRepairsIt(t *testing.T) {
	f := setup(t)
	f.apply(t, f.m)

	// Another actor runs helm upgrade --reuse-values with other values.
	hc, err := newHelm(context.Background(), f.cfg, f.m.Namespace, nil)
	if err != nil {
		t.Fatal(err)
	}
	other := action.NewUpgrade(hc)
	other.Namespace = f.m.Namespace
	other.ReuseValues = true
	other.SkipCRDs = true
	last, err := hc.Releases.Last(releaseName)
	if err != nil {
		t.Fatal(err)
	}
	_, err = other.Run(releaseName, last.Chart, map[string]any{
		"prometheus": map[string]any{"prometheusSpec": map[string]any{"retention": "10d"}},
		"grafana":    map[string]any{"adminPassword": "hunter2"},
	})
	if err != nil {
		t.Fatalf("the other actor's helm upgrade: %v", err)
	}

	s, d := f.read(t, f.m)
	want := []string{
		"values: grafana.adminPassword = (sensitive), want (unset)",
		"values: prometheus.prometheusSpec.retention = 10d, want 15d",
	}
	if !slices.Equal(d, want) {
		t.Errorf("drift %q, want %q", d, want)
	}
	if s.ValuesHash == f.m.ValuesHash() || s.Revision != 2 {
		t.Errorf("status after the other actor's upgrade: %+v", s)
	}
	if strings.Contains(strings.Join(d, " "), "hunter2") {
		t.Error("drift prints a password")
	}

	s2 := f.apply(t, f.m)
	if s2.ValuesHash != f.m.ValuesHash() || s2.Revision != 3 {
		t.Errorf("after repair: %+v", s2)
	}
	if _, d := f.read(t, f.m); len(d) != 0 {
		t.Errorf("drift after repair: %v", d)
	}
}

// interrupt runs Apply of m in the background, cancels it once Helm is
// waiting on the never-ready Deployment, and returns Apply's error.
func (f *fixture) interrupt(t *testing.T, m Monitoring, wantStatus string) error {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := Apply(ctx, f.cfg, m, f.logf)
		errc <- err
	}()
	deadline := time.Now().Add(60 * time.Second)
	for {
		s, _, err := Read(context.Background(), f.cfg, m)
		_, derr := f.deployment(t, testenv.NeverReadyDeployment)
		if err == nil && s != nil && s.Status == wantStatus && derr == nil {
			break
		}
		select {
		case err := <-errc:
			t.Fatalf("Apply %s ended before it could be interrupted: %v", m.Version, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("release never %s with the never-ready Deployment created (last: %+v, %v, %v)", wantStatus, s, err, derr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-errc:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("Apply did not return within 10s of its context being cancelled")
	}
	return nil
}

func TestApplyRecoversAnInterruptedUpgrade(t *testing.T) {
	f := setup(t)
	f.apply(t, f.m)

	hang := f.m
	hang.Version = stuck
	err := f.interrupt(t, hang, "pending-upgrade")
	if err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("interrupted Apply returned %v, want a context cancelled error", err)
	}
	// As after a killed terraform: nothing more was written, Helm holds the release.
	time.Sleep(time.Second)
	s, d := f.read(t, hang)
	if s == nil || s.Status != "pending-upgrade" || s.Revision != 2 || !slices.Contains(d, "status pending-upgrade") {
		t.Fatalf("after the interruption: %+v, drift %v", s, d)
	}

	up := f.m
	up.Version = v2
	s2 := f.apply(t, up)
	if s2.Status != "deployed" || s2.ChartVersion != v2 || s2.Revision != 4 {
		t.Errorf("after recovery: %+v (want deployed 2.0.0 at revision 4: 3 is the rollback to 1)", s2)
	}
	if !f.logged("left pending-upgrade at revision 2 by an interrupted earlier apply: rolling back to deployed revision 1") {
		t.Errorf("recovery not logged: %q", f.logs)
	}
	if _, err := f.deployment(t, testenv.NeverReadyDeployment); !apierrors.IsNotFound(err) {
		t.Errorf("the interrupted upgrade's Deployment after recovery: %v", err)
	}
	if _, d := f.read(t, up); len(d) != 0 {
		t.Errorf("drift after recovery: %v", d)
	}
}

func TestApplyRecoversAnInterruptedInstall(t *testing.T) {
	f := setup(t)
	hang := f.m
	hang.Version = stuck
	if err := f.interrupt(t, hang, "pending-install"); err == nil {
		t.Error("interrupted Apply returned no error")
	}
	time.Sleep(time.Second)
	if s, _ := f.read(t, hang); s == nil || s.Status != "pending-install" {
		t.Fatalf("after the interruption: %+v", s)
	}
	s := f.apply(t, f.m)
	if s.Status != "deployed" || s.Revision != 1 || s.ChartVersion != v1 {
		t.Errorf("after recovery: %+v (want a fresh install, revision 1)", s)
	}
	if !f.logged("left pending-install at revision 1 by an interrupted earlier apply: uninstalling it, then installing again") {
		t.Errorf("recovery not logged: %q", f.logs)
	}
	if _, err := f.deployment(t, testenv.NeverReadyDeployment); !apierrors.IsNotFound(err) {
		t.Errorf("the interrupted install's Deployment after recovery: %v", err)
	}
}

func TestApplyUpgradesAFailedRelease(t *testing.T) {
	f := setup(t)
	hang := f.m
	hang.Version = stuck
	hang.Timeout = 5 * time.Second
	s, err := Apply(context.Background(), f.cfg, hang, f.logf)
	if err == nil || s.Status != "failed" || s.Revision != 1 {
		t.Fatalf("Apply of a never-ready chart: %+v, %v; want a failed revision 1 and an error", s, err)
	}
	t.Logf("Apply of the never-ready chart: %v", err)
	// The error says why, in the scheduler's words, not only that Helm's wait timed out.
	if !strings.Contains(err.Error(), "Deployment "+f.m.Namespace+"/"+releaseName+"-"+testenv.NeverReadyDeployment) || !strings.Contains(err.Error(), "node affinity/selector") {
		t.Errorf("the error does not say which Deployment is not ready and why: %v", err)
	}

	// The failed release is upgraded, never replaced; here the upgrade is
	// interrupted too, leaving a pending upgrade with no deployed revision to roll back to.
	hang.Timeout = f.m.Timeout
	f.interrupt(t, hang, "pending-upgrade")
	time.Sleep(time.Second)
	s = f.apply(t, f.m)
	if s.Status != "deployed" || s.Revision != 3 || s.ChartVersion != v1 {
		t.Errorf("after the failed install and the interrupted upgrade: %+v (want an upgrade to revision 3, not a replacement)", s)
	}
	if !f.logged("left pending-upgrade at revision 2 by an interrupted earlier apply and has no deployed revision: marking it failed, then upgrading") {
		t.Errorf("recovery not logged: %q", f.logs)
	}
}

func TestApplyBadInputNamesTheField(t *testing.T) {
	f := setup(t)
	ctx := context.Background()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unreachable := "http://" + closed.Addr().String() + "/charts"
	closed.Close()

	for _, tc := range []struct {
		name   string
		edit   func(*Monitoring)
		wantIn []string
	}{
		{"empty version", func(m *Monitoring) { m.Version = "" }, []string{"Version is empty"}},
		{"bad repository URL", func(m *Monitoring) { m.Repository = "ftp://charts" }, []string{"Repository \"ftp://charts\""}},
		{"unreachable repository", func(m *Monitoring) { m.Repository = unreachable }, []string{"reading the index of chart repository " + unreachable}},
		{"version not in the repository", func(m *Monitoring) { m.Version = "9.9.9" }, []string{"version 9.9.9 is not in repository " + f.repo.URL, "2.0.0, 1.5.0, 1.0.0"}},
		{"chart not in the repository", func(m *Monitoring) { m.Chart = "grafana" }, []string{"chart \"grafana\" is not in repository"}},
		{"missing Grafana secret", func(m *Monitoring) { m.GrafanaAdminSecret = "nope" }, []string{"GrafanaAdminSecret: Secret " + f.m.Namespace + "/nope does not exist"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := f.m
			tc.edit(&m)
			_, err := Apply(ctx, f.cfg, m, f.logf)
			if err == nil {
				t.Fatal("Apply accepted it")
			}
			for _, w := range tc.wantIn {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
	if s, _ := f.read(t, f.m); s != nil {
		t.Errorf("bad input left a release: %+v", s)
	}
}

func TestApplyFromAnOCIRegistry(t *testing.T) {
	f := setup(t)
	m := f.m
	m.Repository = testenv.StartOCIRegistry(t, charts[0])
	s := f.apply(t, m)
	if s.Status != "deployed" || s.ChartVersion != v1 {
		t.Errorf("after install from %s: %+v", m.Repository, s)
	}
	if _, d := f.read(t, m); len(d) != 0 {
		t.Errorf("drift: %v", d)
	}
	m.Version = v2
	if _, err := Apply(context.Background(), f.cfg, m, f.logf); err == nil || !strings.Contains(err.Error(), "pulling chart kube-prometheus-stack 2.0.0 from "+m.Repository) {
		t.Errorf("Apply of a version the registry lacks: %v", err)
	}
}
