package vllmcontract

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/discovery"
)

// TestScrapeReadsTheEnginesMetrics reads a real engine's /metrics with the
// router's scrape parser, idle and while it serves, and holds each load
// signal against the same page read by Prometheus's own text parser.
func TestScrapeReadsTheEnginesMetrics(t *testing.T) {
	e := engines(t)[1]
	page := func() []byte {
		resp, err := client.Get(e.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
		}
		return b
	}
	idle, err := discovery.ParseMetrics(bytes.NewReader(page()))
	if err != nil {
		t.Fatalf("the router cannot read vLLM's /metrics: %v", err)
	}
	if idle.Running != 0 || idle.Waiting != 0 || !idle.HasTokens || !idle.HasPreemptions {
		t.Errorf("idle engine read as %+v: want nothing running or waiting, the token counters and the preemption counter", idle)
	}

	// Four long answers at once on a batch of 16: running while decoding.
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); complete(t, e.URL, tokenPrompt(uint64(50+i), 700), 400) }()
	}
	var busy discovery.Scraped
	var busyPage []byte
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		busyPage = page()
		if busy, err = discovery.ParseMetrics(bytes.NewReader(busyPage)); err != nil {
			t.Fatal(err)
		}
		if busy.Running > 0 {
			break
		}
	}
	wg.Wait()
	if busy.Running == 0 || busy.KVUsage <= 0 || busy.Tokens <= idle.Tokens {
		t.Errorf("serving engine read as %+v (idle %+v): want running requests, KV use and more tokens", busy, idle)
	}
	// The same page, read by Prometheus's parser through a one-page server.
	srv := pageServer(t, busyPage)
	for name, got := range map[string]float64{"vllm:num_requests_running": float64(busy.Running),
		"vllm:num_requests_waiting": float64(busy.Waiting), "vllm:kv_cache_usage_perc": busy.KVUsage,
		"vllm:prompt_tokens_total": -1, "vllm:generation_tokens_total": -1, "vllm:num_preemptions_total": busy.Preemptions} {
		want := series(t, srv, name, nil)
		if got >= 0 && got != want {
			t.Errorf("%s: the router read %v, Prometheus %v", name, got, want)
		}
	}
	if sum := series(t, srv, "vllm:prompt_tokens_total", nil) + series(t, srv, "vllm:generation_tokens_total", nil); sum != busy.Tokens {
		t.Errorf("progress counters: the router read %v, Prometheus %v", busy.Tokens, sum)
	}
	// The KV bound's cache size: the engine's own num_gpu_blocks x block_size.
	if blocks, size := cacheConfigOf(t, e); busy.KVCacheTokens != blocks*size || blocks*size == 0 {
		t.Errorf("KV cache size: the router read %d tokens, the engine states %d blocks of %d", busy.KVCacheTokens, blocks, size)
	}
	// A completion batch runs on its one engine as a request per prompt,
	// each with its own output: what the KV bound counts it as.
	before := series(t, e.URL, "vllm:request_success_total", nil)
	complete(t, e.URL, [][]int{tokenPrompt(60, 100), tokenPrompt(61, 100)}, 8)
	if n := series(t, e.URL, "vllm:request_success_total", nil) - before; n != 2 {
		t.Errorf("a batch of 2 prompts finished as %v requests on the engine, want 2", n)
	}
}

// pageServer serves one fixed /metrics page.
func pageServer(t *testing.T, page []byte) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write(page) }))
	t.Cleanup(srv.Close)
	return srv.URL
}
