package workloads

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
)

// kubeStateMetrics are the kube-state-metrics series the alerts may use
// (kubernetes/kube-state-metrics internal/store/deployment.go, job.go).
var kubeStateMetrics = []string{"kube_deployment_spec_replicas", "kube_deployment_status_replicas_available",
	"kube_deployment_status_replicas_updated", "kube_job_failed"}

// promIdent finds the identifiers of an expression outside label matchers
// and strings: metric names, functions, keywords and label names in by/on.
var promIdent = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)

var promWords = []string{"and", "or", "unless", "on", "by", "without", "ignoring", "max", "min", "sum", "absent", "namespace", "pod", "deployment"}

// checkExpr checks an alert expression as far as this package can without
// a PromQL parser: brackets balance, strings close, and every series it
// selects is one the named exporters declare.
func checkExpr(t *testing.T, name, expr string, exported []string) {
	t.Helper()
	var stack []rune
	pairs := map[rune]rune{')': '(', '}': '{', ']': '['}
	outside := strings.Builder{}
	inString := false
	for _, r := range expr {
		switch {
		case r == '"':
			inString = !inString
		case inString:
		case r == '(' || r == '{' || r == '[':
			stack = append(stack, r)
		case pairs[r] != 0:
			if len(stack) == 0 || stack[len(stack)-1] != pairs[r] {
				t.Fatalf("%s: unbalanced %q in %s", name, r, expr)
			}
			stack = stack[:len(stack)-1]
		}
		if !inString && (len(stack) == 0 || stack[len(stack)-1] != '{') && r != '"' {
			outside.WriteRune(r)
		} else {
			outside.WriteRune(' ')
		}
	}
	if inString || len(stack) != 0 {
		t.Fatalf("%s: unclosed string or bracket in %s", name, expr)
	}
	selected := 0
	for _, id := range promIdent.FindAllString(outside.String(), -1) {
		if slices.Contains(promWords, id) || regexp.MustCompile(`^\d`).MatchString(id) {
			continue
		}
		selected++
		if !slices.Contains(exported, id) {
			t.Errorf("%s selects %s, which no exporter declares", name, id)
		}
	}
	if selected == 0 {
		t.Errorf("%s selects no series: %s", name, expr)
	}
}

// TestAlertRules: the fleet's and the router's PrometheusRules carry the
// on-call's alerts (a fleet pod not ready, KV cache full with requests
// waiting, a staging Job failed, the router's pods out or silent), each
// expression well formed and selecting only series vLLM, kube-state-metrics
// and Prometheus itself export.
func TestAlertRules(t *testing.T) {
	exported := append(append(vllmMetrics(t), kubeStateMetrics...), "up")
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
			checkExpr(t, a.Name, a.Expr, exported)
			if a.Severity == "" || a.Summary == "" || a.Description == "" {
				t.Errorf("%s: severity %q, summary %q, description %q", a.Name, a.Severity, a.Summary, a.Description)
			}
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
