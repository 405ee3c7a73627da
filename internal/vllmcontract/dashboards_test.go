package vllmcontract

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
)

// notHere are the series a rule measures that cannot exist in this ground,
// by selector, with the reason. The test fails if one of them does return
// a series, so the list stays honest.
var notHere = map[string]string{
	"kube_deployment_spec_replicas":             "kube-state-metrics: the engines and the router run as processes here, with no Deployment to report",
	"kube_deployment_status_replicas_available": "kube-state-metrics: no Deployment in this ground",
	"kube_deployment_status_replicas_updated":   "kube-state-metrics: no Deployment in this ground",
	"kube_job_failed":                           "kube-state-metrics: no staging Job in this ground",
	`llmd_router_pod_circuit{state!="closed"}`:  "the router exports only each pod's current circuit state; no engine fails its requests here, so none is open or half-open",
}

// TestDashboardsAndAlertsReadRealSeries: Prometheus (Debian's) scrapes both
// real engines as the fleet's PodMonitor would and a real router as its
// ServiceMonitor would, while completions and chats, some streamed, go
// through the router. Then every query of both dashboards, with its
// variables set to "All" and to the values the variable's own query finds,
// returns a series with a value, and every alert rule's measured quantity
// (see measured) returns a series, except those notHere names, which must
// return none.
func TestDashboardsAndAlertsReadRealSeries(t *testing.T) {
	f := testFleet()
	es := engines(t)
	r := testRouterSpec(f)
	routerURL, _ := startRouter(t, routerConfig(t, f, es))
	const routerPod = "router-7d9f8-x2x4k"
	targets := []testenv.ScrapeTarget{routerScrapeTarget(t, r, routerURL, routerPod)}
	for _, e := range es {
		targets = append(targets, fleetScrapeTarget(t, f, e))
	}
	prom := testenv.StartPrometheus(t, targets...)
	stop := sendTraffic(t, routerURL)
	defer stop()
	// Enough samples for the rate windows, and traffic within them.
	prom.WaitScraped(t, len(targets), int(2*rateInterval/testenv.PrometheusScrapeInterval))

	t.Run("dashboards", func(t *testing.T) {
		ds, err := workloads.Dashboards()
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			checkDashboard(t, prom, d)
		}
	})
	t.Run("alerts", func(t *testing.T) {
		// A fleet that stages its weights has every fleet alert.
		staged := f
		staged.Staging = &workloads.Staging{Repo: "Qwen/Qwen3-0.6B", Revision: strings.Repeat("c0ffee12", 5), Image: "vllm/vllm-openai:" + testenv.VLLMVersion}
		var rules []ruleExpr
		for _, obj := range []func() (kube.Object, error){staged.AlertRule, r.AlertRule, func() (kube.Object, error) { return workloads.AlertsPrometheusRule("monitoring") }} {
			o, err := obj()
			if err != nil {
				t.Fatal(err)
			}
			rules = append(rules, prometheusRuleExprs(t, o)...)
		}
		used := map[string]bool{}
		for _, rule := range rules {
			checkRule(t, prom, rule, used)
		}
		for sel, why := range notHere {
			if !used[sel] {
				t.Errorf("notHere lists %s (%s), which no rule measures any more", sel, why)
			}
		}
	})
	if errs := stop(); errs != "" {
		t.Errorf("traffic through the router: %s", errs)
	}
}

// sendTraffic sends completions and chats, every other one streamed, with
// a shared prefix (so prefix caches hit), through the router until the
// returned stop is called; stop reports the first failures.
func sendTraffic(t *testing.T, routerURL string) (stop func() string) {
	t.Helper()
	shared := strings.Repeat("The router keeps a block index of every engine's prefix cache. ", 20)
	var (
		done   = make(chan struct{})
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed []string
		sent   atomic.Int64
	)
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				n := sent.Add(1)
				stream := i%2 == 1
				path, body := "/v1/completions", map[string]any{"model": servedName, "max_tokens": 8, "temperature": 0,
					"prompt": fmt.Sprintf("%s Question %d:", shared, n), "stream": stream}
				if n%3 == 0 {
					path, body = "/v1/chat/completions", map[string]any{"model": servedName, "max_tokens": 8, "stream": stream,
						"messages": []map[string]string{{"role": "user", "content": fmt.Sprintf("%s Question %d?", shared, n)}}}
				}
				status, out, err := tryPost(routerURL+path, body)
				if err == nil && status != http.StatusOK {
					err = fmt.Errorf("POST %s: %d %s", path, status, out)
				}
				if err != nil {
					mu.Lock()
					if len(failed) < 3 {
						failed = append(failed, err.Error())
					}
					mu.Unlock()
				}
			}
		}()
	}
	var once sync.Once
	return func() string {
		once.Do(func() { close(done); wg.Wait() })
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(failed, "; ")
	}
}

// dashboard is the part of Grafana's dashboard model the test reads.
type dashboard struct {
	Templating struct {
		List []struct {
			Name     string `json:"name"`
			Type     string `json:"type"`
			AllValue string `json:"allValue"`
			// Query is a query variable's {"query": ...}; other kinds put a string here.
			Query json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []dashboardPanel `json:"panels"`
}

type dashboardPanel struct {
	Title   string `json:"title"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"`
}

// labelValuesQuery is a variable's label_values(<selector>, <label>).
var labelValuesQuery = regexp.MustCompile(`^label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)

// checkDashboard evaluates every panel query of d twice: with each query
// variable at "All" (its allValue), and at the values its own query finds
// (resolved in order, as Grafana does, each seeing the ones before).
func checkDashboard(t *testing.T, prom *testenv.Prometheus, d workloads.Dashboard) {
	t.Helper()
	var g dashboard
	if err := json.Unmarshal(d.JSON, &g); err != nil {
		t.Fatalf("dashboard %s: %v", d.Name, err)
	}
	all, chosen := map[string]string{}, map[string]string{}
	for _, v := range g.Templating.List {
		if v.Type != "query" {
			continue
		}
		where := fmt.Sprintf("dashboard %s variable %s", d.Name, v.Name)
		var q struct{ Query string }
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Fatalf("%s: query %s: %v", where, v.Query, err)
		}
		m := labelValuesQuery.FindStringSubmatch(q.Query)
		if m == nil {
			t.Fatalf("%s: query %q is not label_values(selector, label)", where, q.Query)
		}
		sel := interpolate(t, where, m[1], chosen)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		vals, _, _, err := prom.API.LabelValues(ctx, m[2], []string{sel}, time.Now().Add(-5*time.Minute), time.Now())
		cancel()
		if err != nil || len(vals) == 0 {
			t.Errorf("%s: label_values(%s, %s) = %v, %v; want values", where, sel, m[2], vals, err)
			continue
		}
		var s []string
		for _, lv := range vals {
			s = append(s, string(lv))
		}
		t.Logf("%s: %s", where, strings.Join(s, ", "))
		all[v.Name], chosen[v.Name] = v.AllValue, regexValues(s)
	}
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				where := fmt.Sprintf("dashboard %s panel %q target %s", d.Name, p.Title, tg.RefID)
				for _, values := range []map[string]string{all, chosen} {
					q := interpolate(t, where, tg.Expr, values)
					if v, err := untilValued(prom, q); err != nil {
						t.Errorf("%s: %v", where, err)
					} else {
						t.Logf("%s: %d series, e.g. %v", where, len(v), v[0])
					}
				}
			}
			walk(p.Panels)
		}
	}
	walk(g.Panels)
}

// untilValued evaluates q until it returns a series with a finite value
// (a panel draws nothing for NaN), for up to a few rate windows: the
// windows are short, and a scrape may fall between two requests.
func untilValued(prom *testenv.Prometheus, q string) (model.Vector, error) {
	deadline := time.Now().Add(3 * rateInterval)
	for {
		v, err := prom.Query(q, time.Now())
		if err != nil {
			return nil, err
		}
		for _, s := range v {
			if !math.IsNaN(float64(s.Value)) && !math.IsInf(float64(s.Value), 0) {
				return v, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s returned %v: no series with a value", q, v)
		}
		time.Sleep(testenv.PrometheusScrapeInterval)
	}
}

// checkRule evaluates each quantity rule measures: one that notHere names
// must return nothing, every other one a series. It marks the notHere
// entries it met in used.
func checkRule(t *testing.T, prom *testenv.Prometheus, rule ruleExpr, used map[string]bool) {
	t.Helper()
	e, err := parser.ParseExpr(rule.expr)
	if err != nil {
		t.Errorf("%s: %v", rule.where, err)
		return
	}
	for _, m := range measured(e) {
		var why []string
		for _, sel := range selectors(m) {
			name := sel
			if i := strings.IndexByte(sel, '{'); i >= 0 {
				name = sel[:i]
			}
			for _, key := range []string{sel, name} {
				if reason, ok := notHere[key]; ok {
					used[key] = true
					why = append(why, reason)
				}
			}
		}
		sort.Strings(why)
		v, err := prom.Query(m.String(), time.Now())
		switch {
		case err != nil:
			t.Errorf("%s: %v", rule.where, err)
		case len(why) > 0 && len(v) > 0:
			t.Errorf("%s: %s returned %v, but notHere says it cannot: %s", rule.where, m, v, strings.Join(why, "; "))
		case len(why) > 0:
			t.Logf("%s: %s cannot return a series here: %s", rule.where, m, strings.Join(why, "; "))
		case len(v) == 0:
			t.Errorf("%s: %s returned no series", rule.where, m)
		default:
			t.Logf("%s: %s: %v", rule.where, m, v)
		}
	}
}
