package scoring

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/index"
)

const bs = 4 // block size of the hand-built index

// seq returns n consecutive token ids starting at from.
func seq(from, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(from + i)
	}
	return out
}

// store puts the first blocks of tokens on pod's GPU as a BlockStored would.
func store(t *testing.T, ix *index.Index, pod string, tokens []uint32, tier index.Tier) {
	t.Helper()
	n := len(tokens) / bs
	hashes := make([]uint64, n)
	for i := range hashes {
		hashes[i] = uint64(len(pod))<<32 | uint64(tokens[i*bs]) // any distinct engine hashes
	}
	if err := ix.Store(index.Engine{Pod: pod}, &index.Stored{Hashes: hashes, Tokens: tokens[:n*bs], BlockSize: bs, Tier: tier}); err != nil {
		t.Fatal(err)
	}
}

func fresh(running, waiting, inflight int, kv float64) Load {
	return Load{Running: running, Waiting: waiting, InFlight: inflight, KVUsage: kv, Fresh: true}
}

func picker(t *testing.T, ix *index.Index, scorers ...config.Scorer) *Picker {
	t.Helper()
	ws, err := FromConfig(config.Scoring{Scorers: scorers})
	if err != nil {
		t.Fatal(err)
	}
	return NewPicker(ix, ws)
}

// TestPrefixFollowsIndex: the pod holding more leading blocks wins, offload
// tiers count partly, and a later block held without its predecessors
// counts for nothing (leading blocks only).
func TestPrefixFollowsIndex(t *testing.T) {
	ix := index.New(index.Config{BlockSize: bs})
	prompt := seq(100, 10*bs)
	store(t, ix, "a", prompt[:3*bs], index.TierGPU)
	store(t, ix, "b", prompt[:6*bs], index.TierGPU)
	store(t, ix, "c", prompt[:8*bs], index.TierCPU)
	p := picker(t, ix, config.Scorer{Type: PrefixType, Weight: 1})
	pods := []Pod{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}}
	d, err := p.Explain(&Request{Tokens: prompt}, pods)
	if err != nil {
		t.Fatal(err)
	}
	gpuOnly := picker(t, ix, config.Scorer{Type: PrefixType, Weight: 1, Params: map[string]float64{"offload_weight": 0}})
	if g, _ := gpuOnly.Explain(&Request{Tokens: prompt}, pods); g.Scores[2].ByScorer[0] != 0 {
		t.Errorf("offload_weight 0 still counts CPU blocks: %v", g)
	}
	want := []float64{0.3, 0.6, 0.4, 0} // c: 8 CPU blocks at offload weight 0.5
	for i, w := range want {
		if got := d.Scores[i].ByScorer[0]; got < w-1e-9 || got > w+1e-9 {
			t.Errorf("%s: prefix score %.3f, want %.3f\n%v", pods[i].Name, got, w, d)
		}
	}
	if d.Pod != "b" || d.Blocks != 10 || d.Scores[1].Hit.GPUBlocks != 6 {
		t.Errorf("decision %v", d)
	}
}

// TestLoadScorers checks queue, in-flight, kv-usage and staleness together.
func TestLoadScorers(t *testing.T) {
	pods := []Pod{{Name: "a", Load: fresh(4, 0, 4, 0.9)}, {Name: "b", Load: fresh(4, 10, 14, 0.2)},
		{Name: "c", Load: fresh(4, 5, 2, 0.5)}, {Name: "stale", Load: Load{InFlight: 0}}}
	p := picker(t, nil, config.Scorer{Type: QueueType, Weight: 1}, config.Scorer{Type: InFlightType, Weight: 1},
		config.Scorer{Type: KVUsageType, Weight: 1})
	d, err := p.Explain(&Request{}, pods)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]float64{{1, 1 - 4.0/14, 0.1}, {0, 0, 0.8}, {0.5, 1 - 2.0/14, 0.5}, {0, 1, 0}}
	for i := range pods {
		for j, w := range want[i] {
			if got := d.Scores[i].ByScorer[j]; got < w-1e-9 || got > w+1e-9 {
				t.Errorf("%s %s: %.3f, want %.3f", pods[i].Name, p.Types()[j], got, w)
			}
		}
	}
}

// TestCostPrefersShortPrefill: a pod with the prefix cached but a long
// queue loses to an idle pod once the queue's prefill outweighs the cached
// part, and wins while it does not.
func TestCostPrefersShortPrefill(t *testing.T) {
	ix := index.New(index.Config{BlockSize: bs})
	prompt := seq(1, 256*bs) // 1,024 tokens
	store(t, ix, "warm", prompt, index.TierGPU)
	c := picker(t, ix, config.Scorer{Type: CostType, Weight: 1, Params: map[string]float64{"waiting_tokens": 512}})
	for _, tc := range []struct {
		waiting int
		want    string
	}{{1, "warm"}, {3, "cold"}} {
		pods := []Pod{{Name: "warm", Load: fresh(0, tc.waiting, tc.waiting, 0)}, {Name: "cold", Load: fresh(0, 0, 0, 0)}}
		d, err := c.Explain(&Request{Tokens: prompt}, pods)
		if err != nil {
			t.Fatal(err)
		}
		if d.Pod != tc.want {
			t.Errorf("warm pod with %d waiting: picked %s, want %s\n%v", tc.waiting, d.Pod, tc.want, d)
		}
	}
}

// TestCostReadsThePendingPrefill: the router's exact pending prefill is the
// queue the cost scorer weighs, also when the scrape has not seen it yet,
// and requests that already stream (in flight, no pending tokens) are no
// queue, however far the scraped running count lags them.
func TestCostReadsThePendingPrefill(t *testing.T) {
	ix := index.New(index.Config{BlockSize: bs})
	prompt := seq(1, 256*bs) // 1,024 tokens
	store(t, ix, "warm", prompt, index.TierGPU)
	c := picker(t, ix, config.Scorer{Type: CostType, Weight: 1})
	for _, tc := range []struct {
		inFlight, pending int
		want              string
	}{{40, 0, "warm"}, {1, 512, "warm"}, {3, 3 * 1024, "cold"}} {
		warm := fresh(0, 0, tc.inFlight, 0)
		warm.PendingTokens = tc.pending
		pods := []Pod{{Name: "warm", Load: warm}, {Name: "cold", Load: fresh(0, 0, 0, 0)}}
		d, err := c.Explain(&Request{Tokens: prompt}, pods)
		if err != nil {
			t.Fatal(err)
		}
		if d.Pod != tc.want {
			t.Errorf("warm pod with %d in flight, %d pending tokens: picked %s, want %s\n%v", tc.inFlight, tc.pending,
				d.Pod, tc.want, d)
		}
	}
}

// TestSpeculationAndSpread: requests nobody has cached take turns over the
// pods; a repeat of a just-routed prompt follows it through the speculative
// entry before any event arrives; that entry lasts while the request has
// not started and expires a TTL after it did.
func TestSpeculationAndSpread(t *testing.T) {
	now := time.Unix(1000, 0)
	ix := index.New(index.Config{BlockSize: bs, SpeculationTTL: 2 * time.Second, Now: func() time.Time { return now }})
	p := picker(t, ix, config.Scorer{Type: PrefixType, Weight: 3}, config.Scorer{Type: SpreadType, Weight: 1})
	pods := []Pod{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	var got []string
	var holds []*index.Hold
	for i := range 3 {
		d, err := p.Pick(&Request{Tokens: seq(1000*(i+1), 8*bs)}, pods)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d.Pod)
		holds = append(holds, d.Hold)
	}
	if strings.Join(got, ",") != "a,b,c" {
		t.Errorf("three new prefixes went to %v, want one per pod", got)
	}
	d, err := p.Explain(&Request{Tokens: seq(2000, 8*bs)}, pods)
	if err != nil {
		t.Fatal(err)
	}
	if d.Pod != "b" || d.Scores[1].Hit.Speculative != 8 {
		t.Errorf("repeat of the second prefix: %v, want b through 8 speculative blocks", d)
	}
	now = now.Add(time.Minute)
	if d, _ = p.Explain(&Request{Tokens: seq(2000, 8*bs)}, pods); d.Scores[1].Hit.Speculative != 8 {
		t.Errorf("speculative entry of a request that has not started expired: %v", d)
	}
	if d.Hold != nil {
		t.Error("Explain wrote speculative entries")
	}
	holds[1].Settle()
	now = now.Add(3 * time.Second)
	if d, _ = p.Explain(&Request{Tokens: seq(2000, 8*bs)}, pods); d.Scores[1].Hit.Blocks != 0 {
		t.Errorf("speculative entry outlived its TTL: %v", d)
	}
	out, err := json.Marshal(d)
	if err != nil || !strings.Contains(string(out), `"scorers":["prefix","spread"]`) ||
		!strings.Contains(string(out), `"hit":{"blocks":0,"gpu_blocks":0,"speculative":0}`) {
		t.Errorf("explain JSON %s (%v)", out, err)
	}
	if s := p.Stats(); s.Decisions != 3 {
		t.Errorf("stats %+v: Explain must not count", s)
	}
}

// TestUntokenizableRoutesOnLoad: without token ids the request still goes
// somewhere, decided by load, and is counted.
func TestUntokenizableRoutesOnLoad(t *testing.T) {
	ix := index.New(index.Config{BlockSize: bs})
	p := picker(t, ix, config.DefaultScorers()...)
	pods := []Pod{{Name: "busy", Load: fresh(10, 8, 18, 0.7)}, {Name: "idle", Load: fresh(1, 0, 1, 0.1)}}
	d, err := p.Pick(&Request{Untokenizable: "unknown_model"}, pods)
	if err != nil {
		t.Fatal(err)
	}
	if d.Pod != "idle" || d.Untokenizable == "" || p.Stats().Untokenizable != 1 {
		t.Errorf("decision %v, stats %+v", d, p.Stats())
	}
	if _, err := p.Pick(&Request{}, nil); !errors.Is(err, ErrNoPods) {
		t.Errorf("no pods: %v", err)
	}
}

// TestHistoryLearnsFromDecisions: the routing-history scorer follows its own
// decisions, not the caches: a prompt sharing the first character blocks of
// an earlier one scores on the pod that earlier one was sent to.
func TestHistoryLearnsFromDecisions(t *testing.T) {
	p := picker(t, nil, config.Scorer{Type: HistoryType, Weight: 1, Params: map[string]float64{"block_chars": 8}},
		config.Scorer{Type: SpreadType, Weight: 0.5})
	pods := []Pod{{Name: "a"}, {Name: "b"}}
	first := strings.Repeat("system prompt. ", 8) // 120 chars: 15 blocks
	if _, err := p.Pick(&Request{Text: first + "question one"}, pods); err != nil {
		t.Fatal(err)
	}
	d, err := p.Explain(&Request{Text: first + "another question"}, pods)
	if err != nil {
		t.Fatal(err)
	}
	if d.Pod != "a" || d.Scores[0].ByScorer[0] < 0.8 || d.Scores[1].ByScorer[0] != 0 {
		t.Errorf("history did not follow the first decision: %v", d)
	}
	p.Forget("a")
	if d, _ = p.Explain(&Request{Text: first + "another question"}, pods); d.Scores[0].ByScorer[0] != 0 {
		t.Errorf("history kept a pod that left: %v", d)
	}
}

// TestFromConfigNamesTheKey checks scorer-level validation errors.
func TestFromConfigNamesTheKey(t *testing.T) {
	_, err := FromConfig(config.Scoring{Scorers: []config.Scorer{{Type: "prefix", Params: map[string]float64{"x": 1}},
		{Type: "nope"}, {Type: "cost", Params: map[string]float64{"step_seconds": -1}}}})
	for _, w := range []string{"scoring.scorers[0].params.x: prefix takes no such parameter",
		`scoring.scorers[1].type: unknown scorer "nope"`, "scoring.scorers[2].params.step_seconds: must be >= 0"} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v lacks %q", err, w)
		}
	}
	for _, typ := range Types() {
		ws, err := FromConfig(config.Scoring{Scorers: []config.Scorer{{Type: typ, Weight: 1}}})
		if err != nil || ws[0].Scorer.Type() != typ {
			t.Errorf("%s: built %v, %v", typ, ws, err)
		}
	}
}

// TestConcurrentPicks runs decisions from many goroutines, as the proxy's
// handlers will (run it with -race): every decision is counted, and
// requests no pod has cached still spread over every pod.
func TestConcurrentPicks(t *testing.T) {
	ix := index.New(index.Config{BlockSize: bs})
	p := picker(t, ix, config.Scorer{Type: PrefixType, Weight: 3}, config.Scorer{Type: SpreadType, Weight: 1},
		config.Scorer{Type: HistoryType, Weight: 1, Params: map[string]float64{"block_chars": 4}})
	pods := []Pod{{Name: "a"}, {Name: "b"}, {Name: "c"}, {Name: "d"}}
	const workers, each = 8, 250
	var mu sync.Mutex
	counts := map[string]int{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				d, err := p.Pick(&Request{Tokens: seq((w*each+i)*1000, 4*bs)}, pods)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				counts[d.Pod]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if s := p.Stats(); s.Decisions != workers*each {
		t.Errorf("%d decisions counted, want %d", s.Decisions, workers*each)
	}
	for _, pod := range pods {
		if n := counts[pod.Name]; n < workers*each/len(pods)/2 {
			t.Errorf("pod %s got %d of %d new prefixes: %v", pod.Name, n, workers*each, counts)
		}
	}
}

// TestDataParallelRanks: with two ranks per pod, a pod is credited with its
// best rank's blocks and the decision names that rank; a request no rank
// holds takes the pod's ranks in turn (Explain does not advance the turn),
// and the speculative entry goes to the rank chosen, so the next request
// with the prefix follows it. Without data parallelism rank 1's blocks do
// not count and no rank is named.
func TestDataParallelRanks(t *testing.T) {
	ix := index.New(index.Config{BlockSize: bs})
	prompt := seq(100, 6*bs)
	hashes := []uint64{1, 2, 3, 4, 5, 6}
	if err := ix.Store(index.Engine{Pod: "b", Rank: 1}, &index.Stored{Hashes: hashes, Tokens: prompt, BlockSize: bs}); err != nil {
		t.Fatal(err)
	}
	store(t, ix, "b", prompt[:2*bs], index.TierGPU) // rank 0 holds less
	pods := []Pod{{Name: "a", Load: fresh(0, 0, 0, 0)}, {Name: "b", Load: fresh(0, 0, 0, 0)}}

	p := picker(t, ix, config.DefaultScorers()...)
	p.SetDataParallelSize(2)
	d, err := p.Pick(&Request{Tokens: prompt}, pods)
	if err != nil || d.Pod != "b" || d.DPRank != 1 || d.Scores[1].Hit.Blocks != 6 || d.Scores[1].Hit.Rank != 1 {
		t.Fatalf("prefix on rank 1: %+v, %v", d, err)
	}

	only := pods[:1]
	e, _ := p.Explain(&Request{Tokens: seq(900, 3*bs)}, only)
	var ranks []int
	for i := range 3 {
		d, err := p.Pick(&Request{Tokens: seq(1000+100*i, 3*bs)}, only)
		if err != nil {
			t.Fatal(err)
		}
		ranks = append(ranks, d.DPRank)
	}
	if e.DPRank != 0 || ranks[0] != 0 || ranks[1] != 1 || ranks[2] != 0 {
		t.Errorf("requests without a hit: explained rank %d, picked ranks %v, want 0 then 0 1 0", e.DPRank, ranks)
	}
	// The second of those went to rank 1 speculatively: the same prompt follows it.
	if d, _ := p.Explain(&Request{Tokens: seq(1100, 3*bs)}, only); d.DPRank != 1 || d.Scores[0].Hit.Speculative != 3 {
		t.Errorf("after a speculative entry on rank 1: %+v", d)
	}

	plain := picker(t, ix, config.DefaultScorers()...)
	if d, _ := plain.Explain(&Request{Tokens: prompt}, pods); d.DPRank != -1 || d.Scores[1].Hit.Blocks != 2 {
		t.Errorf("without data parallelism: %+v", d)
	}
}

// TestPickAdmittedCommitsOnlyWhatIsAdmitted: when the gate refuses the
// chosen pod, the index gets no speculative entry and the pod is not
// recorded as chosen; when it admits, both happen.
func TestPickAdmittedCommitsOnlyWhatIsAdmitted(t *testing.T) {
	ix := index.New(index.Config{BlockSize: bs})
	p := picker(t, ix, config.Scorer{Type: "prefix", Weight: 1})
	req := &Request{Tokens: seq(7, 4*bs)}
	pods := []Pod{{Name: "a", Load: fresh(0, 0, 0, 0)}, {Name: "b", Load: fresh(0, 0, 0, 0)}}
	var asked []string
	refuse := func(pod string, uncached int) bool {
		asked = append(asked, pod)
		if uncached != 4*bs {
			t.Errorf("admit was told %d uncached tokens, want %d (no pod holds any)", uncached, 4*bs)
		}
		return false
	}
	if _, err := p.PickAdmitted(req, pods, refuse); !errors.Is(err, ErrNotAdmitted) {
		t.Fatalf("refused pick: %v, want ErrNotAdmitted", err)
	}
	if s := ix.Stats(); s.Speculative != 0 || p.Stats().Decisions != 0 {
		t.Fatalf("a refused pick committed: %d speculative entries, %d decisions", s.Speculative, p.Stats().Decisions)
	}
	d, err := p.PickAdmitted(req, pods, func(pod string, _ int) bool { return pod == asked[0] })
	if err != nil || d.Pod != asked[0] || d.UncachedTokens != 4*bs {
		t.Fatalf("admitted pick: %v (uncached %d), %v; want %s (nothing committed, so the same choice)", d.Pod,
			d.UncachedTokens, err, asked[0])
	}
	if s := ix.Stats(); s.Speculative != 4 || p.Stats().Decisions != 1 {
		t.Errorf("admitted pick: %d speculative entries (want 4), %d decisions", s.Speculative, p.Stats().Decisions)
	}
	// The speculative entries make the chosen pod hold the prompt.
	if again, _ := p.Explain(req, pods); again.Pod != d.Pod || again.UncachedTokens != 0 {
		t.Errorf("after the pick: %s with %d uncached tokens, want %s with 0", again.Pod, again.UncachedTokens, d.Pod)
	}
}
