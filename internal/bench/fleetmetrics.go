package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// podMetrics is what the bench reads from one replica's /metrics: vLLM's
// counters and gauges, and the simulator's lag.
type podMetrics struct {
	Waiting, Running       float64
	KVUsage                float64
	Queries, Hits, Preempt float64
	Success                float64
	LagMax                 float64
}

// since is m's counters' growth from before; the gauges and the lag are
// m's own.
func (m podMetrics) since(before podMetrics) podMetrics {
	m.Queries -= before.Queries
	m.Hits -= before.Hits
	m.Preempt -= before.Preempt
	m.Success -= before.Success
	return m
}

// wanted maps metric names to the field they fill; vLLM labels every
// sample (model_name), so a name may carry labels and several samples of
// one name add up (request_success_total by finish reason).
var wanted = map[string]func(m *podMetrics, v float64){
	"vllm:num_requests_waiting":       func(m *podMetrics, v float64) { m.Waiting += v },
	"vllm:num_requests_running":       func(m *podMetrics, v float64) { m.Running += v },
	"vllm:kv_cache_usage_perc":        func(m *podMetrics, v float64) { m.KVUsage += v },
	"vllm:prefix_cache_queries_total": func(m *podMetrics, v float64) { m.Queries += v },
	"vllm:prefix_cache_hits_total":    func(m *podMetrics, v float64) { m.Hits += v },
	"vllm:num_preemptions_total":      func(m *podMetrics, v float64) { m.Preempt += v },
	"vllm:request_success_total":      func(m *podMetrics, v float64) { m.Success += v },
	"llmd_sim_lag_max_seconds":        func(m *podMetrics, v float64) { m.LagMax = max(m.LagMax, v) },
}

// parsePodMetrics reads the wanted samples from Prometheus text.
func parsePodMetrics(r io.Reader) (podMetrics, error) {
	var m podMetrics
	err := eachSample(r, func(name, _ string, v float64) {
		if set, ok := wanted[name]; ok {
			set(&m, v)
		}
	})
	return m, err
}

// routerWanted are the router's own counters a live report carries: they
// show whether it learned the caches (events, gaps, index size) and
// whether it could read the prompts.
var routerWanted = map[string]string{
	"llmd_router_decisions_total":              "decisions",
	"llmd_router_untokenizable_requests_total": "untokenizable",
	"llmd_router_kv_event_messages_total":      "kv_event_messages",
	"llmd_router_kv_event_gaps_total":          "kv_event_gaps",
	"llmd_router_kv_event_purges_total":        "kv_event_purges",
	"llmd_router_kv_event_decode_errors_total": "kv_event_decode_errors",
	"llmd_router_index_keys":                   "index_keys",
	"llmd_router_retries_total":                "retries",
	// Speculative index entries an event confirmed, and those that expired
	// first: a prefix whose entry expires before the pod's BlockStored is
	// placed afresh, and may be computed twice.
	`llmd_router_index_events_total{kind="speculation_confirmed"}`: "speculation_confirmed",
	`llmd_router_index_events_total{kind="speculation_expired"}`:   "speculation_expired",
	// The router's own time per request (reading, tokenizing, scoring,
	// queueing for its CPU, relaying the first chunk): sum over count is
	// the per-request cost virtual mode's router lag models.
	"llmd_router_overhead_seconds_sum":   "overhead_seconds_sum",
	"llmd_router_overhead_seconds_count": "overhead_requests",
	// Behind several replicas: the peer decisions each held, the peer
	// requests each counted under the KV bound, and the frames dropped for
	// a peer too slow to take them.
	"llmd_router_peer_speculations_total":           "peer_speculations",
	"llmd_router_peer_kv_demands_total":             "peer_kv_demands",
	`llmd_router_peer_frames_total{kind="dropped"}`: "peer_frames_dropped",
	// How late the peers' decisions reached each replica (sum over count is
	// the mean; the buckets the decisions within 16 and 128 ms).
	"llmd_router_peer_delay_seconds_sum":                "peer_delay_seconds_sum",
	"llmd_router_peer_delay_seconds_count":              "peer_delay_decisions",
	`llmd_router_peer_delay_seconds_bucket{le="0.016"}`: "peer_delay_within_16ms",
	`llmd_router_peer_delay_seconds_bucket{le="0.128"}`: "peer_delay_within_128ms",
}

// queueWaitSeries are the router's waits for a pod, by class: a class's
// requests that queued and were admitted ("queued_<class>") and their
// summed wait ("queue_wait_seconds_<class>"), to tell a class's time in
// the router's queue from its time in the engines.
var queueWaitSeries = map[string]string{
	"llmd_router_queue_wait_seconds_count": "queued_",
	"llmd_router_queue_wait_seconds_sum":   "queue_wait_seconds_",
}

// parseRouterMetrics sums the wanted router samples over their labels; a
// wanted series named with its labels takes only that series. The queue's
// admitted waits are kept by class (queueWaitSeries).
func parseRouterMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	err := eachSample(r, func(name, labels string, v float64) {
		if prefix, ok := queueWaitSeries[name]; ok {
			if class := labelValue(labels, "class"); class != "" && labelValue(labels, "outcome") == "admitted" {
				out[prefix+class] += v
			}
			return
		}
		if key, ok := routerWanted[name+labels]; ok {
			out[key] += v
		} else if key, ok := routerWanted[name]; ok {
			out[key] += v
		}
	})
	return out, err
}

// labelValue is label's value in labels as written ("{a=\"x\",b=\"y\"}"),
// "" when absent. The router's label values (classes, outcomes) hold no
// comma or quote.
func labelValue(labels, label string) string {
	for _, kv := range strings.Split(strings.Trim(labels, "{}"), ",") {
		if k, v, ok := strings.Cut(kv, "="); ok && k == label {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// eachSample calls fn with every sample's metric name, its labels as
// written ("{kind=\"x\"}", or "") and its value.
func eachSample(r io.Reader, fn func(name, labels string, v float64)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest, _ := strings.Cut(line, " ")
		labels := ""
		if i := strings.IndexByte(line, '{'); i >= 0 && i < len(name) {
			end := strings.LastIndexByte(line, '}') + 1
			name, labels = line[:i], line[i:end]
			_, rest, _ = strings.Cut(line[end:], " ")
		}
		val, _, _ := strings.Cut(strings.TrimSpace(rest), " ")
		v, err := strconv.ParseFloat(val, 64)
		if err != nil {
			return fmt.Errorf("metric %s: %w", name, err)
		}
		fn(name, labels, v)
	}
	return sc.Err()
}

// getMetrics fetches base/metrics and hands the body to parse.
func getMetrics(ctx context.Context, hc *http.Client, base string, parse func(io.Reader) error) error {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, base+"/metrics", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("scraping %s: %w", base, err)
	}
	defer resp.Body.Close()
	if err := parse(resp.Body); err != nil {
		return fmt.Errorf("scraping %s: %w", base, err)
	}
	return nil
}

// scrapeFleet reads every replica's metrics.
func scrapeFleet(ctx context.Context, hc *http.Client, bases []string) ([]podMetrics, error) {
	out := make([]podMetrics, len(bases))
	for i, base := range bases {
		err := getMetrics(ctx, hc, base, func(r io.Reader) (err error) {
			out[i], err = parsePodMetrics(r)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// fleetSampler samples the fleet's waiting total and KV use while a run
// is loaded, as the virtual loop samples its engines, and keeps every
// pod's load over the whole run (Series).
type fleetSampler struct {
	peakWaiting int
	kvSum       float64
	samples     int
	series      *Series
	err         error
}

// run samples every interval until ctx ends; loaded says whether the client
// still has requests to send (means cover only that part). Sample times are
// simulated seconds from start.
func (s *fleetSampler) run(ctx context.Context, hc *http.Client, bases []string, interval time.Duration, loaded func() bool,
	start time.Time, timeScale float64) {
	s.series = newSeries(len(bases))
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ms, err := scrapeFleet(ctx, hc, bases)
		if err != nil {
			if ctx.Err() == nil && s.err == nil {
				s.err = err
			}
			continue
		}
		isLoaded := loaded()
		s.series.add(time.Since(start).Seconds()*timeScale, isLoaded, ms)
		waiting, kv := 0.0, 0.0
		for _, m := range ms {
			waiting += m.Waiting
			kv += m.KVUsage / float64(len(ms))
		}
		s.peakWaiting = max(s.peakWaiting, int(waiting))
		if isLoaded {
			s.kvSum += kv
			s.samples++
		}
	}
}
