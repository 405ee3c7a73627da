package main

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// explained is the /v1/route answer.
type explained struct {
	Path string `json:"path"`
	scoring.Decision
}

func explain(t *testing.T, url string, body []byte) explained {
	t.Helper()
	resp := post(t, url+"/v1/route", body)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e explained
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/v1/route: status %d: %s", resp.StatusCode, b)
	}
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("/v1/route: %v: %s", err, b)
	}
	return e
}

// TestServeReplicasSideBySide runs two router processes over the same two
// replicas with the real Qwen3 tokenizer. A request served through router A
// must be explained by router B (which never routed it) as cached on the pod
// that served it, from the KV events B follows on its own: each replica keeps
// its own full index. It also checks chat bodies in /v1/route, the
// untokenizable path and that /metrics carries every family the operator
// needs, the tokenizer canary agreeing with the replicas' /tokenize.
func TestServeReplicasSideBySide(t *testing.T) {
	files := testenv.Tokenizer(t, "qwen3")
	tok := []string{"--tokenizer", files.TokenizerJSON, "--tokenizer-config", files.TokenizerConfig}
	infos, _ := startReplicas(t, 2, append([]string{"--time-scale", "10"}, tok...)...)
	// The block size is configured, as the provider does: learned from events
	// only, the first request would have no blocks to measure.
	routerArgs := append([]string{"--canary-interval", "300ms", "--block-size", "16"}, tok...)
	a := startRouter(t, infos, routerArgs...)
	b := startRouter(t, infos, routerArgs...)

	prompt := tokens(64, 42) // four 16-token blocks
	resp := send(t, a.url+"/v1/completions", completion(t, prompt, 4, false))
	served := resp.Header.Get("X-Llmd-Pod")
	if resp.StatusCode != http.StatusOK || served == "" {
		t.Fatalf("status %d, pod %q", resp.StatusCode, served)
	}
	waitFor(t, "router B to learn the blocks from KV events", func() bool {
		e := explain(t, b.url, completion(t, prompt, 4, false))
		return e.Pod == served && e.Scores[e.Chosen].Hit.GPUBlocks == 4
	})
	e := explain(t, b.url, completion(t, prompt, 4, false))
	if e.Path != "/v1/completions" || e.Blocks != 4 || e.Scores[e.Chosen].Hit.Speculative != 0 || e.Untokenizable != "" {
		t.Errorf("router B's explanation: %+v", e)
	}
	for _, s := range e.Scores {
		if s.Pod != served && s.Hit.Blocks != 0 {
			t.Errorf("pod %s credited with %d blocks it never computed", s.Pod, s.Hit.Blocks)
		}
	}

	chatBody := []byte(`{"model": "` + simModelName + `", "messages": [{"role": "user", "content": "` +
		"Summarise the plot of a long novel about a lighthouse keeper in three short sentences, please." + `"}]}`)
	if e := explain(t, a.url, chatBody); e.Path != "/v1/chat/completions" || e.Blocks < 1 || e.Untokenizable != "" {
		t.Errorf("chat explanation: %+v", e)
	}
	salted := []byte(`{"model": "` + simModelName + `", "cache_salt": "tenant-a", "messages": [{"role": "user", "content": "hi"}]}`)
	if e := explain(t, a.url, salted); e.Untokenizable != "" {
		t.Errorf("salted request explanation: %+v", e)
	}
	pictured := []byte(`{"model": "` + simModelName + `", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]}`)
	e = explain(t, a.url, pictured)
	if e.Untokenizable == "" {
		t.Errorf("image request explanation: %+v", e)
	}
	untokenizable := e.Untokenizable
	send(t, a.url+"/v1/chat/completions", pictured)

	waitFor(t, "a canary round that agrees", func() bool {
		return a.gauge(t, "llmd_router_tokenizer_canary_checks_total", "result", "agree") >= 1
	})
	fams := metrics(t, a.url+"/metrics")
	for _, c := range []struct {
		name   string
		labels []string
		min    float64
	}{
		{"llmd_router_decisions_total", []string{"outcome", "routed"}, 1},
		{"llmd_router_decisions_total", []string{"outcome", "untokenizable"}, 1},
		{"llmd_router_untokenizable_requests_total", []string{"reason", untokenizable}, 1},
		{"llmd_router_prefix_blocks_matched_ratio", nil, 1},
		{"llmd_router_pod_in_flight", nil, 0},
		{"llmd_router_upstream_duration_seconds", []string{"endpoint", "completions"}, 1},
		{"llmd_router_upstream_first_byte_seconds", []string{"endpoint", "chat_completions"}, 1},
		{"llmd_router_index_keys", nil, 4},
		{"llmd_router_index_orphans", nil, 0},
		{"llmd_router_index_speculative_held", nil, 0},
		{"llmd_router_kv_event_lag_seconds", nil, 0},
		{"llmd_router_kv_event_gaps_total", nil, 0},
		{"llmd_router_kv_event_replays_total", nil, 2},
		{"llmd_router_kv_event_purges_total", nil, 0},
		{"llmd_router_tokenizer_engine_path", nil, 0},
		{"llmd_router_queued_requests", nil, 0},
	} {
		if v := sum(fams, c.name, c.labels...); v < c.min {
			t.Errorf("%s%v = %v, want >= %v (-1: missing)", c.name, c.labels, v, c.min)
		}
	}
	if n := len(fams["llmd_router_pod_in_flight"].GetMetric()); n != 2 {
		t.Errorf("llmd_router_pod_in_flight has %d series, want one per pod", n)
	}
}
