package discovery

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/index"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// FleetConfig configures a Fleet.
type FleetConfig struct {
	// Addresses completes the pods a Source reports.
	Addresses Addresses
	// Ingestor follows the pods' KV events; nil runs without (policies that
	// do not read the block index).
	Ingestor *kvevents.Ingestor
	// Metrics sets the scrape interval, timeout and staleness limit, and
	// when a pod leaves scoring (EjectAfterFailures, FrozenAfter; 0 here
	// turns either off, config.Default fills them).
	Metrics config.Metrics
	// Client scrapes /metrics (default: scrapeClient's).
	Client *http.Client
	// OnRemove is called with each pod that left, after it left the
	// ingestor, e.g. to make the picker forget it.
	OnRemove func(pod string)
	// Now is the clock (default time.Now).
	Now func() time.Time
	// SilentAfter is how long a pod sent requests may publish no KV events
	// before it is reported (default config.DefaultKVEventsSilentAfter).
	SilentAfter time.Duration
	// Logger gets warnings: silent pods, source reports not followed
	// (default slog.Default()).
	Logger *slog.Logger
}

// Fleet is the router's view of the pods: which exist, their KV events
// (through the ingestor) and their load. Safe for concurrent use.
type Fleet struct {
	cfg FleetConfig

	mu     sync.RWMutex
	pods   map[string]*podState
	names  []string // sorted
	ctx    context.Context
	synced atomic.Bool
	// updateErrs counts source reports the ingestor could not fully follow
	// (an endpoint address it refused); the other pods are followed anyway.
	updateErrs atomic.Int64
	// watch, if set, hears of every change of this router's own counts.
	watch func(pod string)
}

// podState is one pod's live state.
type podState struct {
	pod      Pod
	cancel   context.CancelFunc
	done     chan struct{}
	inFlight atomic.Int64
	// pending is the uncached prompt tokens of in-flight requests that have
	// not yet answered a byte: the prefill backlog this router gave the pod.
	pending atomic.Int64
	// topPending is the part of pending of requests of the highest
	// priority class (package proxy holds their prefill apart).
	topPending atomic.Int64
	// peerInFlight, peerPending and peerTopPending are the same counts
	// summed over the peer router replicas, as they last reported them
	// (SetPeerLoad).
	peerInFlight, peerPending, peerTopPending atomic.Int64
	// awaiting is when the oldest request still waiting for the pod's KV
	// events was sent (unix ns, 0: none); silent is set once it is reported.
	awaiting atomic.Int64
	silent   atomic.Bool

	mu         sync.Mutex
	scraped    Scraped
	scrapedAt  time.Time
	scrapeErrs int64
	lastErr    error
	health     health
	// preemptedAt is the scrape that last saw vllm:num_preemptions_total
	// rise (a fall is the engine's restart, not a preemption).
	preemptedAt time.Time
}

// PreemptionMemory is how long after its engine last preempted a pod's
// load says so (scoring.Load.Preempting): the engine's cache has had more
// demand than blocks within it, and may again.
const PreemptionMemory = time.Minute

// NewFleet returns an empty fleet; Run fills it from a Source.
func NewFleet(cfg FleetConfig) *Fleet {
	if cfg.Client == nil {
		cfg.Client = scrapeClient()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.SilentAfter <= 0 {
		cfg.SilentAfter = config.DefaultKVEventsSilentAfter
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Fleet{cfg: cfg, pods: make(map[string]*podState)}
}

// Run follows src until ctx ends, then stops every scraper and forgets
// every pod. It returns the source's error, if any.
func (f *Fleet) Run(ctx context.Context, src Source) error {
	f.mu.Lock()
	f.ctx = ctx
	f.mu.Unlock()
	err := src.Run(ctx, func(pods []Pod) {
		if err := f.Update(pods); err != nil {
			f.updateErrs.Add(1)
			f.cfg.Logger.Warn("discovery update not fully followed", "pods", len(pods), "err", err)
		}
	})
	if uerr := f.Update(nil); uerr != nil {
		err = errors.Join(err, uerr)
	}
	return err
}

// Update makes the fleet equal pods: new pods get a KV-event subscription
// (replaying from seq 0) and a scraper, pods no longer listed lose both and
// leave the index. It marks the fleet synced.
func (f *Fleet) Update(pods []Pod) error {
	full := make([]Pod, len(pods))
	for i, p := range pods {
		full[i] = f.cfg.Addresses.Fill(p)
	}
	f.mu.Lock()
	ctx := f.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	want := make(map[string]Pod, len(full))
	for _, p := range full {
		want[p.Name] = p
	}
	var gone []*podState
	for name, ps := range f.pods {
		if p, ok := want[name]; !ok || p != ps.pod {
			// A pod whose IP or ports changed is a new pod: its old
			// subscription and counts describe another process.
			gone = append(gone, ps)
			delete(f.pods, name)
		}
	}
	var added []*podState
	for _, p := range full {
		if _, ok := f.pods[p.Name]; ok {
			continue
		}
		pctx, cancel := context.WithCancel(ctx)
		ps := &podState{pod: p, cancel: cancel, done: make(chan struct{})}
		f.pods[p.Name] = ps
		added = append(added, ps)
		go func() {
			defer close(ps.done)
			f.scrapeLoop(pctx, ps)
		}()
	}
	f.names = f.names[:0]
	for name := range f.pods {
		f.names = append(f.names, name)
	}
	slices.Sort(f.names)
	f.mu.Unlock()

	var errs []error
	if dp := max(f.cfg.Addresses.Discovery.DataParallelSize, 1); len(full)*dp > index.MaxEngines {
		errs = append(errs, fmt.Errorf("%d pods x %d data-parallel ranks = %d engines, more than the block index tracks (%d, index.MaxEngines): "+
			"pods beyond it route without prefix scores; split the fleet across routers or lower discovery.data_parallel_size",
			len(full), dp, len(full)*dp, index.MaxEngines))
	}
	if in := f.cfg.Ingestor; in != nil && (len(gone) > 0 || len(added) > 0) {
		eps := make([]kvevents.Endpoint, 0, len(full))
		for _, p := range full {
			pe, err := f.cfg.Addresses.Endpoints(p)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			eps = append(eps, pe...)
		}
		// A replaced pod keeps its name: remove it first so Sync subscribes
		// afresh instead of keeping the old endpoint.
		var replaced []string
		for _, ps := range gone {
			if _, still := want[ps.pod.Name]; still {
				replaced = append(replaced, ps.pod.Name)
			}
		}
		in.Remove(replaced...)
		if err := in.Sync(eps); err != nil {
			errs = append(errs, fmt.Errorf("following KV events: %w", err))
		}
	}
	for _, ps := range gone { // every scraper told first, so they stop together
		ps.cancel()
	}
	for _, ps := range gone {
		<-ps.done
		if f.cfg.OnRemove != nil {
			f.cfg.OnRemove(ps.pod.Name)
		}
	}
	f.synced.Store(true)
	return errors.Join(errs...)
}

// Synced reports whether the source has delivered its first complete view.
func (f *Fleet) Synced() bool { return f.synced.Load() }

// Pods appends the name and load of every pod in service to dst, sorted
// by name, for the picker: a pod out of service (Out) is left out, as an
// open circuit breaker leaves it out. Scraped values older than the
// staleness limit are marked stale.
func (f *Fleet) Pods(dst []scoring.Pod) []scoring.Pod { return f.loads(dst, false) }

// loads appends the pods' loads, those out of service too when all is set.
func (f *Fleet) loads(dst []scoring.Pod, all bool) []scoring.Pod {
	now := f.cfg.Now()
	f.mu.RLock()
	defer f.mu.RUnlock()
	for _, name := range f.names {
		ps := f.pods[name]
		ps.mu.Lock()
		s, at, out, preempted := ps.scraped, ps.scrapedAt, ps.health.out.Reason != "", ps.preemptedAt
		ps.mu.Unlock()
		if out && !all {
			continue
		}
		dst = append(dst, scoring.Pod{Name: name, Load: scoring.Load{Running: s.Running, Waiting: s.Waiting,
			KVUsage: s.KVUsage, KVCacheTokens: s.KVCacheTokens, Fresh: !at.IsZero() && now.Sub(at) <= f.cfg.Metrics.StaleAfter.Duration,
			InFlight: int(ps.inFlight.Load() + ps.peerInFlight.Load()), PeerInFlight: int(ps.peerInFlight.Load()),
			PendingTokens: int(ps.pending.Load() + ps.peerPending.Load()), PeerPendingTokens: int(ps.peerPending.Load()),
			PeerTopPendingTokens: int(ps.peerTopPending.Load()),
			Preempting:           !preempted.IsZero() && now.Sub(preempted) <= PreemptionMemory}})
	}
	return dst
}

// Out lists the pods out of service and why, sorted by name, for metrics
// and /readyz.
func (f *Fleet) Out() []Outage {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []Outage
	for _, name := range f.names {
		ps := f.pods[name]
		ps.mu.Lock()
		if ps.health.out.Reason != "" {
			out = append(out, ps.health.out)
		}
		ps.mu.Unlock()
	}
	return out
}

// OutSignal returns a channel closed when pod goes out of service: the
// proxy moves a request that has sent nothing to its client when it is.
// It is closed already when the pod is out or unknown.
func (f *Fleet) OutSignal(pod string) <-chan struct{} {
	f.mu.RLock()
	ps := f.pods[pod]
	f.mu.RUnlock()
	if ps == nil {
		return closed
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return ps.health.signal()
}

// UpdateErrors counts source reports that were not followed completely.
func (f *Fleet) UpdateErrors() int64 { return f.updateErrs.Load() }

// Target returns where pod serves.
func (f *Fleet) Target(pod string) (Pod, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	ps, ok := f.pods[pod]
	if !ok {
		return Pod{}, false
	}
	return ps.pod, true
}

// Begin counts a request sent to pod as in flight until end is called,
// and its uncached prompt tokens (the prefill it costs the pod, as the
// picker estimated it) as pending until started is called, when the pod
// sends the response's first byte (a stream's first token), or until end;
// top says the request is of the highest priority class, whose pending
// tokens are also counted apart. Either function may be called more than
// once; a pod that left in between is not counted.
func (f *Fleet) Begin(pod string, prefillTokens int, top bool) (started, end func()) {
	f.mu.RLock()
	ps := f.pods[pod]
	f.mu.RUnlock()
	if ps == nil {
		return func() {}, func() {}
	}
	topTokens := 0
	if top {
		topTokens = prefillTokens
	}
	ps.inFlight.Add(1)
	ps.pending.Add(int64(prefillTokens))
	ps.topPending.Add(int64(topTokens))
	f.changed(pod)
	var startOnce, endOnce sync.Once
	started = func() {
		startOnce.Do(func() {
			ps.pending.Add(-int64(prefillTokens))
			ps.topPending.Add(-int64(topTokens))
			f.changed(pod)
		})
	}
	return started, func() {
		endOnce.Do(func() {
			started()
			ps.inFlight.Add(-1)
			f.changed(pod)
		})
	}
}

func (f *Fleet) changed(pod string) {
	if f.watch != nil {
		f.watch(pod)
	}
}

// Watch makes every change of this router's own in-flight or pending
// count of a pod call fn with the pod (package peers tells the other
// replicas). fn must not block. Call it before the fleet is used.
func (f *Fleet) Watch(fn func(pod string)) { f.watch = fn }

// OwnLoad is this router's own in-flight requests and pending prefill
// tokens on pod, in all and of the highest priority class, without its
// peers'; ok is false for a pod not in the fleet.
func (f *Fleet) OwnLoad(pod string) (inFlight, pending, topPending int, ok bool) {
	f.mu.RLock()
	ps := f.pods[pod]
	f.mu.RUnlock()
	if ps == nil {
		return 0, 0, 0, false
	}
	return int(ps.inFlight.Load()), int(ps.pending.Load()), int(ps.topPending.Load()), true
}

// PodNames appends the names of every pod in the fleet to dst, sorted.
func (f *Fleet) PodNames(dst []string) []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return append(dst, f.names...)
}

// SetPeerLoad sets what the peer router replicas have in flight on pod,
// summed over them (OwnLoad's counts); a pod not in the fleet is ignored
// (the peers' next full report sets it once it has joined).
func (f *Fleet) SetPeerLoad(pod string, inFlight, pending, topPending int) {
	f.mu.RLock()
	ps := f.pods[pod]
	f.mu.RUnlock()
	if ps != nil {
		ps.peerInFlight.Store(int64(inFlight))
		ps.peerPending.Store(int64(pending))
		ps.peerTopPending.Store(int64(topPending))
	}
}

// Health is one pod's scrape health, for metrics and logs.
type Health struct {
	Pod        string
	ScrapeErrs int64
	LastErr    string
	ScrapedAt  time.Time
}

// Health reports every pod's scrape health, sorted by name.
func (f *Fleet) Health() []Health {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Health, 0, len(f.names))
	for _, name := range f.names {
		ps := f.pods[name]
		ps.mu.Lock()
		h := Health{Pod: name, ScrapeErrs: ps.scrapeErrs, ScrapedAt: ps.scrapedAt}
		if ps.lastErr != nil {
			h.LastErr = ps.lastErr.Error()
		}
		ps.mu.Unlock()
		out = append(out, h)
	}
	return out
}

// String lists the pods, for test failures.
func (f *Fleet) String() string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return "[" + strings.Join(f.names, " ") + "]"
}
