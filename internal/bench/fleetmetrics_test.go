package bench

import (
	"maps"
	"strings"
	"testing"
)

// TestParseMetricsSumsLabelledSamples reads vLLM-style exposition text:
// labelled samples, several samples of one counter (by finish reason), a
// timestamp, comments, and names the bench does not want.
func TestParseMetricsSumsLabelledSamples(t *testing.T) {
	text := `# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="Qwen/Qwen2.5-7B-Instruct"} 7
vllm:kv_cache_usage_perc{model_name="Qwen/Qwen2.5-7B-Instruct"} 0.25
vllm:prefix_cache_queries_total{model_name="Qwen/Qwen2.5-7B-Instruct"} 4352 1700000000000
vllm:prefix_cache_hits_total{model_name="Qwen/Qwen2.5-7B-Instruct"} 2048
vllm:request_success_total{finished_reason="length",model_name="m"} 3
vllm:request_success_total{finished_reason="stop",model_name="m"} 2
vllm:num_requests_running{model_name="m"} 12
vllm:generation_tokens_total{model_name="m"} 99
llmd_sim_lag_max_seconds 0.125
`
	m, err := parsePodMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := podMetrics{Waiting: 7, Running: 12, KVUsage: 0.25, Queries: 4352, Hits: 2048, Success: 5, LagMax: 0.125}
	if m != want {
		t.Errorf("parsed %+v, want %+v", m, want)
	}
	r, err := parseRouterMetrics(strings.NewReader(`llmd_router_kv_event_messages_total{pod="sim-0"} 10
llmd_router_kv_event_messages_total{pod="sim-1"} 5
llmd_router_decisions_total 15
llmd_router_pods 2
llmd_router_index_events_total{kind="speculation_confirmed"} 40
llmd_router_index_events_total{kind="speculation_expired"} 3
llmd_router_index_events_total{kind="blocks_stored"} 900
llmd_router_queue_wait_seconds_sum{class="high",outcome="admitted"} 1.5
llmd_router_queue_wait_seconds_count{class="high",outcome="admitted"} 3
llmd_router_queue_wait_seconds_sum{class="low",outcome="shed"} 60
llmd_router_queue_wait_seconds_bucket{class="low",outcome="admitted",le="0.1"} 2
`))
	if err != nil {
		t.Fatal(err)
	}
	wantRouter := map[string]float64{"kv_event_messages": 15, "decisions": 15, "speculation_confirmed": 40, "speculation_expired": 3,
		"queued_high": 3, "queue_wait_seconds_high": 1.5} // admitted waits by class; a shed wait and the buckets are not kept
	if !maps.Equal(r, wantRouter) {
		t.Errorf("router counters %v, want %v", r, wantRouter)
	}
	if _, err := parsePodMetrics(strings.NewReader("vllm:num_requests_waiting{a=\"b\"} many\n")); err == nil {
		t.Error("a non-numeric sample was accepted")
	}
}

// TestLagOverLimitFailsTheRun checks the demo's guard: a replica more than
// 5% of the run behind its schedule fails the run; up to 5% passes.
func TestLagOverLimitFailsTheRun(t *testing.T) {
	opts := DefaultLiveOptions()
	if err := (lagReport{seconds: 5, share: 0.05, wall: 100}).check(opts); err != nil {
		t.Errorf("5%% lag failed: %v", err)
	}
	err := (lagReport{seconds: 6, share: 0.06, wall: 100}).check(opts)
	if err == nil || !strings.Contains(err.Error(), "6.0%") || !strings.Contains(err.Error(), "limit 5%") {
		t.Errorf("6%% lag: error %v, want one naming 6.0%% and the 5%% limit", err)
	}
}
