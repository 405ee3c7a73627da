package workloads

import (
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"

	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
)

// TestAlertRulesParseAndSelectRealMetrics parses each alert's expression
// with Prometheus's PromQL parser and checks every metric it selects
// against what the product deploys: vLLM v0.30.0's series, the router's
// registry and the kube-state-metrics series the stack ships. Each alert
// must say how bad it is and what to do.
func TestAlertRulesParseAndSelectRealMetrics(t *testing.T) {
	vllm, router := vllmMetrics(t), routerMetrics(t)
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
			where := "alert " + r.Alert
			if !regexp.MustCompile(`^LLMD[A-Z][A-Za-z]+$`).MatchString(r.Alert) || seen[r.Alert] {
				t.Errorf("%s: name not LLMD<CamelCase> or repeated", where)
			}
			seen[r.Alert] = true
			selected = append(selected, checkSelects(t, where, r.Expr, vllm, router, kubeStateMetrics)...)
			if r.For != "" {
				if _, err := model.ParseDuration(r.For); err != nil {
					t.Errorf("%s: for %q: %v", where, r.For, err)
				}
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", where, s)
			}
			if len(r.Annotations["summary"]) < 20 || len(r.Annotations["description"]) < 100 {
				t.Errorf("%s: summary %q and description %q: say what broke and what to check", where, r.Annotations["summary"], r.Annotations["description"])
			}
			for k, text := range r.Annotations {
				// Prometheus expands annotations as Go templates with $labels.
				if _, err := template.New(k).Parse("{{$labels := .Labels}}" + text); err != nil {
					t.Errorf("%s: annotation %s: %v", where, k, err)
				}
			}
		}
	}
	for _, want := range []string{"LLMDFleetPodNotReady", "LLMDFleetKVCacheFullRequestsWaiting", "LLMDStagingJobFailed",
		"LLMDRouterDown", "LLMDRouterEngineOutOfScoring", "LLMDRouterEngineKVEventsSilent", "LLMDRouterEngineLoadStale"} {
		if !seen[want] {
			t.Errorf("no alert %s", want)
		}
	}
	for _, m := range []string{"vllm:kv_cache_usage_perc", "vllm:num_requests_waiting", "llmd_router_pod_circuit", "llmd_router_pod_kv_events_silent",
		"kube_job_failed", "kube_pod_status_ready"} {
		if !slices.Contains(selected, m) {
			t.Errorf("no alert selects %s", m)
		}
	}
}

// TestAlertRulesSelectTheProductsObjects: the alerts find the fleet's and
// the router's pods by container name and the staging Job by its name,
// since kube-state-metrics exports no labels by default
// (--metric-labels-allowlist). Renaming either breaks the alerts here.
func TestAlertRulesSelectTheProductsObjects(t *testing.T) {
	groups, err := AlertRuleGroups()
	if err != nil {
		t.Fatal(err)
	}
	exprs := map[string]string{}
	for _, g := range groups {
		for _, r := range g.Rules {
			exprs[r.Alert] = r.Expr
		}
	}
	objs, err := testRouter().Objects(false)
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	find(t, objs, "Deployment", "llmd", "router", &d)
	if c := d.Spec.Template.Spec.Containers[0].Name; !strings.Contains(exprs["LLMDRouterPodNotReady"], `container="`+c+`"`) {
		t.Errorf("the router's container is %q; LLMDRouterPodNotReady selects %s", c, exprs["LLMDRouterPodNotReady"])
	}
	f := Fleet{Name: "qwen", Namespace: "llmd", ServedName: "Qwen/Qwen2.5-7B-Instruct", ModelPath: "Qwen2.5-7B-Instruct",
		VLLM:      VLLM{Image: "vllm/vllm-openai:v0.30.0", BlockSize: 64, MaxModelLen: 8192, MaxNumSeqs: 256, TensorParallelSize: 1},
		KVEvents:  KVEvents{Port: 5557, ReplayPort: 5558, Topic: "kv@{ip}:{port}@{model}"},
		Storage:   Storage{ExistingClaim: "weights"},
		Resources: Resources{CPU: "3", Memory: "12Gi", MemoryLimit: "14Gi", Shm: "2Gi"},
		Rollout:   Rollout{MaxUnavailable: 1, StartupSeconds: 1200}}
	objs, err = f.Objects(false)
	if err != nil {
		t.Fatal(err)
	}
	var fd appsv1.Deployment
	find(t, objs, "Deployment", "llmd", "qwen", &fd)
	if c := fd.Spec.Template.Spec.Containers[0].Name; !strings.Contains(exprs["LLMDFleetPodNotReady"], `container="`+c+`"`) {
		t.Errorf("the fleet's vLLM container is %q; LLMDFleetPodNotReady selects %s", c, exprs["LLMDFleetPodNotReady"])
	}
	m := regexp.MustCompile(`job_name=~"([^"]+)"`).FindStringSubmatch(exprs["LLMDStagingJobFailed"])
	if m == nil {
		t.Fatalf("LLMDStagingJobFailed selects no job name: %s", exprs["LLMDStagingJobFailed"])
	}
	// Prometheus anchors label regexes at both ends.
	f.Staging = &Staging{Repo: "Qwen/Qwen2.5-7B-Instruct", Revision: "a09a35458c702b33eeacc393d103063234e8bc28", Image: f.VLLM.Image}
	if job := f.StagingJobName(); !regexp.MustCompile("^(?:" + m[1] + ")$").MatchString(job) {
		t.Errorf("the staging Job is %q; LLMDStagingJobFailed selects job_name=~%q", job, m[1])
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
