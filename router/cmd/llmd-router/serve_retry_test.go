package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestServeRetries5xxOnlyBeforeStreaming puts two broken pods next to one
// simulated replica: one answers every request with 503 (an engine that is
// overloaded or restarting), the other sends a 200 and half an SSE event
// and then drops the connection. Requests that land on the first must be
// retried on another pod and succeed; requests that land on the second
// must not be retried (the client already has the status line) and must
// reach the client as a broken body, never as a clean end. The broken pods
// are stand-ins: the simulator cannot be told to fail that way.
func TestServeRetries5xxOnlyBeforeStreaming(t *testing.T) {
	var unavailableHits, brokenHits atomic.Int64
	// Both report an idle engine, so the scorers find them attractive.
	idle := func(w http.ResponseWriter) {
		io.WriteString(w, "vllm:num_requests_running 0\nvllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 0\n")
	}
	unavailable := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			idle(w)
			return
		}
		unavailableHits.Add(1)
		http.Error(w, "engine restarting", http.StatusServiceUnavailable)
	}))
	defer unavailable.Close()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			idle(w)
			return
		}
		brokenHits.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, `data: {"choices":[{"te`)
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}))
	defer broken.Close()

	infos, _ := startReplicas(t, 1, "--time-scale", "20")
	good := infos[0].Pod
	infos = append(infos, infos[0], infos[0])
	infos[1].Pod, infos[1].HTTP = "unavailable", unavailable.URL
	infos[2].Pod, infos[2].HTTP = "broken", broken.URL
	r := startRouter(t, infos)

	var ok, cut int
	for i := range 30 {
		resp := post(t, r.url+"/v1/completions", completion(t, tokens(20, uint32(i)), 3, true))
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		pod := resp.Header.Get("X-Llmd-Pod")
		switch {
		case pod == good && err == nil && resp.StatusCode == http.StatusOK && strings.HasSuffix(string(body), "data: [DONE]\n\n"):
			ok++
		case pod == "broken" && err != nil:
			cut++
		default:
			t.Errorf("request %d: pod %q status %d err %v body %q", i, pod, resp.StatusCode, err, body)
		}
	}
	retries := r.gauge(t, "llmd_router_retries_total")
	t.Logf("%d ok, %d cut mid-body; 503 pod hit %d times, broken pod %d times; %v retries",
		ok, cut, unavailableHits.Load(), brokenHits.Load(), retries)
	if unavailableHits.Load() == 0 || brokenHits.Load() == 0 {
		t.Fatal("the picker never chose a broken pod, so nothing was tested")
	}
	if retries != float64(unavailableHits.Load()) {
		t.Errorf("%v retries for %d 503 answers: every 503 must be retried, nothing else", retries, unavailableHits.Load())
	}
	if int64(cut) != brokenHits.Load() {
		t.Errorf("%d cut responses for %d requests to the broken pod: a started response was retried or ended cleanly",
			cut, brokenHits.Load())
	}
}
