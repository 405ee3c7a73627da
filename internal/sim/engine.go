package sim

import (
	"fmt"

	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
)

// EngineConfig sizes one simulated vLLM engine. DefaultEngineConfig holds
// vLLM's defaults for the modelled GPU.
type EngineConfig struct {
	// NumGPUBlocks is the KV cache's size in blocks, vLLM's num_gpu_blocks
	// (see GPUBlocks); one of them is vLLM's null block, so requests hold
	// at most NumGPUBlocks-1.
	NumGPUBlocks int
	// BlockSize is tokens per KV block (vLLM --block-size; 16 is vLLM's
	// default on CUDA, the seed ran 64: SeedEngineConfig).
	BlockSize int
	// MaxNumSeqs bounds the running batch (vLLM --max-num-seqs).
	MaxNumSeqs int
	// MaxBatchedTokens is the per-step token budget of chunked prefill
	// (vLLM --max-num-batched-tokens).
	MaxBatchedTokens int
	// Policy is vLLM's --scheduling-policy ("" is PolicyFCFS, vLLM's
	// default).
	Policy SchedulingPolicy
	// LongPrefillTokenThreshold is vLLM's --long-prefill-token-threshold:
	// the most prompt tokens one request computes in a step while another
	// request is running or waiting (0: no cap, vLLM's default; v0.32.0
	// vllm/config/scheduler.py, applied to running and waiting requests
	// alike in vllm/v1/core/sched/scheduler.py Scheduler.schedule).
	LongPrefillTokenThreshold int
	// Cost prices a step: a CostModel (DefaultCost) or a CostTable.
	Cost StepCost
	// Seed picks the engine's random hash root.
	Seed uint64
}

// DefaultEngineConfig is vLLM V1 serving Qwen2.5-7B-Instruct on one A10G:
// vLLM's engine defaults for a GPU under 70 GiB with the OpenAI server
// (max_num_seqs 256, max_num_batched_tokens 2048; vllm/engine/arg_utils.py),
// block size 16, and the capacity derived in GPUBlocks.
func DefaultEngineConfig() EngineConfig {
	return engineConfig(16)
}

// SeedEngineConfig is the engine the seed benchmark ran (BENCHMARK.md):
// vLLM's defaults with --block-size=64, the capacity derived for it. The
// calibration, the virtual bench and the live bench's replicas run it.
func SeedEngineConfig() EngineConfig {
	return engineConfig(SeedBlockSize)
}

// engineConfig is vLLM's defaults on the A10G at the given block size.
func engineConfig(blockSize int) EngineConfig {
	g := DefaultA10G()
	g.BlockSize = blockSize
	return EngineConfig{
		NumGPUBlocks:     g.GPUBlocks(),
		BlockSize:        blockSize,
		MaxNumSeqs:       256,
		MaxBatchedTokens: 2048,
		Cost:             DefaultCost(),
	}
}

// SeedBlockSize is the seed benchmark's --block-size (BENCHMARK.md).
const SeedBlockSize = 64

// SchedulingPolicy is vLLM's --scheduling-policy (vLLM v0.32.0
// vllm/v1/core/sched/request_queue.py SchedulingPolicy).
type SchedulingPolicy string

// The scheduling policies. Under PolicyFCFS the waiting queue is in arrival
// order and the latest-admitted running request is preempted first; under
// PolicyPriority the waiting queue is ordered by (Request.Priority,
// arrival), lowest first, and the running request with the highest such
// key is preempted first (Scheduler.schedule: max(self.running, key=lambda
// r: (r.priority, r.arrival_time))).
const (
	PolicyFCFS     SchedulingPolicy = "fcfs"
	PolicyPriority SchedulingPolicy = "priority"
)

// Engine is one vLLM V1 engine core: a waiting queue (FCFS or by priority), a running batch
// scheduled with continuous batching and chunked prefill under a token
// budget, and a paged KV cache with prefix caching. It is driven one step at
// a time (Schedule, then Finish) by a virtual-time loop or a wall-clock
// driver, and is not safe for concurrent use.
type Engine struct {
	cfg     EngineConfig
	pool    *blockPool
	ev      eventLog
	h       hasher
	waiting waitQueue
	running []*Request

	stepReqs []*Request // scheduled in the current step
	progress []*Request // produced a token in the last step
	shape    StepShape
	inStep   bool
	hitBuf   []int32

	stats EngineStats
}

// EngineStats are an engine's cumulative counters, named after vLLM's.
type EngineStats struct {
	// PrefixQueries and PrefixHits count prompt tokens looked up in and
	// served by the prefix cache at admission.
	PrefixQueries, PrefixHits uint64
	Preemptions               uint64
	// PromptTokens counts each request's whole prompt, cached or computed,
	// when its first token comes, once, as vLLM's vllm:prompt_tokens_total
	// (v0.32.0: the scheduler hands a request's prefill stats over with its
	// first output, Request.take_prefill_stats in
	// vllm/v1/core/sched/scheduler.py, and vllm/v1/metrics/stats.py adds
	// their PromptTokenStats.total; a request preempted after it is not
	// counted again). A lone prefill leaves it flat until it ends.
	PromptTokens     uint64
	GenerationTokens uint64
	Steps            uint64
	Finished         uint64
}

// NewEngine returns an idle engine with an empty cache.
func NewEngine(cfg EngineConfig) (*Engine, error) {
	if cfg.NumGPUBlocks <= 1 || cfg.BlockSize <= 0 || cfg.MaxNumSeqs <= 0 || cfg.MaxBatchedTokens <= 0 || cfg.Cost == nil ||
		cfg.LongPrefillTokenThreshold < 0 {
		return nil, fmt.Errorf("engine config %+v: needs 2 blocks or more, a positive block size, max seqs and token budget, a cost, and a long-prefill threshold of 0 or more", cfg)
	}
	switch cfg.Policy {
	case "", PolicyFCFS, PolicyPriority:
	default:
		return nil, fmt.Errorf("engine config: scheduling policy %q is not %q or %q", cfg.Policy, PolicyFCFS, PolicyPriority)
	}
	e := &Engine{cfg: cfg, h: hasher{root: splitmix(cfg.Seed ^ 0x6b76)}, waiting: newWaitQueue(cfg.Policy)}
	// vLLM keeps one block back as the null block (a placeholder that never
	// holds KV; v0.32.0 BlockPool.__init__), so requests share the rest.
	e.pool = newBlockPool(cfg.NumGPUBlocks-1, &e.ev)
	return e, nil
}

// replicaSeed gives replica i of a fleet its own seed, and so its own hash root.
func replicaSeed(seed uint64, i int) uint64 { return splitmix(seed) + uint64(i) }

// Add queues r in the waiting queue: at the back under FCFS, by its
// Priority and Arrival under the priority policy. A request that could not
// fit the whole cache even alone is refused, as vLLM refuses prompts longer
// than the KV cache holds.
func (e *Engine) Add(r *Request) error {
	total := len(r.Prompt) + r.MaxTokens
	if len(r.Prompt) == 0 || r.MaxTokens <= 0 {
		return fmt.Errorf("request %d: needs a prompt and max tokens > 0", r.ID)
	}
	if e.blocksFor(total) > e.pool.capacity() {
		return fmt.Errorf("request %d: %d tokens exceed the KV cache of %d tokens", r.ID, total, e.pool.capacity()*e.cfg.BlockSize)
	}
	// A prompt with spare capacity for its output is extended in place.
	r.tokens = r.Prompt
	if cap(r.Prompt) < total {
		r.tokens = append(make([]uint32, 0, total), r.Prompt...)
	}
	r.hashes = make([]uint64, 0, total/e.cfg.BlockSize)
	e.h.extend(r, e.cfg.BlockSize)
	e.waiting.push(r)
	return nil
}

// Abort removes an unfinished request (its client went away) and frees its
// blocks. It must not be called between Schedule and Finish.
func (e *Engine) Abort(r *Request) {
	if e.waiting.remove(r) {
		return
	}
	for i, x := range e.running {
		if x == r {
			e.running = append(e.running[:i], e.running[i+1:]...)
			e.pool.release(r.blocks)
			r.blocks, r.running = r.blocks[:0], false
			return
		}
	}
}

// Busy reports whether any request is waiting or running.
func (e *Engine) Busy() bool { return len(e.running) > 0 || e.waiting.len() > 0 }

// Running and Waiting are vllm:num_requests_running and _waiting.
func (e *Engine) Running() int { return len(e.running) }

// Waiting is the length of the waiting queue, preempted requests included.
func (e *Engine) Waiting() int { return e.waiting.len() }

// KVUsage is vllm:kv_cache_usage_perc.
func (e *Engine) KVUsage() float64 { return e.pool.usage() }

// Stats returns the cumulative counters.
func (e *Engine) Stats() EngineStats { return e.stats }

func (e *Engine) blocksFor(tokens int) int { return (tokens + e.cfg.BlockSize - 1) / e.cfg.BlockSize }

// Schedule plans the next step as vLLM V1's scheduler does and returns its
// duration in seconds, or ok=false when nothing can run. Running requests go
// first, in order, each taking its remaining prefill (or one decode token)
// within the budget; when the cache cannot grow a running request, a
// running request is preempted (the latest admitted under FCFS, the lowest
// priority under the priority policy, which may be one already scheduled in
// this step: it gives its tokens back to the budget), its blocks freed and
// the request requeued to recompute. Only a step without preemption admits
// waiting requests, in the queue's order, each starting after its longest
// cached prefix and only when the cache can hold its whole sequence. While
// more than one request runs or waits, none computes more than
// LongPrefillTokenThreshold tokens in the step.
func (e *Engine) Schedule() (seconds float64, ok bool) {
	if e.inStep {
		panic("sim: Schedule called twice without Finish")
	}
	e.shape.reset()
	e.stepReqs = e.stepReqs[:0]
	budget := e.cfg.MaxBatchedTokens
	// vLLM lifts the cap for a request alone: nobody to starve.
	chunk := budget
	if t := e.cfg.LongPrefillTokenThreshold; t > 0 && len(e.running)+e.waiting.len() > 1 {
		chunk = t
	}
	preempted := false
	for i := 0; i < len(e.running) && budget > 0; {
		r := e.running[i]
		n := min(len(r.tokens)-r.computed, budget, chunk)
		need := e.blocksFor(r.computed+n) - len(r.blocks)
		for need > e.pool.numFree() {
			v := e.victim()
			victim := e.running[v]
			e.running = append(e.running[:v], e.running[v+1:]...)
			if v < i {
				i--
				budget += e.unschedule(victim)
			}
			e.preempt(victim)
			preempted = true
			if victim == r {
				break
			}
		}
		if !r.running {
			break
		}
		r.blocks = e.pool.allocate(r.blocks, need)
		e.schedule(r, n)
		budget -= n
		i++
	}
	for !preempted && budget > 0 && e.waiting.len() > 0 && len(e.running) < e.cfg.MaxNumSeqs {
		r := e.waiting.front()
		// At least the last prompt token is always computed, to sample from.
		maxHit := (len(r.tokens) - 1) / e.cfg.BlockSize
		e.hitBuf = e.pool.hits(e.hitBuf[:0], r.hashes[:min(maxHit, len(r.hashes))])
		computed := len(e.hitBuf) * e.cfg.BlockSize
		n := min(len(r.tokens)-computed, budget, chunk)
		need := e.blocksFor(computed+n) - len(e.hitBuf)
		// Admission needs room for the whole sequence, not its first chunk
		// (vLLM v0.32.0 scheduler_reserve_full_isl, on by default:
		// KVCacheManager.allocate_slots with full_sequence_must_fit).
		whole := e.blocksFor(len(r.tokens)) - len(e.hitBuf)
		if whole+e.pool.freeAmong(e.hitBuf) > e.pool.numFree() {
			break
		}
		e.waiting.pop()
		e.pool.touch(e.hitBuf)
		r.blocks = append(r.blocks[:0], e.hitBuf...)
		r.computed, r.cachedN, r.HitTokens, r.running = computed, len(e.hitBuf), computed, true
		e.stats.PrefixQueries += uint64(len(r.tokens))
		e.stats.PrefixHits += uint64(computed)
		e.running = append(e.running, r)
		r.blocks = e.pool.allocate(r.blocks, need)
		e.schedule(r, n)
		budget -= n
	}
	if len(e.stepReqs) == 0 {
		return 0, false
	}
	for _, r := range e.stepReqs {
		c, n := r.computed-r.sched, r.sched
		e.shape.add(c, n, r.Output > 0 && n == 1 && r.computed == len(r.tokens), r.computed == len(r.tokens))
	}
	e.inStep = true
	e.stats.Steps++
	return e.cfg.Cost.StepTime(&e.shape), true
}

// victim is the index in running of the request to preempt: the last
// (latest admitted) under FCFS; under the priority policy the first with
// the highest (Priority, Arrival), as vLLM's max over self.running.
func (e *Engine) victim() int {
	v := len(e.running) - 1
	if e.cfg.Policy != PolicyPriority {
		return v
	}
	v = 0
	for i, r := range e.running[1:] {
		w := e.running[v]
		if r.Priority > w.Priority || r.Priority == w.Priority && r.Arrival > w.Arrival {
			v = i + 1
		}
	}
	return v
}

// schedule adds n of r's tokens to the step and caches its newly full
// blocks; the step's shape is summed once scheduling is done.
func (e *Engine) schedule(r *Request, n int) {
	r.computed += n
	r.sched = n
	e.stepReqs = append(e.stepReqs, r)
	e.cacheFull(r)
}

// unschedule takes a request preempted after it was scheduled out of the
// step and returns the tokens it gives back to the budget. Blocks it
// cached stay cached, as vLLM's allocate_slots caches them when it
// allocates.
func (e *Engine) unschedule(r *Request) int {
	for i, x := range e.stepReqs {
		if x == r {
			e.stepReqs = append(e.stepReqs[:i], e.stepReqs[i+1:]...)
			break
		}
	}
	n := r.sched
	r.computed -= n
	r.sched = 0
	return n
}

// cacheFull registers r's full, computed blocks in the prefix cache and
// records a BlockStored for each run of newly cached blocks.
func (e *Engine) cacheFull(r *Request) {
	bs := e.cfg.BlockSize
	full := min(r.computed/bs, len(r.hashes))
	start := -1
	flush := func(end int) {
		if start >= 0 {
			e.ev.stored(r, start, end, bs)
			start = -1
		}
	}
	for i := r.cachedN; i < full; i++ {
		if e.pool.cache(r.blocks[i], r.hashes[i]) {
			if start < 0 {
				start = i
			}
		} else {
			flush(i)
		}
	}
	flush(full)
	r.cachedN = max(r.cachedN, full)
}

func (e *Engine) preempt(r *Request) {
	e.pool.release(r.blocks)
	r.blocks, r.computed, r.cachedN, r.running = r.blocks[:0], 0, 0, false
	r.Preemptions++
	e.stats.Preemptions++
	e.waiting.requeue(r)
}

// Finish completes the planned step at engine time now: requests whose
// known tokens are all computed sample one token, finished requests free
// their blocks. It returns the step's KV events (nil if none; valid until
// the next Schedule) and the requests that produced a token (valid until
// the next Finish).
func (e *Engine) Finish(now float64) (*kvevents.Batch, []*Request) {
	if !e.inStep {
		panic("sim: Finish without Schedule")
	}
	e.inStep = false
	e.progress = e.progress[:0]
	anyDone := false
	for _, r := range e.stepReqs {
		r.sched = 0
		if !r.running || r.computed < len(r.tokens) {
			continue
		}
		r.tokens = append(r.tokens, outputToken(r.ID, r.Output))
		r.Output++
		e.stats.GenerationTokens++
		if r.Output == 1 {
			r.FirstToken = now
			e.stats.PromptTokens += uint64(len(r.Prompt))
		}
		e.h.extend(r, e.cfg.BlockSize)
		if r.Finished() {
			r.Done = now
			e.pool.release(r.blocks)
			r.blocks, r.running = r.blocks[:0], false
			e.stats.Finished++
			anyDone = true
		}
		e.progress = append(e.progress, r)
	}
	if anyDone {
		kept := e.running[:0]
		for _, r := range e.running {
			if r.running {
				kept = append(kept, r)
			}
		}
		clear(e.running[len(kept):])
		e.running = kept
	}
	return e.ev.take(now), e.progress
}

// ResetPrefixCache drops every cached block, as vLLM's /reset_prefix_cache,
// and reports false (changing nothing) while requests hold blocks. The
// AllBlocksCleared event goes out with the next step's batch, or with
// TakeEvents.
func (e *Engine) ResetPrefixCache() bool { return !e.inStep && e.pool.clear() }

// TakeEvents returns events recorded outside a step (a cache reset), stamped now.
func (e *Engine) TakeEvents(now float64) *kvevents.Batch {
	if e.inStep {
		return nil
	}
	return e.ev.take(now)
}
