package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/llmd-dev/terraform-provider-llmd/internal/freeport"
)

// prometheusInstall is how to get Prometheus, for skip and failure messages.
const prometheusInstall = "apt-get install -y prometheus (make deps does; the tests run /usr/bin/prometheus themselves)"

// PrometheusScrapeInterval is how often the tests' Prometheus scrapes each
// target: short, so rate() windows fill within seconds.
const PrometheusScrapeInterval = time.Second

// ScrapeTarget is one endpoint Prometheus scrapes, with the target labels
// the monitoring stack would give it (prometheus-operator relabels a
// PodMonitor's or ServiceMonitor's targets into namespace, pod, container,
// endpoint, job, and service for a ServiceMonitor).
type ScrapeTarget struct {
	// URL is the base URL; /metrics is scraped.
	URL    string
	Labels map[string]string
}

// Prometheus is a running Prometheus server.
type Prometheus struct {
	// URL is its base URL (HTTP API under /api/v1).
	URL string
	API promv1.API
}

// StartPrometheus runs Debian's Prometheus on a free port with its own TSDB
// under t.TempDir(), scraping each target every PrometheusScrapeInterval
// with honor_labels false (as the operator's configs do, so a target's own
// `pod` label arrives as exported_pod), and waits until /-/ready answers.
// It stops when the test ends; its log is in the failure message. A missing
// binary skips the test outside CI and fails it in CI.
func StartPrometheus(t testing.TB, targets ...ScrapeTarget) *Prometheus {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		unavailable(t, "prometheus", err, prometheusInstall)
	}
	dir := t.TempDir()
	config, err := prometheusConfig(targets)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	configPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(configPath, config, 0o600); err != nil {
		t.Fatal(err)
	}
	port, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	name := fmt.Sprintf("prometheus-%d", port)
	p, err := startProcess(name, bin, []string{"--config.file=" + configPath, "--web.listen-address=" + listen,
		"--storage.tsdb.path=" + filepath.Join(dir, "tsdb"), "--log.level=warn"}, nil)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("%s log (%s):\n%s", name, p.logPath, p.logTail(80))
		}
	})
	base := "http://" + listen
	if err := p.waitReady(30*time.Second, httpOK(http.DefaultClient, base+"/-/ready")); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	c, err := promapi.NewClient(promapi.Config{Address: base})
	if err != nil {
		t.Fatalf("testenv: Prometheus API client for %s: %v", base, err)
	}
	return &Prometheus{URL: base, API: promv1.NewAPI(c)}
}

// prometheusConfig is the scrape config: one job per target, its labels as
// static target labels (a `job` label among them wins over the job's name).
// JSON is YAML, so the config is written as JSON.
func prometheusConfig(targets []ScrapeTarget) ([]byte, error) {
	interval := model.Duration(PrometheusScrapeInterval).String()
	var jobs []any
	for i, tg := range targets {
		u, err := url.Parse(tg.URL)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("scrape target %q: not a base URL (%v)", tg.URL, err)
		}
		jobs = append(jobs, map[string]any{
			"job_name": fmt.Sprintf("target-%d", i), "honor_labels": false, "scheme": u.Scheme,
			"metrics_path":   strings.TrimSuffix(u.Path, "/") + "/metrics",
			"static_configs": []any{map[string]any{"targets": []string{u.Host}, "labels": tg.Labels}},
		})
	}
	return json.Marshal(map[string]any{
		"global":         map[string]any{"scrape_interval": interval, "scrape_timeout": interval, "evaluation_interval": interval},
		"scrape_configs": jobs,
	})
}

// WaitScraped waits until every target has been scraped successfully at
// least n times since it started (up == 1 on n samples), so rate() has points.
func (p *Prometheus) WaitScraped(t testing.TB, targets, n int) {
	t.Helper()
	window := model.Duration(time.Duration(n+2) * PrometheusScrapeInterval).String()
	q := fmt.Sprintf(`count_over_time(up[%s]) >= %d and up == 1`, window, n)
	deadline := time.Now().Add(time.Duration(n)*PrometheusScrapeInterval + 30*time.Second)
	for {
		v, err := p.Query(q, time.Now())
		if err == nil && len(v) == targets {
			return
		}
		if time.Now().After(deadline) {
			up, _ := p.Query("up", time.Now())
			t.Fatalf("testenv: Prometheus did not scrape %d targets %d times (last %v, %v); up: %v", targets, n, v, err, up)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Query evaluates an instant query at ts and returns its series; a result
// that is not a vector (a scalar or a string) is an error.
func (p *Prometheus) Query(q string, ts time.Time) (model.Vector, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, warnings, _, err := p.API.Query(ctx, q, ts)
	if err != nil {
		return nil, fmt.Errorf("querying %s: %w", q, err)
	}
	if len(warnings) > 0 {
		return nil, fmt.Errorf("querying %s: warnings %v", q, warnings)
	}
	vec, ok := v.(model.Vector)
	if !ok {
		return nil, fmt.Errorf("querying %s: a %s, not a vector", q, v.Type())
	}
	return vec, nil
}
