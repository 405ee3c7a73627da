package vllmcontract

import (
	"fmt"
	"maps"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
)

// testRouterSpec is the llmd_router in front of the test fleet, as the
// provider would deploy it: its ServiceMonitor and PrometheusRule are what
// the monitoring test reads.
func testRouterSpec(f workloads.Fleet) workloads.Router {
	return workloads.Router{Name: "router", Namespace: f.Namespace, Image: "ghcr.io/llmd-dev/llmd-router:test", Replicas: 1,
		Target: f.Target(), Scorers: config.DefaultScorers(), LogLevel: "info",
		Limits:    workloads.RouterLimits{MaxQueue: 1024, QueueTimeout: 30 * time.Second, Drain: time.Minute},
		Service:   workloads.Exposure{Type: "ClusterIP", Port: workloads.RouterPort},
		Resources: workloads.RouterResources{CPU: "1", Memory: "1Gi", MemoryLimit: "2Gi"}}
}

// fleetScrapeTarget is engine e as prometheus-operator scrapes it through
// the fleet's PodMonitor: namespace, pod, container, endpoint (the port's
// name) and job (<namespace>/<PodMonitor name>), from the objects the
// provider applies.
func fleetScrapeTarget(t *testing.T, f workloads.Fleet, e *testenv.Engine) testenv.ScrapeTarget {
	t.Helper()
	// What rendering needs and the labels do not depend on.
	f.VLLM.Image, f.Storage.ExistingClaim, f.Replicas = "vllm/vllm-openai:"+testenv.VLLMVersion, "weights", 1
	f.Resources = workloads.Resources{CPU: "1", Memory: "4Gi", MemoryLimit: "4Gi", Shm: "1Gi"}
	f.Rollout = workloads.Rollout{MaxUnavailable: 1, StartupSeconds: 600}
	objs, err := f.Objects(true)
	if err != nil {
		t.Fatalf("rendering fleet %s: %v", f.Name, err)
	}
	pm := findObject(t, objs, workloads.PodMonitorKind.Kind)
	return testenv.ScrapeTarget{URL: e.URL, Labels: map[string]string{
		"namespace": pm.GetNamespace(), "pod": e.Name, "container": containerName(t, objs),
		"endpoint": firstEndpointPort(t, pm, "podMetricsEndpoints"), "job": pm.GetNamespace() + "/" + pm.GetName()}}
}

// routerScrapeTarget is the router at url, as pod `pod` of r, scraped
// through r's ServiceMonitor: namespace, service, pod, container, endpoint
// and job (the Service's name).
func routerScrapeTarget(t *testing.T, r workloads.Router, url, pod string) testenv.ScrapeTarget {
	t.Helper()
	objs, err := r.Objects(true)
	if err != nil {
		t.Fatalf("rendering router %s: %v", r.Name, err)
	}
	sm := findObject(t, objs, workloads.ServiceMonitorKind.Kind)
	svc := findObject(t, objs, "Service")
	return testenv.ScrapeTarget{URL: url, Labels: map[string]string{
		"namespace": sm.GetNamespace(), "service": svc.GetName(), "pod": pod, "container": containerName(t, objs),
		"endpoint": firstEndpointPort(t, sm, "endpoints"), "job": svc.GetName()}}
}

// findObject is the only object of kind among objs.
func findObject(t *testing.T, objs []kube.Object, kind string) *unstructured.Unstructured {
	t.Helper()
	var found []kube.Object
	for _, o := range objs {
		if o.Kind == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d objects of kind %s in %v, want one", len(found), kind, kube.Refs(objs))
	}
	return found[0].Body()
}

// containerName is the first container of the objects' Deployment.
func containerName(t *testing.T, objs []kube.Object) string {
	t.Helper()
	cs, _, err := unstructured.NestedSlice(findObject(t, objs, "Deployment").Object, "spec", "template", "spec", "containers")
	if err != nil || len(cs) == 0 {
		t.Fatalf("the Deployment's containers: %v (%d)", err, len(cs))
	}
	name, _ := cs[0].(map[string]any)["name"].(string)
	return name
}

// firstEndpointPort is the port name of a monitor's first endpoint.
func firstEndpointPort(t *testing.T, monitor *unstructured.Unstructured, field string) string {
	t.Helper()
	eps, _, err := unstructured.NestedSlice(monitor.Object, "spec", field)
	if err != nil || len(eps) == 0 {
		t.Fatalf("%s %s: spec.%s: %v (%d)", monitor.GetKind(), monitor.GetName(), field, err, len(eps))
	}
	port, _ := eps[0].(map[string]any)["port"].(string)
	if port == "" {
		t.Fatalf("%s %s: its first endpoint names no port", monitor.GetKind(), monitor.GetName())
	}
	return port
}

// rateInterval is what Grafana puts for $__rate_interval with the data
// source's scrape interval set to the tests' (1 s) on a "last 5 minutes"
// panel: max($__interval + scrape interval, 4 × scrape interval), where
// $__interval (5 min over ~1,000 points) is 300 ms.
var rateInterval = 4 * testenv.PrometheusScrapeInterval

// grafanaVariable is a dashboard variable in a query: $name, ${name} or
// ${name:format}, or the deprecated [[name]].
var grafanaVariable = regexp.MustCompile(`\$\{([A-Za-z0-9_]+)(?::[a-z]+)?\}|\$([A-Za-z0-9_]+)|\[\[([A-Za-z0-9_]+)\]\]`)

// interpolate replaces the variables of a query as Grafana does: the
// built-in interval variables by durations, each dashboard variable by its
// value (already formatted for a regex matcher). A variable it does not
// know fails t, so a new one cannot slip through as literal text.
func interpolate(t *testing.T, where, expr string, values map[string]string) string {
	t.Helper()
	builtins := map[string]string{"__rate_interval": rateInterval.String(), "__interval": "1s", "__range": "5m"}
	return grafanaVariable.ReplaceAllStringFunc(expr, func(m string) string {
		sub := grafanaVariable.FindStringSubmatch(m)
		name := sub[1] + sub[2] + sub[3]
		if v, ok := builtins[name]; ok {
			return v
		}
		if v, ok := values[name]; ok {
			return v
		}
		t.Errorf("%s: unknown variable %s in %s", where, m, expr)
		return m
	})
}

// regexValues formats a multi-value selection as Grafana does for =~: each
// value regex-escaped, several in a group of alternatives.
func regexValues(vs []string) string {
	quoted := make([]string, len(vs))
	for i, v := range vs {
		quoted[i] = regexp.QuoteMeta(v)
	}
	if len(quoted) == 1 {
		return quoted[0]
	}
	return "(" + strings.Join(quoted, "|") + ")"
}

// ruleExpr is one alerting rule's expression, by where it comes from.
type ruleExpr struct{ where, expr string }

// prometheusRuleExprs are the rules of a PrometheusRule object.
func prometheusRuleExprs(t *testing.T, o kube.Object) []ruleExpr {
	t.Helper()
	groups, _, err := unstructured.NestedSlice(o.Body().Object, "spec", "groups")
	if err != nil || len(groups) == 0 {
		t.Fatalf("PrometheusRule %s: spec.groups: %v (%d)", o.Name, err, len(groups))
	}
	var out []ruleExpr
	for _, g := range groups {
		rules, _ := g.(map[string]any)["rules"].([]any)
		for _, r := range rules {
			m, _ := r.(map[string]any)
			alert, _ := m["alert"].(string)
			expr, _ := m["expr"].(string)
			out = append(out, ruleExpr{fmt.Sprintf("PrometheusRule %s/%s alert %s", o.Namespace, o.Name, alert), expr})
		}
	}
	return out
}

// TestScrapeTargetsFollowTheMonitors: the tests' scrape targets carry the
// labels prometheus-operator derives from the product's PodMonitor and
// ServiceMonitor (no engine needed).
func TestScrapeTargetsFollowTheMonitors(t *testing.T) {
	f := testFleet()
	e := &testenv.Engine{Name: "vllm-9", URL: "http://10.251.9.2:8000"}
	got := fleetScrapeTarget(t, f, e).Labels
	want := map[string]string{"namespace": "llmd", "pod": "vllm-9", "container": "vllm", "endpoint": "http", "job": "llmd/tiny"}
	if !maps.Equal(got, want) {
		t.Errorf("engine target labels %v, want %v", got, want)
	}
	got = routerScrapeTarget(t, testRouterSpec(f), "http://127.0.0.1:1", "router-0").Labels
	want = map[string]string{"namespace": "llmd", "service": "router", "pod": "router-0", "container": "router", "endpoint": "http", "job": "router"}
	if !maps.Equal(got, want) {
		t.Errorf("router target labels %v, want %v", got, want)
	}
}
