package discovery_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
	"github.com/llmd-dev/terraform-provider-llmd/router/chat/chattest"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/discovery"
	"github.com/llmd-dev/terraform-provider-llmd/router/index"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents/zmqtransport"
	"github.com/llmd-dev/terraform-provider-llmd/router/prompt"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// The scenario tests run the routing core the way `llmd-router serve` will:
// a static Fleet over simulated vLLM replicas that serve real HTTP and
// publish KV events over ZeroMQ, the real ingestion into the block index,
// /metrics scraping, and the picker. The test itself forwards each request
// to the chosen replica (the proxy is the next issue).

const (
	simModel  = "qwen"
	blockSize = 16 // the simulator's (vLLM's CUDA default)
)

// simEngine is a small, slow engine: 256 blocks of cache and at most two
// running requests, so queues and evictions happen with few requests.
func simEngine() sim.EngineConfig {
	ec := sim.DefaultEngineConfig()
	ec.NumGPUBlocks = 256
	ec.MaxNumSeqs = 2
	return ec
}

// startSim serves n replicas on loopback until the test ends.
func startSim(t *testing.T, n int, timeScale float64) *sim.Fleet {
	t.Helper()
	return startSimWith(t, n, timeScale, false)
}

// startSimWith is startSim with the replay sockets optionally off.
func startSimWith(t *testing.T, n int, timeScale float64, noReplay bool) *sim.Fleet {
	t.Helper()
	f, err := sim.StartFleet(sim.FleetConfig{Replicas: n, Host: "127.0.0.1", NoReplay: noReplay, Replica: sim.ReplicaConfig{
		Model: simModel, Engine: simEngine(), TimeScale: timeScale, BufferSteps: 10000}})
	if err != nil {
		t.Fatal(err)
	}
	stop := f.Start(context.Background())
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("simulated fleet: %v", err)
		}
	})
	return f
}

// router is the routing core assembled as the serve command assembles it.
type router struct {
	ix       *index.Index
	in       *kvevents.Ingestor
	fleet    *discovery.Fleet
	picker   *scoring.Picker
	prompter scoring.Prompter
	stop     func()
}

func startRouter(t *testing.T, simFleet *sim.Fleet, scorers ...config.Scorer) *router {
	t.Helper()
	cfg := config.Config{Model: simModel, BlockSize: blockSize, Scoring: config.Scoring{Scorers: scorers}}
	for _, info := range simFleet.Infos {
		cfg.Discovery.Static = append(cfg.Discovery.Static, config.StaticPod{Name: info.Pod, HTTP: info.HTTP,
			KVEvents: info.KV, Replay: info.Replay})
	}
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ws, err := scoring.FromConfig(cfg.Scoring)
	if err != nil {
		t.Fatal(err)
	}
	r := &router{ix: index.New(index.Config{BlockSize: cfg.BlockSize, SpeculationTTL: cfg.Index.SpeculationTTL.Duration}),
		prompter: &prompt.Chat{Catalog: catalog(t)}}
	if r.in, err = kvevents.New(kvevents.Config{Index: r.ix, Transport: &zmqtransport.Transport{}, Poll: 20 * time.Millisecond,
		Logf: t.Logf}); err != nil {
		t.Fatal(err)
	}
	r.picker = scoring.NewPicker(r.ix, ws)
	r.fleet = discovery.NewFleet(discovery.FleetConfig{Addresses: discovery.Addresses{Discovery: cfg.Discovery, Model: cfg.Model},
		Ingestor: r.in, Metrics: cfg.Metrics, OnRemove: r.picker.Forget})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.fleet.Run(ctx, discovery.FromConfig(cfg.Discovery.Static)) }()
	stopped := false
	r.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("router fleet: %v", err)
		}
		r.in.Close()
	}
	t.Cleanup(r.stop)
	// Ready when every pod has been scraped once.
	deadline := time.Now().Add(10 * time.Second)
	for {
		pods := r.fleet.Pods(nil)
		fresh := 0
		for _, p := range pods {
			if p.Load.Fresh {
				fresh++
			}
		}
		if len(pods) == len(simFleet.Infos) && fresh == len(pods) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("router never saw every pod scraped: %+v", pods)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var (
	catalogOnce sync.Once
	catalogs    *chat.Catalog
)

// catalog serves the real Qwen3 tokenizer and template under the simulated
// replicas' model name, loaded once per test binary.
func catalog(t testing.TB) *chat.Catalog {
	t.Helper()
	m := chattest.Qwen3(t)
	catalogOnce.Do(func() {
		catalogs = chat.NewCatalog()
		catalogs.AddModel(simModel, m)
	})
	return catalogs
}

// body is a /v1/completions request with a token-id prompt.
func body(t testing.TB, prompt []uint32, maxTokens int) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"model": simModel, "prompt": prompt, "max_tokens": maxTokens})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decide routes a request body as the proxy will: prompter, then picker.
func (r *router) decide(t *testing.T, b []byte, commit bool) scoring.Decision {
	t.Helper()
	req, err := r.prompter.Prompt(chat.PathCompletions, b)
	if err != nil {
		t.Fatal(err)
	}
	pick := r.picker.Explain
	if commit {
		pick = r.picker.Pick
	}
	d, err := pick(req, r.fleet.Pods(nil))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// serve routes and forwards one request and waits for its response. It
// returns the decision and how many prompt tokens the chosen engine found
// cached (the change of its vllm:prefix_cache_hits_total; requests are
// sent one at a time, so the change is this request's).
func (r *router) serve(t *testing.T, prompt []uint32, maxTokens int) (scoring.Decision, int) {
	t.Helper()
	b := body(t, prompt, maxTokens)
	d := r.decide(t, b, true)
	target, ok := r.fleet.Target(d.Pod)
	if !ok {
		t.Fatalf("picked %s, which the fleet does not know", d.Pod)
	}
	before := counter(t, target.HTTP, "vllm:prefix_cache_hits_total")
	_, end := r.fleet.Begin(d.Pod, d.UncachedTokens, false)
	complete(t, target.HTTP, b)
	end()
	return d, int(counter(t, target.HTTP, "vllm:prefix_cache_hits_total") - before)
}

// complete posts a completions body straight to a replica and reads the reply.
func complete(t testing.TB, base string, b []byte) {
	t.Helper()
	resp, err := http.Post(base+"/v1/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: status %d: %s %v", base, resp.StatusCode, out, err)
	}
}

// counter reads one unlabelled-per-replica metric from a replica's /metrics.
func counter(t testing.TB, base, name string) float64 {
	t.Helper()
	fams := testenv.ScrapeMetrics(t, base)
	f := fams[name]
	if f == nil || len(f.Metric) != 1 {
		t.Fatalf("%s: metric %s missing or not single", base, name)
	}
	return value(f.Metric[0])
}

func value(m *dto.Metric) float64 {
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// hold returns how many leading blocks of prompt the index says pod holds
// through KV events (speculative entries excluded).
func (r *router) hold(prompt []uint32, pod string) int {
	for _, m := range r.ix.Lookup(index.Keys(nil, prompt, blockSize, "", nil), nil) {
		if m.Engine.Pod == pod {
			return m.Blocks - m.Speculative
		}
	}
	return 0
}

// holders counts the pods the index says hold all of prompt's full blocks.
func (r *router) holders(prompt []uint32) int {
	n := 0
	for _, m := range r.ix.Lookup(index.Keys(nil, prompt, blockSize, "", nil), nil) {
		if m.Blocks-m.Speculative == len(prompt)/blockSize {
			n++
		}
	}
	return n
}

// waitHold waits until the index shows pod holding exactly want leading
// blocks of prompt.
func (r *router) waitHold(t *testing.T, prompt []uint32, pod string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for r.hold(prompt, pod) != want {
		if time.Now().After(deadline) {
			t.Fatalf("index: %s holds %d blocks, want %d", pod, r.hold(prompt, pod), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// prompts makes n random prompts of the given length, as vLLM's
// prefix_repetition dataset draws them.
func prompts(seed uint64, n, length int) [][]uint32 {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([][]uint32, n)
	for i := range out {
		out[i] = make([]uint32, length)
		for j := range out[i] {
			out[i][j] = uint32(rng.IntN(151643))
		}
	}
	return out
}

func with(prefix, suffix []uint32) []uint32 {
	return append(append([]uint32(nil), prefix...), suffix...)
}

func infoOf(f *sim.Fleet, pod string) sim.ReplicaInfo {
	for _, info := range f.Infos {
		if info.Pod == pod {
			return info
		}
	}
	panic(fmt.Sprintf("no replica %s", pod))
}
