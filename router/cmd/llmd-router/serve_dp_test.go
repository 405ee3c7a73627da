package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/freeport"
	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
)

// dpPod is one data-parallel vLLM pod of two ranks: two simulated engines
// publishing KV events on consecutive ports (rank r on the pod's ports + r,
// as vLLM offsets them, with its rank in every batch), behind a front that
// hands each request to the rank vLLM's X-data-parallel-rank header names.
// The front is an in-test stand-in for vLLM's DP coordinator, which the
// simulator does not model; it records the header of every completion.
type dpPod struct {
	front *httptest.Server
	ranks [2]*sim.Replica
	http  [2]*httptest.Server
	kv    string // rank 0's KV-event address; rank 1 is on the next port
	reply string

	mu      sync.Mutex
	headers []string
}

func startDPPod(t *testing.T, files testenv.ModelFiles) *dpPod {
	t.Helper()
	model, err := chat.LoadModel(files.TokenizerJSON, files.TokenizerConfig, chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := &dpPod{}
	p.front = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := r.Header.Get("X-data-parallel-rank")
		if r.URL.Path == "/v1/completions" { // not the router's canary asking /tokenize
			p.mu.Lock()
			p.headers = append(p.headers, h)
			p.mu.Unlock()
		}
		rank, err := strconv.Atoi(h)
		if err != nil || rank < 0 || rank > 1 {
			rank = 0 // vLLM's own balancing stands behind a missing header
		}
		u, _ := url.Parse(p.http[rank].URL)
		relay(u, http.DefaultTransport).ServeHTTP(w, r)
	}))
	t.Cleanup(p.front.Close)
	topic := "kv@" + p.front.Listener.Addr().String() + "@" + simModelName
	for attempt := 0; ; attempt++ {
		kv, replay := freePortPair(t), freePortPair(t)
		var err error
		for r := range 2 {
			cfg := sim.ReplicaConfig{Pod: fmt.Sprint("rank-", r), Model: simModelName, Engine: sim.DefaultEngineConfig(),
				TimeScale: 10, Topic: topic, DataParallelRank: r, Chat: model,
				KVAddr: fmt.Sprintf("tcp://127.0.0.1:%d", kv+r), ReplayAddr: fmt.Sprintf("tcp://127.0.0.1:%d", replay+r)}
			if p.ranks[r], err = sim.NewReplica(cfg); err != nil {
				break
			}
		}
		if err == nil {
			p.kv, p.reply = fmt.Sprintf("tcp://127.0.0.1:%d", kv), fmt.Sprintf("tcp://127.0.0.1:%d", replay)
			break
		}
		if attempt == 10 {
			t.Fatalf("binding two ranks' KV-event ports: %v", err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for r, rp := range p.ranks {
		p.http[r] = httptest.NewServer(rp.Handler())
		wg.Go(func() { rp.Run(ctx) })
	}
	t.Cleanup(func() {
		cancel()
		wg.Wait()
		for _, s := range p.http {
			s.Close()
		}
	})
	return p
}

// freePortPair returns a loopback port whose successor is free too, both
// below the ephemeral range (freeport.Ports).
func freePortPair(t *testing.T) int {
	t.Helper()
	ports, err := freeport.Ports(2)
	if err != nil {
		t.Fatal(err)
	}
	return ports[0]
}

func (p *dpPod) lastHeader() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.headers[len(p.headers)-1]
}

// TestDataParallelPod: the router follows both ranks' KV events from the
// pod's addresses alone (rank 1 on the ports + 1) and sends each request
// with the rank that holds its prefix: one cached on rank 1 by a request
// sent straight to it is explained on rank 1 from events (no speculative
// entry), and routed with X-data-parallel-rank: 1.
func TestDataParallelPod(t *testing.T) {
	files := testenv.Tokenizer(t, "qwen3")
	p := startDPPod(t, files)
	r := startRouter(t, []sim.ReplicaInfo{{Pod: "dp", HTTP: p.front.URL, KV: p.kv, Replay: p.reply}},
		"--block-size", "16", "--data-parallel-size", "2", "--tokenizer", files.TokenizerJSON, "--tokenizer-config", files.TokenizerConfig)

	first := tokens(64, 21)
	resp := send(t, r.url+"/v1/completions", completion(t, first, 2, false))
	if resp.StatusCode != http.StatusOK || p.lastHeader() != "0" {
		t.Fatalf("first request: status %d, rank header %q (want 0: no rank holds it, rank 0's turn)", resp.StatusCode, p.lastHeader())
	}

	second := tokens(64, 22)
	resp = send(t, p.http[1].URL+"/v1/completions", completion(t, second, 2, false))
	waitFor(t, "the router to learn rank 1's blocks", func() bool {
		e := explain(t, r.url, completion(t, second, 2, false))
		h := e.Scores[e.Chosen].Hit
		return e.DPRank == 1 && h.Rank == 1 && h.GPUBlocks == 4 && h.Speculative == 0
	})
	resp = send(t, r.url+"/v1/completions", completion(t, second, 2, false))
	if resp.StatusCode != http.StatusOK || p.lastHeader() != "1" {
		t.Fatalf("request cached on rank 1: status %d, rank header %q", resp.StatusCode, p.lastHeader())
	}
	waitFor(t, "rank 0's blocks of the first request", func() bool {
		e := explain(t, r.url, completion(t, first, 2, false))
		return e.DPRank == 0 && e.Scores[e.Chosen].Hit.GPUBlocks == 4 && e.Scores[e.Chosen].Hit.Speculative == 0
	})
}
