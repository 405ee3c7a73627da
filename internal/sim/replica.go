package sim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
	"github.com/llmd-dev/terraform-provider-llmd/router/tokenizer"
)

// ReplicaConfig configures one live simulated vLLM replica.
type ReplicaConfig struct {
	// Pod names the replica in logs; Model is the served model name.
	Pod, Model string
	// Adapters are LoRA adapter names served on top of Model, as vLLM's
	// --lora-modules name them: a request naming one runs under it (its
	// blocks hash apart; the simulated cost is the base model's).
	Adapters []string
	Engine   EngineConfig
	// TimeScale is simulated seconds per wall-clock second: 10 runs the
	// engine ten times faster than the modelled GPU.
	TimeScale float64
	// Tokenizer turns text prompts into ids; nil accepts token-id prompts
	// only, unless Chat is set.
	Tokenizer *tokenizer.Tokenizer
	// Chat renders chat requests with the model's chat template as vLLM
	// does; nil refuses them. Its tokenizer serves when Tokenizer is nil.
	Chat *chat.Model
	// Form is the KV-event wire form; Topic the PUB topic.
	Form  kvevents.Form
	Topic string
	// KVAddr and ReplayAddr are the ZMQ bind addresses of the PUB and the
	// replay ROUTER ("" turns replay off).
	KVAddr, ReplayAddr string
	// DataParallelRank is the rank this replica plays in a data-parallel
	// pod, which its KV-event batches carry as vLLM's data_parallel_rank
	// (rank 0 sends none, as the simulator's single-engine replicas do).
	DataParallelRank int
	// BufferSteps is how many messages replay keeps (vLLM's buffer_steps);
	// 0 means vLLM's default, DefaultBufferSteps.
	BufferSteps int
}

// DefaultBufferSteps is vLLM's default buffer_steps: the KV-event messages
// its publisher keeps for replay.
const DefaultBufferSteps = 10000

// Replica is one simulated vLLM engine running in scaled wall-clock time
// behind real sockets. One goroutine drives the engine; HTTP handlers hand
// it requests and read back tokens without touching the engine.
type Replica struct {
	cfg     ReplicaConfig
	eng     *Engine
	pub     *publisher
	metrics *replicaMetrics
	// tok encodes text prompts through a prefix cache of the tokenizer:
	// the ids vLLM's tokenizer gives, for a fraction of the CPU, which a
	// live bench shares with the router and the client (vLLM tokenizes on
	// its own CPUs, which the engine's cost model leaves out).
	tok *tokenizer.PrefixCache

	mu     sync.Mutex
	inbox  []*liveReq
	aborts []*liveReq
	reset  bool
	wake   chan struct{}

	live   map[*Request]*liveReq // owned by the driver
	encBuf []byte
	nextID uint64
}

// liveReq is a request in flight between an HTTP handler and the driver.
type liveReq struct {
	r *Request // the driver's; handlers read only the copies below

	mu       sync.Mutex
	admitted bool // the engine took it (its checks passed)
	out      []uint32
	done     bool
	err      error
	notify   chan struct{} // capacity 1: "something changed"
}

// replicaTokenCacheBytes bounds each replica's tokenizer prefix cache: the
// demo's 150 prefixes and their latest prompts many times over.
const replicaTokenCacheBytes = 32 << 20

// NewReplica builds the engine and binds the KV-event sockets.
func NewReplica(cfg ReplicaConfig) (*Replica, error) {
	if cfg.TimeScale <= 0 {
		cfg.TimeScale = 1
	}
	if cfg.Tokenizer == nil && cfg.Chat != nil {
		cfg.Tokenizer = cfg.Chat.Tokenizer()
	}
	eng, err := NewEngine(cfg.Engine)
	if err != nil {
		return nil, fmt.Errorf("replica %s: %w", cfg.Pod, err)
	}
	if cfg.BufferSteps <= 0 {
		cfg.BufferSteps = DefaultBufferSteps
	}
	pub, err := newPublisher(cfg.KVAddr, cfg.ReplayAddr, cfg.Topic, cfg.BufferSteps)
	if err != nil {
		return nil, fmt.Errorf("replica %s: %w", cfg.Pod, err)
	}
	rp := &Replica{cfg: cfg, eng: eng, pub: pub, metrics: newReplicaMetrics(cfg.Model, cfg.Engine, cfg.TimeScale),
		wake: make(chan struct{}, 1), live: make(map[*Request]*liveReq)}
	if cfg.Tokenizer != nil {
		rp.tok = cfg.Tokenizer.NewPrefixCache(replicaTokenCacheBytes)
	}
	return rp, nil
}

// KVAddr and ReplayAddr are the bound KV-event addresses.
func (rp *Replica) KVAddr() string { return rp.pub.pubAddr }

// ReplayAddr is the bound replay address, "" without replay.
func (rp *Replica) ReplayAddr() string { return rp.pub.replAddr }

// submit hands prompt to the driver and returns its handle.
func (rp *Replica) submit(prompt []uint32, maxTokens int, lora, salt string, priority int) *liveReq {
	lr := &liveReq{notify: make(chan struct{}, 1), out: make([]uint32, 0, maxTokens)}
	rp.mu.Lock()
	rp.nextID++
	lr.r = &Request{ID: rp.nextID, Prompt: prompt, MaxTokens: maxTokens, LoRA: lora, CacheSalt: salt, Priority: priority}
	rp.inbox = append(rp.inbox, lr)
	rp.mu.Unlock()
	rp.signal()
	return lr
}

// abort withdraws a request whose client went away.
func (rp *Replica) abort(lr *liveReq) {
	rp.mu.Lock()
	rp.aborts = append(rp.aborts, lr)
	rp.mu.Unlock()
	rp.signal()
}

// resetPrefixCache asks the driver to clear the cache at the next idle moment.
func (rp *Replica) resetPrefixCache() {
	rp.mu.Lock()
	rp.reset = true
	rp.mu.Unlock()
	rp.signal()
}

func (rp *Replica) signal() {
	select {
	case rp.wake <- struct{}{}:
	default:
	}
}

// Run drives the engine until ctx ends, then closes the sockets. Steps
// end at wall time start + engineTime/TimeScale; when the process cannot
// keep up, steps run back to back, and llmd_sim_lag_seconds and its maximum
// llmd_sim_lag_max_seconds say how far the engine is behind.
func (rp *Replica) Run(ctx context.Context) error {
	defer rp.pub.close()
	defer rp.failAll()
	start := time.Now()
	engNow := 0.0
	wallAt := func(t float64) time.Time {
		return start.Add(time.Duration(t / rp.cfg.TimeScale * float64(time.Second)))
	}
	timer := time.NewTimer(0)
	<-timer.C
	idle := true
	for {
		if idle {
			// An idle engine's clock catches up with the wall; a busy one
			// keeps its own schedule, so falling behind shows as lag.
			engNow = max(engNow, time.Since(start).Seconds()*rp.cfg.TimeScale)
		}
		if err := rp.intake(engNow); err != nil {
			return err
		}
		d, ok := rp.eng.Schedule()
		idle = !ok
		if !ok {
			rp.metrics.update(rp.eng)
			select {
			case <-ctx.Done():
				return nil
			case <-rp.wake:
			}
			continue
		}
		end := engNow + d
		timer.Reset(time.Until(wallAt(end)))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-timer.C:
		}
		rp.metrics.lagged(max(0, time.Since(wallAt(end)).Seconds()))
		batch, progress := rp.eng.Finish(end)
		engNow = end
		if err := rp.publish(batch); err != nil {
			return err
		}
		rp.deliver(progress)
		rp.metrics.update(rp.eng)
	}
}

// intake moves new requests, aborts and a cache reset into the engine.
func (rp *Replica) intake(now float64) error {
	rp.mu.Lock()
	in, ab, reset := rp.inbox, rp.aborts, rp.reset
	rp.inbox, rp.aborts, rp.reset = nil, nil, false
	rp.mu.Unlock()
	for _, lr := range in {
		lr.r.Arrival = now
		if err := rp.eng.Add(lr.r); err != nil {
			lr.finish(err)
			continue
		}
		rp.live[lr.r] = lr
		lr.admit()
	}
	for _, lr := range ab {
		if rp.live[lr.r] != nil {
			rp.eng.Abort(lr.r)
			delete(rp.live, lr.r)
		}
	}
	if reset && rp.eng.ResetPrefixCache() {
		return rp.publish(rp.eng.TakeEvents(now))
	}
	return nil
}

// errShutdown ends the requests still in flight when the replica stops.
var errShutdown = errors.New("replica shutting down")

// failAll ends every request the driver still holds or has not taken in,
// so no handler waits for tokens that will never come.
func (rp *Replica) failAll() {
	rp.mu.Lock()
	in := rp.inbox
	rp.inbox = nil
	rp.mu.Unlock()
	for _, lr := range in {
		lr.finish(errShutdown)
	}
	for r, lr := range rp.live {
		lr.finish(errShutdown)
		delete(rp.live, r)
	}
}

// publish sends a step's events stamped with the wall clock, as vLLM does.
func (rp *Replica) publish(b *kvevents.Batch) error {
	if b == nil {
		return nil
	}
	b.TS = float64(time.Now().UnixNano()) / 1e9
	if rp.cfg.DataParallelRank > 0 {
		b.DPRank, b.HasDPRank = rp.cfg.DataParallelRank, true
	}
	var err error
	if rp.encBuf, err = kvevents.AppendBatch(rp.encBuf[:0], rp.cfg.Form, b); err != nil {
		return fmt.Errorf("replica %s: encoding KV events: %w", rp.cfg.Pod, err)
	}
	// The replay buffer keeps the payload, so it gets its own copy.
	return rp.pub.publish(append([]byte(nil), rp.encBuf...))
}

// deliver copies each progressed request's new token to its handler.
func (rp *Replica) deliver(progress []*Request) {
	for _, r := range progress {
		lr := rp.live[r]
		if lr == nil {
			continue
		}
		lr.mu.Lock()
		lr.out = append(lr.out, r.OutputTokens()[len(lr.out):]...)
		lr.done = r.Finished()
		lr.mu.Unlock()
		lr.poke()
		if r.Finished() {
			rp.metrics.finished(r)
			delete(rp.live, r)
		}
	}
}

func (lr *liveReq) finish(err error) {
	lr.mu.Lock()
	lr.done, lr.err = true, err
	lr.mu.Unlock()
	lr.poke()
}

func (lr *liveReq) admit() {
	lr.mu.Lock()
	lr.admitted = true
	lr.mu.Unlock()
	lr.poke()
}

// waitAdmitted blocks until the engine took the request (nil) or refused
// it (its error), as vLLM checks a request before it answers a stream's
// headers.
func (lr *liveReq) waitAdmitted(ctx context.Context) error {
	var err error
	if !lr.await(ctx, func() bool { err = lr.err; return lr.admitted || lr.done }) {
		return errClientGone
	}
	return err
}

func (lr *liveReq) poke() {
	select {
	case lr.notify <- struct{}{}:
	default:
	}
}

// errClientGone ends a wait whose client disconnected.
var errClientGone = errors.New("client went away")

// wait blocks until tokens beyond have arrived or the request ended, and
// returns the tokens after have.
func (lr *liveReq) wait(ctx context.Context, have int) (more []uint32, done bool, err error) {
	if !lr.await(ctx, func() bool {
		more, done, err = lr.out[have:], lr.done, lr.err
		return len(more) > 0 || done
	}) {
		return nil, false, errClientGone
	}
	return more, done, err
}

// await calls ready under lr.mu until it holds (true) or ctx ends (false),
// waking whenever the driver pokes the request.
func (lr *liveReq) await(ctx context.Context, ready func() bool) bool {
	for {
		lr.mu.Lock()
		ok := ready()
		lr.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-lr.notify:
		}
	}
}
