package workloads

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat/canary"
	"github.com/llmd-dev/terraform-provider-llmd/router/discovery"
	"github.com/llmd-dev/terraform-provider-llmd/router/index"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
	"github.com/llmd-dev/terraform-provider-llmd/router/prompt"
	"github.com/llmd-dev/terraform-provider-llmd/router/proxy"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// metricSet maps every series name a source exposes to its family and the
// family's type ("" when the source does not say).
type metricSet map[string]exposed

type exposed struct{ family, typ string }

// resolve finds the family a queried name belongs to: the name itself, or
// a histogram's _bucket, _sum or _count series (a classic histogram has no
// series of its bare name).
func (s metricSet) resolve(name string) (exposed, bool) {
	if e, ok := s[name]; ok && e.typ != "histogram" {
		return e, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		// A router family's type is not declared by its Desc: accept the suffix on any family.
		if e, ok := s[base]; ok && (e.typ == "histogram" || e.typ == "") {
			return e, true
		}
	}
	return exposed{}, false
}

// vllmMetrics are the series vLLM v0.30.0 exposes, from the families its
// source declares (testdata/vllm-v0.30.0-metrics.txt, see its header) and
// prometheus_client's naming: a counter x or x_total is the series
// x_total, a histogram x is x_bucket, x_sum and x_count.
func vllmMetrics(t *testing.T) metricSet {
	t.Helper()
	b, err := os.ReadFile("testdata/vllm-v0.30.0-metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	s := metricSet{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 3 {
			t.Fatalf("testdata line %q: want type, name, file:line", line)
		}
		typ, name := f[0], f[1]
		switch typ {
		case "gauge", "histogram":
			s[name] = exposed{name, typ}
		case "counter":
			s[strings.TrimSuffix(name, "_total")+"_total"] = exposed{name, typ}
		default:
			t.Fatalf("testdata line %q: unknown type %q", line, typ)
		}
	}
	if len(s) < 40 {
		t.Fatalf("only %d vLLM families in the testdata", len(s))
	}
	return s
}

var descName = regexp.MustCompile(`^Desc\{fqName: "([^"]+)"`)

// routerMetrics are the families the router's /metrics serves: a registry
// built as `llmd-router serve` builds its own (router/cmd/llmd-router/serve.go),
// with the real collectors, described without collecting (a collector reads
// its component at scrape time; Describe needs none).
func routerMetrics(t *testing.T) metricSet {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if _, err := proxy.NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	reg.MustRegister(index.Collector{}, kvevents.Collector{}, discovery.Collector{}, scoring.Collector{}, proxy.Collector{}, prompt.Collector{})
	if _, err := canary.NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	ch := make(chan *prometheus.Desc)
	go func() { reg.Describe(ch); close(ch) }()
	s := metricSet{}
	for d := range ch {
		m := descName.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("cannot read the name of %s", d)
		}
		s[m[1]] = exposed{family: m[1]}
	}
	if len(s) < 40 {
		t.Fatalf("only %d families registered by the router's collectors", len(s))
	}
	return s
}

// kubeStateMetrics are the kube-state-metrics series the alerts use, as its
// docs list them (docs/metrics/workload/deployment-metrics.md and
// job-metrics.md, STABLE); kube-prometheus-stack installs kube-state-metrics
// with the deployment and job collectors on. `up` is Prometheus's own series
// per target (docs: "Jobs and instances", automatically generated series).
var kubeStateMetrics = metricSet{
	"kube_deployment_spec_replicas":             {"kube_deployment_spec_replicas", "gauge"},
	"kube_deployment_status_replicas_available": {"kube_deployment_status_replicas_available", "gauge"},
	"kube_deployment_status_replicas_updated":   {"kube_deployment_status_replicas_updated", "gauge"},
	"kube_job_failed":                           {"kube_job_failed", "gauge"},
	"up":                                        {"up", "gauge"},
}

// grafanaVariables are Grafana's interval variables: replaced by a duration
// so the expression parses as the query Grafana sends ($model and $pod sit in
// label values, which parse as they are).
var grafanaVariables = regexp.MustCompile(`\$__(rate_interval|interval|range)|\$\{__(rate_interval|interval|range)\}`)

// labelValues is Grafana's variable query label_values(<selector>, <label>).
var labelValues = regexp.MustCompile(`^label_values\((.*),\s*[a-zA-Z_][a-zA-Z0-9_]*\)$`)

// selectedMetrics parses expr with Prometheus's PromQL parser and returns
// the metric name of every selector in it: the name before the braces or an
// equality matcher on __name__. A selector without one selects by labels
// only, which no panel or alert should do.
func selectedMetrics(expr string) ([]string, error) {
	expr = grafanaVariables.ReplaceAllString(expr, "5m")
	if m := labelValues.FindStringSubmatch(expr); m != nil {
		expr = m[1]
	}
	e, err := parser.ParseExpr(expr)
	if err != nil {
		return nil, err
	}
	var names []string
	var bad error
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName && m.Type == labels.MatchEqual {
				name = m.Value
			}
		}
		if name == "" {
			bad = fmt.Errorf("selector %s names no metric", vs)
		}
		names = append(names, name)
		return nil
	})
	if bad != nil {
		return nil, bad
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%q selects no metric", expr)
	}
	return names, nil
}

// checkSelects reports every metric expr selects that none of the sets
// exposes; it returns the families it found.
func checkSelects(t *testing.T, where, expr string, sets ...metricSet) []string {
	t.Helper()
	names, err := selectedMetrics(expr)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return nil
	}
	var found []string
names:
	for _, n := range names {
		for _, s := range sets {
			if e, ok := s.resolve(n); ok {
				found = append(found, e.family)
				continue names
			}
		}
		t.Errorf("%s selects %s, which nothing the product deploys exposes (vLLM v0.30.0, the router, kube-state-metrics)", where, n)
	}
	return found
}

func TestSelectedMetrics(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`histogram_quantile(0.9, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket{pod=~"$pod"}[$__rate_interval])))`,
			[]string{"vllm:time_to_first_token_seconds_bucket"}},
		{`sum(rate({__name__="a_total", job="x"}[5m])) / sum(b)`, []string{"a_total", "b"}},
		{`label_values(vllm:num_requests_running{model_name=~"$model"}, pod)`, []string{"vllm:num_requests_running"}},
		{`max by (pod) (x{state!="closed"}) == 1 and on (pod) y offset 5m`, []string{"x", "y"}},
	} {
		got, err := selectedMetrics(tc.expr)
		if err != nil || strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: %v, %v; want %v", tc.expr, got, err, tc.want)
		}
	}
	for _, bad := range []string{`sum(rate(x[5m])`, `{job="router"}`, `label_values(pod)`} {
		if got, err := selectedMetrics(bad); err == nil {
			t.Errorf("%s: %v, want an error", bad, got)
		}
	}
}

func TestMetricSetResolve(t *testing.T) {
	v := vllmMetrics(t)
	for name, want := range map[string]string{"vllm:prompt_tokens_total": "vllm:prompt_tokens", "vllm:num_requests_waiting": "vllm:num_requests_waiting",
		"vllm:inter_token_latency_seconds_bucket": "vllm:inter_token_latency_seconds", "vllm:iteration_tokens_total_count": "vllm:iteration_tokens_total",
		"vllm:tool_call_parser_invocations_total": "vllm:tool_call_parser_invocations_total"} {
		if e, ok := v.resolve(name); !ok || e.family != want {
			t.Errorf("%s resolves to %+v, %v; want family %s", name, e, ok, want)
		}
	}
	for _, name := range []string{"vllm:time_per_output_token_seconds_bucket", "vllm:time_to_first_token_seconds", "vllm:prompt_tokens", "vllm:num_requests_waiting_total",
		"vllm:prefix_cache_hits_total_count", "vllm:kv_cache_usage_perc_bucket"} {
		if e, ok := v.resolve(name); ok {
			t.Errorf("%s resolves to %+v; vLLM v0.30.0 exposes no such series", name, e)
		}
	}
	r := routerMetrics(t)
	for _, name := range []string{"llmd_router_decisions_total", "llmd_router_upstream_first_byte_seconds_bucket", "llmd_router_pod_circuit",
		"llmd_router_pod_kv_events_silent", "llmd_router_tokenizer_canary_checks_total", "go_goroutines"} {
		if _, ok := r.resolve(name); !ok {
			t.Errorf("the router's registry has no %s", name)
		}
	}
}
