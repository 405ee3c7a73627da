package sim

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Histogram buckets as vLLM declares them (vllm/v1/metrics/loggers.py).
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
		7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	tpotBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0,
		7.5, 10.0, 20.0, 40.0, 80.0}
)

// replicaMetrics are one replica's /metrics under vLLM's names, in its own
// registry so that many replicas share a process. Latencies are in engine
// (simulated) seconds. llmd_sim_* metrics are the simulator's own.
type replicaMetrics struct {
	reg                        *prometheus.Registry
	running, waiting, kvUsage  prometheus.Gauge
	queries, hits, preemptions prometheus.Counter
	promptTokens, genTokens    prometheus.Counter
	success                    prometheus.Counter
	ttft, tpot                 prometheus.Observer
	lag, lagMax, timeScale     prometheus.Gauge
	maxLag                     float64
	last                       EngineStats
}

func newReplicaMetrics(model string, cfg EngineConfig, timeScale float64) *replicaMetrics {
	reg := prometheus.NewRegistry()
	labels := prometheus.Labels{"model_name": model, "engine": "0"}
	gauge := func(name, help string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels})
		reg.MustRegister(g)
		return g
	}
	counter := func(name, help string, extra prometheus.Labels) prometheus.Counter {
		l := prometheus.Labels{}
		for k, v := range labels {
			l[k] = v
		}
		for k, v := range extra {
			l[k] = v
		}
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: l})
		reg.MustRegister(c)
		return c
	}
	hist := func(name, help string, buckets []float64) prometheus.Observer {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets, ConstLabels: labels})
		reg.MustRegister(h)
		return h
	}
	m := &replicaMetrics{
		reg:          reg,
		running:      gauge("vllm:num_requests_running", "Number of requests in model execution batches."),
		waiting:      gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed."),
		kvUsage:      gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage."),
		queries:      counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.", nil),
		hits:         counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", nil),
		preemptions:  counter("vllm:num_preemptions_total", "Cumulative number of preemptions from the engine.", nil),
		promptTokens: counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", nil),
		genTokens:    counter("vllm:generation_tokens_total", "Number of generation tokens processed.", nil),
		success: counter("vllm:request_success_total", "Count of successfully processed requests.",
			prometheus.Labels{"finished_reason": "length"}),
		ttft:      hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttftBuckets),
		tpot:      hist("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.", tpotBuckets),
		lag:       gauge("llmd_sim_lag_seconds", "How far behind its wall-clock schedule the engine finished its last step, in wall seconds."),
		lagMax:    gauge("llmd_sim_lag_max_seconds", "The largest llmd_sim_lag_seconds since the replica started."),
		timeScale: gauge("llmd_sim_time_scale", "Simulated seconds per wall-clock second."),
	}
	info := prometheus.NewGauge(prometheus.GaugeOpts{Name: "vllm:cache_config_info", Help: "Information of the LLMEngine CacheConfig",
		ConstLabels: prometheus.Labels{"block_size": strconv.Itoa(cfg.BlockSize), "num_gpu_blocks": strconv.Itoa(cfg.NumGPUBlocks),
			"enable_prefix_caching": "True", "cache_dtype": "auto", "gpu_memory_utilization": "0.9", "engine": "0"}})
	info.Set(1)
	reg.MustRegister(info)
	m.timeScale.Set(timeScale)
	return m
}

// update publishes the engine's gauges and the counters' growth since the
// last update.
func (m *replicaMetrics) update(e *Engine) {
	m.running.Set(float64(e.Running()))
	m.waiting.Set(float64(e.Waiting()))
	m.kvUsage.Set(e.KVUsage())
	s := e.Stats()
	m.queries.Add(float64(s.PrefixQueries - m.last.PrefixQueries))
	m.hits.Add(float64(s.PrefixHits - m.last.PrefixHits))
	m.preemptions.Add(float64(s.Preemptions - m.last.Preemptions))
	m.promptTokens.Add(float64(s.PromptTokens - m.last.PromptTokens))
	m.genTokens.Add(float64(s.GenerationTokens - m.last.GenerationTokens))
	m.success.Add(float64(s.Finished - m.last.Finished))
	m.last = s
}

// lagged records how late a step finished, in wall seconds.
func (m *replicaMetrics) lagged(s float64) {
	m.lag.Set(s)
	if s > m.maxLag {
		m.maxLag = s
		m.lagMax.Set(s)
	}
}

// finished records a finished request's latencies.
func (m *replicaMetrics) finished(r *Request) {
	m.ttft.Observe(r.FirstToken - r.Arrival)
	if r.Output > 1 {
		m.tpot.Observe((r.Done - r.FirstToken) / float64(r.Output-1))
	}
}
