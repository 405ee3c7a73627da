package discovery

import (
	"strings"
	"testing"
)

// TestParseMetrics covers the exposition forms the scraper meets: label
// values holding spaces, braces and escaped quotes, timestamps, one series
// per data-parallel engine, and the pre-rename KV-usage name. The
// simulator's real /metrics page is parsed in the scenario tests.
func TestParseMetrics(t *testing.T) {
	page := `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="a {b} \"c\" d"} 3
vllm:num_requests_running{engine="1",model_name="a {b} \"c\" d"} 4 1700000000000
vllm:num_requests_waiting{engine="0",model_name="m"} 2.0
vllm:num_requests_waiting{engine="1",model_name="m"} 5
vllm:gpu_cache_usage_perc{engine="0"} 0.25
vllm:gpu_cache_usage_perc{engine="1"} 0.75
vllm:num_requests_waiting_by_reason{reason="x"} 100
vllm:cache_config_info{block_size="16",cache_dtype="auto",engine="0",num_cpu_blocks="None",num_gpu_blocks="4481",num_gpu_blocks_override="None"} 1.0
vllm:cache_config_info{num_gpu_blocks_override="7",engine="1",num_gpu_blocks="100",block_size="32"} 1.0
vllm:num_preemptions_total{engine="0",model_name="m"} 3
vllm:num_preemptions_total{engine="1",model_name="m"} 4
process_cpu_seconds_total 12
`
	s, err := ParseMetrics(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	if s != (Scraped{Running: 7, Waiting: 7, KVUsage: 0.75, KVCacheTokens: 4481*16 + 100*32, Preemptions: 7, HasPreemptions: true}) {
		t.Errorf("parsed %+v", s)
	}
	for _, bad := range []string{
		"vllm:num_requests_running 1\nvllm:num_requests_waiting 1\n",       // no KV usage
		"vllm:num_requests_running{a=\"b 1\nvllm:num_requests_waiting 1\n", // unterminated labels
		"vllm:num_requests_running abc\n",
	} {
		if _, err := ParseMetrics(strings.NewReader(bad)); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

// TestCacheSizeNeedsBothLabels: a cache_config_info line without a usable
// num_gpu_blocks or block_size (absent, "None", a label whose name only
// ends in it, not a positive integer) states no size.
func TestCacheSizeNeedsBothLabels(t *testing.T) {
	const gauges = "vllm:num_requests_running 0\nvllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 0\n"
	for _, labels := range []string{
		`block_size="16",num_gpu_blocks="None"`,
		`block_size="16",num_gpu_blocks_override="64"`,
		`block_size="16",xnum_gpu_blocks="64"`,
		`block_size="16",num_gpu_blocks="-64"`,
		`block_size="x",num_gpu_blocks="64"`,
		`num_gpu_blocks="64"`,
		`model_name="num_gpu_blocks=\"64\"",block_size="16"`,
	} {
		s, err := ParseMetrics(strings.NewReader(gauges + "vllm:cache_config_info{" + labels + "} 1\n"))
		if err != nil || s.KVCacheTokens != 0 {
			t.Errorf("%s: size %d, err %v; want 0, nil", labels, s.KVCacheTokens, err)
		}
	}
}
