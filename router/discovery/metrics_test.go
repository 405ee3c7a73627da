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
process_cpu_seconds_total 12
`
	s, err := ParseMetrics(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	if s != (Scraped{Running: 7, Waiting: 7, KVUsage: 0.75}) {
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
