package sim

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
)

// smallEngine is tight enough that preemption and eviction happen often.
func smallEngine(t *testing.T, blocks int) *Engine {
	t.Helper()
	cfg := DefaultEngineConfig()
	cfg.NumGPUBlocks, cfg.MaxNumSeqs, cfg.MaxBatchedTokens, cfg.Seed = blocks, 16, 256, 7
	e, err := NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// checkPool verifies the block accounting: reference counts match the
// blocks requests hold, the free queue holds exactly the unreferenced
// blocks, and the hash map points at blocks carrying that hash.
func checkPool(t *testing.T, e *Engine) {
	t.Helper()
	p := e.pool
	refs := make([]int32, len(p.blocks))
	for _, r := range e.running {
		for _, id := range r.blocks {
			refs[id]++
		}
	}
	free := 0
	for id := p.head; id >= 0; id = p.blocks[id].next {
		free++
		if free > len(p.blocks) {
			t.Fatal("free queue has a cycle")
		}
	}
	if free != p.nfree || p.nfree < 0 || p.nfree > len(p.blocks) {
		t.Fatalf("free queue walks %d blocks, counter says %d of %d", free, p.nfree, len(p.blocks))
	}
	for id, b := range p.blocks {
		if b.ref != refs[id] {
			t.Fatalf("block %d: ref %d, requests hold it %d times", id, b.ref, refs[id])
		}
		if b.ref < 0 || (b.ref == 0) != b.free {
			t.Fatalf("block %d: ref %d but free=%v", id, b.ref, b.free)
		}
	}
	for h, id := range p.cached {
		if b := p.blocks[id]; !b.hasHash || b.hash != h {
			t.Fatalf("cache maps %x to block %d holding %x (set %v)", h, id, b.hash, b.hasHash)
		}
	}
	if e.Running() > e.cfg.MaxNumSeqs {
		t.Fatalf("%d running, max %d", e.Running(), e.cfg.MaxNumSeqs)
	}
}

// eventMirror is what a subscriber learns from an engine's events.
type eventMirror map[uint64]bool

func (m eventMirror) apply(t *testing.T, b *kvevents.Batch) {
	t.Helper()
	for _, ev := range b.Events {
		switch ev.Kind {
		case kvevents.BlockStored:
			if ev.HasParent && !m[ev.ParentHash] {
				t.Fatalf("BlockStored with parent %x never announced", ev.ParentHash)
			}
			if len(ev.TokenIDs) != len(ev.BlockHashes)*ev.BlockSize {
				t.Fatalf("BlockStored: %d tokens for %d blocks", len(ev.TokenIDs), len(ev.BlockHashes))
			}
			for _, h := range ev.BlockHashes {
				if m[h] {
					t.Fatalf("BlockStored announces %x twice", h)
				}
				m[h] = true
			}
		case kvevents.BlockRemoved:
			for _, h := range ev.BlockHashes {
				if !m[h] {
					t.Fatalf("BlockRemoved of %x never stored", h)
				}
				delete(m, h)
			}
		case kvevents.AllBlocksCleared:
			clear(m)
		}
	}
}

// TestEngineInvariants drives an engine with a cache too small for its
// load, checking after every step that block accounting holds, that the
// published events describe the cache exactly, that every prefix hit was
// announced and that hit counters add up; and that every request finishes
// with its full output.
func TestEngineInvariants(t *testing.T) {
	e := smallEngine(t, 60)
	rng := rand.New(rand.NewPCG(3, 4))
	prefixes := make([][]uint32, 4)
	for i := range prefixes {
		prefixes[i] = randomTokens(rng, make([]uint32, 16*(2+rng.IntN(6))))
	}
	var reqs []*Request
	mirror := eventMirror{}
	now := 0.0
	sawPreemption := false
	var lastStats EngineStats
	for step := 0; step < 20000 && (len(reqs) < 200 || e.Busy()); step++ {
		for len(reqs) < 200 && rng.IntN(3) == 0 {
			p := append(append([]uint32(nil), prefixes[rng.IntN(len(prefixes))]...), randomTokens(rng, make([]uint32, 1+rng.IntN(40)))...)
			r := &Request{ID: uint64(len(reqs)), Prompt: p, MaxTokens: 1 + rng.IntN(200), Arrival: now}
			if err := e.Add(r); err != nil {
				t.Fatal(err)
			}
			reqs = append(reqs, r)
		}
		wasRunning := map[*Request]bool{}
		for _, r := range reqs {
			wasRunning[r] = r.running
		}
		d, ok := e.Schedule()
		if !ok {
			if e.Busy() {
				t.Fatalf("step %d: engine busy but scheduled nothing", step)
			}
			continue
		}
		if d <= 0 {
			t.Fatalf("step %d: duration %v", step, d)
		}
		now += d
		checkPool(t, e)
		admittedHits := uint64(0)
		var admitted []*Request
		for _, r := range reqs {
			if r.running && !wasRunning[r] {
				admittedHits += uint64(r.HitTokens)
				admitted = append(admitted, r)
			}
		}
		batch, _ := e.Finish(now)
		if batch != nil {
			mirror.apply(t, batch)
		}
		checkPool(t, e)
		if len(mirror) != len(e.pool.cached) {
			t.Fatalf("step %d: events announce %d cached blocks, cache holds %d", step, len(mirror), len(e.pool.cached))
		}
		for h := range e.pool.cached {
			if !mirror[h] {
				t.Fatalf("step %d: cached block %x never announced", step, h)
			}
		}
		for _, r := range admitted {
			for _, h := range r.hashes[:r.HitTokens/e.cfg.BlockSize] {
				if !mirror[h] {
					t.Fatalf("request %d hit block %x that no event announced", r.ID, h)
				}
			}
		}
		s := e.Stats()
		if s.PrefixHits-lastStats.PrefixHits != admittedHits {
			t.Fatalf("step %d: hit counter grew %d, admitted requests hit %d", step, s.PrefixHits-lastStats.PrefixHits, admittedHits)
		}
		if s.Preemptions > lastStats.Preemptions {
			sawPreemption = true
		}
		lastStats = s
	}
	for _, r := range reqs {
		if !r.Finished() || len(r.OutputTokens()) != r.MaxTokens || r.Done < r.FirstToken || r.FirstToken < r.Arrival {
			t.Fatalf("request %d: output %d/%d, arrival %v first %v done %v", r.ID, r.Output, r.MaxTokens, r.Arrival, r.FirstToken, r.Done)
		}
	}
	if e.pool.numFree() != e.pool.capacity() {
		t.Fatalf("idle engine holds %d blocks", e.pool.capacity()-e.pool.numFree())
	}
	if !sawPreemption || e.Stats().PrefixHits == 0 {
		t.Fatalf("workload too easy: preemptions seen %v, hits %d", sawPreemption, e.Stats().PrefixHits)
	}
}

// TestPreemptionFreesBlocks fills a cache with two long decodes until one
// must be preempted, and checks the victim holds no blocks, waits at the
// queue's head and later finishes.
func TestPreemptionFreesBlocks(t *testing.T) {
	e := smallEngine(t, 10)
	rng := rand.New(rand.NewPCG(5, 6))
	a := &Request{ID: 1, Prompt: randomTokens(rng, make([]uint32, 40)), MaxTokens: 60}
	b := &Request{ID: 2, Prompt: randomTokens(rng, make([]uint32, 40)), MaxTokens: 60}
	for _, r := range []*Request{a, b} {
		if err := e.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	now := 0.0
	for e.Stats().Preemptions == 0 {
		d, ok := e.Schedule()
		if !ok {
			t.Fatal("engine stalled before any preemption")
		}
		now += d
		e.Finish(now)
	}
	if len(b.blocks) != 0 || b.running || e.waiting.front() != b || b.Preemptions != 1 {
		t.Fatalf("victim: %d blocks, running %v, preemptions %d; head of queue is %d", len(b.blocks), b.running, b.Preemptions, e.waiting.front().ID)
	}
	checkPool(t, e)
	for e.Busy() {
		d, ok := e.Schedule()
		if !ok {
			t.Fatal("engine stalled after preemption")
		}
		now += d
		e.Finish(now)
	}
	if !a.Finished() || !b.Finished() {
		t.Fatal("a request never finished")
	}
}

// TestPrefixHitSkipsPrefill checks that a second request on a cached
// prefix starts after it (keeping at least one token to compute) and that
// its first token comes sooner than the first request's.
func TestPrefixHitSkipsPrefill(t *testing.T) {
	e := smallEngine(t, 400)
	rng := rand.New(rand.NewPCG(8, 9))
	p := randomTokens(rng, make([]uint32, 16*20))
	run := func(r *Request, now float64) float64 {
		if err := e.Add(r); err != nil {
			t.Fatal(err)
		}
		r.Arrival = now
		for !r.Finished() {
			d, _ := e.Schedule()
			now += d
			e.Finish(now)
		}
		return now
	}
	first := &Request{ID: 1, Prompt: p, MaxTokens: 2}
	now := run(first, 0)
	second := &Request{ID: 2, Prompt: append([]uint32(nil), p...), MaxTokens: 2}
	run(second, now)
	if want := len(p) - 16; second.HitTokens != want {
		t.Fatalf("second request hit %d tokens, want %d (all full blocks but the last)", second.HitTokens, want)
	}
	if second.FirstToken-second.Arrival >= first.FirstToken-first.Arrival {
		t.Fatalf("cached TTFT %v not below uncached %v", second.FirstToken-second.Arrival, first.FirstToken-first.Arrival)
	}
	if e.Stats().PrefixQueries != uint64(2*len(p)) {
		t.Fatalf("queries %d, want %d", e.Stats().PrefixQueries, 2*len(p))
	}
}

// TestAdmissionNeedsTheWholeSequence checks vLLM's admission gate
// (scheduler_reserve_full_isl, on by default): a waiting request is
// admitted only when the cache can hold its whole prompt, not just its
// first chunk, so a long prompt waits for a running request to finish
// instead of being admitted, growing and preempting.
func TestAdmissionNeedsTheWholeSequence(t *testing.T) {
	cfg := DefaultEngineConfig()
	cfg.NumGPUBlocks, cfg.MaxBatchedTokens = 10, 32
	e, err := NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	// a holds 3 blocks of 16 while it decodes; b's 128 tokens need 8 of
	// the 7 left, its first 32-token chunk only 2.
	a := &Request{ID: 1, Prompt: randomTokens(rng, make([]uint32, 32)), MaxTokens: 12}
	b := &Request{ID: 2, Prompt: randomTokens(rng, make([]uint32, 128)), MaxTokens: 4}
	if err := e.Add(a); err != nil {
		t.Fatal(err)
	}
	step := stepper(t, e)
	step()
	if err := e.Add(b); err != nil {
		t.Fatal(err)
	}
	for e.Busy() {
		step()
		if b.running && !a.Finished() {
			t.Fatalf("b admitted with %d blocks while a runs holding %d", len(b.blocks), len(a.blocks))
		}
	}
	if e.Stats().Preemptions != 0 || !b.Finished() {
		t.Fatalf("%d preemptions, b finished %v: want none and b done", e.Stats().Preemptions, b.Finished())
	}
}

// stepper returns a function running e one step (failing the test if
// nothing can run), its clock starting at 0.
func stepper(t *testing.T, e *Engine) func() {
	now := 0.0
	return func() {
		t.Helper()
		d, ok := e.Schedule()
		if !ok {
			t.Fatal("engine stalled")
		}
		now += d
		e.Finish(now)
	}
}

// TestNullBlockIsNotForRequests checks that an engine of n blocks gives
// requests n-1 of them, as vLLM keeps one back as its null block: a
// request needing all n is refused, one needing n-1 fills the cache.
func TestNullBlockIsNotForRequests(t *testing.T) {
	cfg := DefaultEngineConfig()
	cfg.NumGPUBlocks = 5
	e, err := NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	bs := cfg.BlockSize
	if err := e.Add(&Request{ID: 1, Prompt: randomTokens(rng, make([]uint32, 4*bs)), MaxTokens: bs}); err == nil {
		t.Fatal("a request of 5 blocks fit a 5-block cache")
	}
	if err := e.Add(&Request{ID: 2, Prompt: randomTokens(rng, make([]uint32, 4*bs-1)), MaxTokens: 1}); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.Schedule(); !ok {
		t.Fatal("the 4-block request was not scheduled")
	}
	if u := e.KVUsage(); u != 1 {
		t.Errorf("4 of 5 blocks held: usage %v, want 1 (the null block left out)", u)
	}
}

// priorityEngine is smallEngine under vLLM's priority scheduling policy.
func priorityEngine(t *testing.T, blocks, maxSeqs int) *Engine {
	t.Helper()
	cfg := DefaultEngineConfig()
	cfg.NumGPUBlocks, cfg.MaxNumSeqs, cfg.MaxBatchedTokens, cfg.Seed = blocks, maxSeqs, 256, 7
	cfg.Policy = PolicyPriority
	e, err := NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// TestPriorityPolicyPreemptsLowestPriority fills a cache with two long
// decodes, the earlier admitted of lower priority, and checks that the
// priority policy preempts it even after it was scheduled in the step (it
// leaves the step and holds nothing), where FCFS would preempt the later
// one; then that both finish with the pool consistent.
func TestPriorityPolicyPreemptsLowestPriority(t *testing.T) {
	// 8 usable blocks: both hold 4 when high, 4 tokens ahead, needs its
	// fifth, after low (admitted first, so running first) was scheduled
	// for the step.
	e := priorityEngine(t, 9, 16)
	rng := rand.New(rand.NewPCG(5, 6))
	low := &Request{ID: 1, Prompt: randomTokens(rng, make([]uint32, 40)), MaxTokens: 60, Priority: 1}
	high := &Request{ID: 2, Prompt: randomTokens(rng, make([]uint32, 48)), MaxTokens: 60, Arrival: 1}
	if err := e.Add(low); err != nil {
		t.Fatal(err)
	}
	if _, ok := e.Schedule(); !ok {
		t.Fatal("low not scheduled")
	}
	e.Finish(1)
	if err := e.Add(high); err != nil {
		t.Fatal(err)
	}
	now := 1.0
	for e.Stats().Preemptions == 0 {
		d, ok := e.Schedule()
		if !ok {
			t.Fatal("engine stalled before any preemption")
		}
		if e.Stats().Preemptions > 0 && slices.Contains(e.stepReqs, low) {
			t.Fatal("the preempted request stayed in the step")
		}
		now += d
		e.Finish(now)
	}
	if low.Preemptions != 1 || high.Preemptions != 0 || len(low.blocks) != 0 || low.computed != 0 || e.waiting.front() != low {
		t.Fatalf("victim: low preempted %d times (%d blocks, %d computed), high %d times", low.Preemptions, len(low.blocks), low.computed, high.Preemptions)
	}
	checkPool(t, e)
	for e.Busy() {
		d, ok := e.Schedule()
		if !ok {
			t.Fatal("engine stalled after preemption")
		}
		now += d
		e.Finish(now)
	}
	if !low.Finished() || !high.Finished() || high.Done > low.Done {
		t.Fatalf("finished: low %v at %.3f, high %v at %.3f", low.Finished(), low.Done, high.Finished(), high.Done)
	}
	checkPool(t, e)
}

// TestPriorityPolicyAdmitsByPriority runs one sequence at a time and checks
// the waiting queue admits by (priority, arrival), not arrival alone, and
// that FCFS keeps arrival order on the same requests.
func TestPriorityPolicyAdmitsByPriority(t *testing.T) {
	order := func(e *Engine) []uint64 {
		rng := rand.New(rand.NewPCG(1, 2))
		// ID, priority: arrivals in ID order.
		for i, p := range []int{2, 1, 0, 1, 0} {
			r := &Request{ID: uint64(i + 1), Prompt: randomTokens(rng, make([]uint32, 20)), MaxTokens: 2, Priority: p, Arrival: float64(i)}
			if err := e.Add(r); err != nil {
				t.Fatal(err)
			}
		}
		var done []uint64
		for now := 0.0; e.Busy(); {
			d, ok := e.Schedule()
			if !ok {
				t.Fatal("engine stalled")
			}
			now += d
			_, progress := e.Finish(now)
			for _, r := range progress {
				if r.Finished() {
					done = append(done, r.ID)
				}
			}
		}
		return done
	}
	if got, want := order(priorityEngine(t, 100, 1)), []uint64{3, 5, 2, 4, 1}; !slices.Equal(got, want) {
		t.Fatalf("priority policy finished %v, want %v", got, want)
	}
	fcfs := DefaultEngineConfig()
	fcfs.NumGPUBlocks, fcfs.MaxNumSeqs, fcfs.MaxBatchedTokens = 100, 1, 256
	e, err := NewEngine(fcfs)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := order(e), []uint64{1, 2, 3, 4, 5}; !slices.Equal(got, want) {
		t.Fatalf("FCFS finished %v, want %v", got, want)
	}
	bad := DefaultEngineConfig()
	bad.Policy = "lifo"
	if _, err := NewEngine(bad); err == nil || !strings.Contains(err.Error(), `"lifo"`) {
		t.Fatalf("unknown policy: %v", err)
	}
}

// TestLongPrefillThresholdCapsEachRequestsChunk checks vLLM's
// --long-prefill-token-threshold: alone, a request's prefill takes the
// whole budget; with another request waiting or running, each computes at
// most the threshold per step, so the second starts in the first's next
// step instead of after its prefill.
func TestLongPrefillThresholdCapsEachRequestsChunk(t *testing.T) {
	cfg := DefaultEngineConfig()
	cfg.NumGPUBlocks, cfg.MaxBatchedTokens, cfg.LongPrefillTokenThreshold = 200, 256, 64
	e, err := NewEngine(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(11, 12))
	a := &Request{ID: 1, Prompt: randomTokens(rng, make([]uint32, 1024)), MaxTokens: 2}
	b := &Request{ID: 2, Prompt: randomTokens(rng, make([]uint32, 512)), MaxTokens: 2}
	if err := e.Add(a); err != nil {
		t.Fatal(err)
	}
	step := stepper(t, e)
	step()
	if a.computed != 256 {
		t.Fatalf("alone, a computed %d tokens in its first step, want the whole budget, 256", a.computed)
	}
	if err := e.Add(b); err != nil {
		t.Fatal(err)
	}
	step()
	if a.computed != 256+64 || b.computed != 64 {
		t.Fatalf("a and b computed %d and %d, want 320 and 64: each capped at the threshold", a.computed, b.computed)
	}
	for e.Busy() {
		step()
	}
	if !a.Finished() || !b.Finished() || b.FirstToken >= a.FirstToken {
		t.Fatalf("a finished %v at %v, b %v at %v: the shorter b should reach its first token first", a.Finished(), a.FirstToken, b.Finished(), b.FirstToken)
	}
	if _, err := NewEngine(EngineConfig{NumGPUBlocks: 10, BlockSize: 16, MaxNumSeqs: 1, MaxBatchedTokens: 1, Cost: DefaultCost(), LongPrefillTokenThreshold: -1}); err == nil {
		t.Fatal("a negative threshold accepted")
	}
}
