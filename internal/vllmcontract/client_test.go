package vllmcontract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// client is the tests' HTTP client; a real engine on one core answers a
// 4,000-token prompt in well under a second, so a minute means it hangs.
var client = &http.Client{Timeout: time.Minute}

// post sends body to url and returns the status and the whole answer.
func post(t testing.TB, url string, body any) (int, []byte) {
	t.Helper()
	status, out, err := tryPost(url, body)
	if err != nil {
		t.Fatal(err)
	}
	return status, out
}

// tryPost is post for goroutines other than the test's.
func tryPost(url string, body any) (int, []byte, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, nil, err
	}
	resp, err := client.Post(url, "application/json", bytes.NewReader(b))
	if err != nil {
		return 0, nil, fmt.Errorf("POST %s: %w", url, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, fmt.Errorf("POST %s: reading the answer: %w", url, err)
	}
	return resp.StatusCode, out, nil
}

// complete runs one completion of prompt (text or token ids) on url (an
// engine or a router) and fails t unless it succeeds.
func complete(t testing.TB, url string, prompt any, maxTokens int) []byte {
	t.Helper()
	status, out := post(t, url+"/v1/completions", map[string]any{"model": servedName, "prompt": prompt,
		"max_tokens": maxTokens, "temperature": 0, "ignore_eos": true})
	if status != http.StatusOK {
		t.Fatalf("completion on %s: %d %s", url, status, out)
	}
	return out
}

// series sums the samples of one family on a Prometheus text page whose
// labels include want; a family the page lacks fails t, so a renamed
// metric cannot read as zero.
func series(t testing.TB, url, name string, want map[string]string) float64 {
	t.Helper()
	fam := family(t, url, name)
	total := 0.0
	for _, m := range fam.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			match = match && labels[k] == v
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Gauge != nil:
			total += m.GetGauge().GetValue()
		case m.Untyped != nil:
			total += m.GetUntyped().GetValue()
		}
	}
	return total
}

// family is one metric family of url's /metrics; a family the page lacks
// fails t.
func family(t testing.TB, url, name string) *dto.MetricFamily {
	t.Helper()
	fam, ok := testenv.ScrapeMetrics(t, url)[name]
	if !ok {
		t.Fatalf("%s/metrics has no %s", url, name)
	}
	return fam
}

// tokenPrompt is n token ids drawn from the vocabulary's ordinary tokens
// (below Qwen's first special id, 151643), different for each seed.
func tokenPrompt(seed uint64, n int) []int {
	r := rand.New(rand.NewPCG(seed, 35))
	ids := make([]int, n)
	for i := range ids {
		ids[i] = r.IntN(151643)
	}
	return ids
}

// routed is the router's explanation of its decision for prompt, without
// sending it (POST /v1/route): per pod, the prompt's leading blocks it
// holds from KV events and those it holds only by speculation.
type routed map[string]struct{ gpu, speculative int }

func route(t testing.TB, routerURL string, prompt any) routed {
	t.Helper()
	status, out := post(t, routerURL+"/v1/route", map[string]any{"model": servedName, "prompt": prompt, "max_tokens": 1})
	if status != http.StatusOK {
		t.Fatalf("route: %d %s", status, out)
	}
	var d struct {
		Scores []struct {
			Pod string
			Hit struct {
				GPUBlocks   int `json:"gpu_blocks"`
				Speculative int
			}
		}
	}
	if err := json.Unmarshal(out, &d); err != nil {
		t.Fatalf("route answer %s: %v", out, err)
	}
	r := routed{}
	for _, s := range d.Scores {
		r[s.Pod] = struct{ gpu, speculative int }{s.Hit.GPUBlocks, s.Hit.Speculative}
	}
	return r
}

// settle waits until the router has applied every KV event the engines
// published: its applied-message count stops moving for 300 ms (the engines
// are idle between the tests' requests, so nothing new comes).
func settle(t testing.TB, routerURL string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	last, still := -1.0, 0
	for still < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the router's KV-event count did not settle in 30 s (last %v)", last)
		}
		n := series(t, routerURL, "llmd_router_kv_event_messages_total", nil)
		if n == last {
			still++
		} else {
			last, still = n, 0
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// engineHits asks the engine itself how many of prompt's leading blocks it
// holds: it serves prompt once more and reports the tokens its prefix
// cache supplied (vllm:prefix_cache_hits_total), in blocks of blockSize.
// The answer changes the cache (the prompt is then held), as any request does.
func engineHits(t testing.TB, engineURL string, prompt []int, blockSize int) int {
	t.Helper()
	before := series(t, engineURL, "vllm:prefix_cache_hits_total", nil)
	complete(t, engineURL, prompt, 1)
	hit := series(t, engineURL, "vllm:prefix_cache_hits_total", nil) - before
	if int(hit)%blockSize != 0 {
		t.Fatalf("the engine reports %v cached tokens, not whole blocks of %d", hit, blockSize)
	}
	return int(hit) / blockSize
}

// sameHolding checks that the router's index holds, for prompt on engine
// pod, exactly the blocks the engine itself reuses when serving it again.
func sameHolding(t testing.TB, routerURL, pod, engineURL string, prompt []int, blockSize int) (blocks int) {
	t.Helper()
	settle(t, routerURL)
	r := route(t, routerURL, prompt)[pod]
	if r.speculative != 0 {
		t.Fatalf("%s: %d speculative blocks; the tests send straight to the engines", pod, r.speculative)
	}
	got := engineHits(t, engineURL, prompt, blockSize)
	if r.gpu != got {
		t.Errorf("%s: the router's index holds %d of the prompt's blocks, the engine reused %d", pod, r.gpu, got)
	}
	return got
}
