package config

import "time"

// Defaults. The scrape interval and staleness limit are what routers in the
// field use (PROTOCOLS.md section 3); ports are vLLM's OpenAI server port and
// the KV-event ports of llm-d's deployment guides; the speculation TTL is
// llm-d's.
const (
	DefaultListen         = ":8000"
	DefaultHTTPPort       = 8000
	DefaultKVEventsPort   = 5557
	DefaultReplayPort     = 5558
	DefaultTopic          = "kv@{ip}:{port}@{model}"
	DefaultScrapeInterval = 50 * time.Millisecond
	DefaultStaleAfter     = 2 * time.Second
	DefaultScrapeTimeout  = time.Second
	DefaultSpeculationTTL = 2 * time.Second
	// DefaultPeerWarmStart bounds a starting replica's wait for a peer's
	// index; a peer answers in well under a second at 256 pods
	// (BENCHMARKS.md), so 10 s covers a busy peer before replay takes over.
	DefaultPeerWarmStart = 10 * time.Second
	// DefaultKVEventsSilentAfter: vLLM publishes a request's BlockStored
	// within an engine step of its prefill; 30 s leaves room for requests
	// queued behind a full batch without leaving a blind index unreported.
	DefaultKVEventsSilentAfter = 30 * time.Second
	// DefaultEjectAfterFailures: a pod that accepts connections and never
	// answers fails each scrape at metrics.timeout (1 s), and the next one
	// starts at once, so three in a row take it out about 3 s after it
	// stopped answering, inside the 5 s the router promises (issue 28); a
	// refused connection fails in microseconds, so three take about three
	// intervals (150 ms). One or two failures are a GC pause or a slow
	// page, not a sick pod.
	DefaultEjectAfterFailures = 3
	// DefaultFrozenAfter: vLLM counts generation tokens every engine step
	// that decodes and a prompt's tokens when its prefill completes
	// (vllm/v1/metrics/stats.py, IterationStats.update_from_output), so a
	// pod merely busy, even ten times slower per token, moves one of them
	// every step. Both stay flat only while no step completes, or while a
	// lone prefill runs with nothing decoding beside it; 30 s covers a
	// 128k-token prefill of a large model and is still minutes before the
	// stream idle timeout would notice.
	DefaultFrozenAfter = 30 * time.Second
)

// DefaultTokenizerCacheBytes bounds the tokenizer's prefix cache: about 150
// recent prompts of 220 KB (text plus ids), 3% of the router pod's default
// 2 GiB memory limit.
const DefaultTokenizerCacheBytes = 64 << 20

// Upstream defaults. vLLM answers a stream's headers within milliseconds, so
// 30 s only ever cuts a pod that hangs; a request queued behind a full batch
// sends no byte until its first token, which under overload takes minutes,
// hence Envoy's 5-minute stream idle timeout; 30 minutes for a whole request
// is SGLang's gateway's. Three failures in a row are not one unlucky
// request; a 2 s open period spans the staleness limit discovery needs to
// notice a dead pod; 30 s caps the wait of a pod that recovered.
const (
	DefaultResponseHeaderTimeout = 30 * time.Second
	DefaultStreamIdleTimeout     = 5 * time.Minute
	DefaultRequestTimeout        = 30 * time.Minute
	DefaultBreakerFailures       = 3
	DefaultBreakerOpenFor        = 2 * time.Second
	DefaultBreakerMaxOpenFor     = 30 * time.Second
)

// DefaultPriorityClasses are the router's priority classes, highest first,
// when none are configured (serve --priority-classes, the provider's
// limits.priority_classes); a request naming none is DefaultPriorityClass.
var DefaultPriorityClasses = []string{"high", "standard", "low"}

// DefaultPriorityClass is the class of a request that names none.
const DefaultPriorityClass = "standard"

// MaxEngines is how many engines (pods x data-parallel ranks) the block
// index tracks: index.MaxEngines, restated here so this package stays free
// of the router's other packages (a test in package index holds them equal).
const MaxEngines = 4096

// MaxDataParallelSize bounds discovery.data_parallel_size: each rank runs
// on at least one GPU, and the largest GPU instances carry 8.
const MaxDataParallelSize = 8

// DefaultScorers is used when the file lists none: CostAwareScorers. It
// replaced llm-d's mix (LLMDScorers) on live evidence: in five consecutive
// demo runs on an idle machine it gave 2.53-2.57x round robin where llm-d's
// mix gave 1.23-2.55x, collapsing in three of them (BENCHMARKS.md,
// 2026-12-01); the default changes only on repeated live runs (DESIGN.md
// decision 8).
func DefaultScorers() []Scorer { return CostAwareScorers() }

// CostAwareScorers is prefix 2 : cost 2 : in-flight 1 : rendezvous 1 under
// a bounded-load cap: prefix affinity weighed against each pod's estimated time to first
// token (scorer cost: the request's uncached prefill behind the prefill
// this router has pending on the pod, exact at decision time), the
// router's own in-flight count as a tie-break that moves with every
// decision of a burst, and load-bound at factor 1.75 weighted above the
// rest together, so no pod takes more than 1.75x the mean of the router's
// in-flight requests (a hot prefix spills to a second pod instead of
// queueing behind one). Every input is the router's own count, none a
// scrape that lags a burst by an interval. A prefix no pod holds also
// leans, by a weight of 1, to the pod its rendezvous hash names, which
// every router replica computes alike, so replicas that cannot see each
// other's speculative entries place a new prefix on one pod. The mix won
// the live tuning on held-out workloads, and the rendezvous term the
// held-out runs behind one and two routers (BENCHMARKS.md).
func CostAwareScorers() []Scorer {
	return []Scorer{{Type: "prefix", Weight: 2}, {Type: "cost", Weight: 2}, {Type: "in-flight", Weight: 1},
		{Type: "load-bound", Weight: 10, Params: map[string]float64{"factor": 1.75}}, {Type: "rendezvous", Weight: 1}}
}

// LLMDScorers is llm-d's precise prefix-cache configuration: prefix 3 :
// KV use 2 : queue 2 (the provider's preset "llmd", the bench's llmd).
func LLMDScorers() []Scorer {
	return []Scorer{{Type: "prefix", Weight: 3}, {Type: "kv-usage", Weight: 2}, {Type: "queue", Weight: 2}}
}

// Default fills every unset field with its default. Replay has no "unset":
// 0 turns it off, so only a file without any ports gets the default.
func (c *Config) Default() {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	p := &c.Discovery.Ports
	if *p == (Ports{}) {
		p.Replay = DefaultReplayPort
	}
	if p.HTTP == 0 {
		p.HTTP = DefaultHTTPPort
	}
	if p.KVEvents == 0 {
		p.KVEvents = DefaultKVEventsPort
	}
	setDuration(&c.Discovery.KVEventsSilentAfter, DefaultKVEventsSilentAfter)
	if c.Discovery.Topic == "" {
		c.Discovery.Topic = DefaultTopic
	}
	setDuration(&c.Metrics.Interval, DefaultScrapeInterval)
	setDuration(&c.Metrics.StaleAfter, DefaultStaleAfter)
	setDuration(&c.Metrics.Timeout, DefaultScrapeTimeout)
	if c.Metrics.EjectAfterFailures == 0 {
		c.Metrics.EjectAfterFailures = DefaultEjectAfterFailures
	}
	setDuration(&c.Metrics.FrozenAfter, DefaultFrozenAfter)
	setDuration(&c.Index.SpeculationTTL, DefaultSpeculationTTL)
	setDuration(&c.Peers.WarmStart, DefaultPeerWarmStart)
	if c.Tokenizer.CacheBytes == nil {
		n := int64(DefaultTokenizerCacheBytes)
		c.Tokenizer.CacheBytes = &n
	}
	c.Upstream.Default()
	if len(c.Scoring.Scorers) == 0 {
		c.Scoring.Scorers = DefaultScorers()
	}
}

// Default fills every unset upstream setting with its default; negative
// durations (off) stay.
func (u *Upstream) Default() {
	setDuration(&u.ResponseHeaderTimeout, DefaultResponseHeaderTimeout)
	setDuration(&u.StreamIdleTimeout, DefaultStreamIdleTimeout)
	setDuration(&u.RequestTimeout, DefaultRequestTimeout)
	if u.Breaker.Failures == 0 {
		u.Breaker.Failures = DefaultBreakerFailures
	}
	setDuration(&u.Breaker.OpenFor, DefaultBreakerOpenFor)
	setDuration(&u.Breaker.MaxOpenFor, DefaultBreakerMaxOpenFor)
}

func setDuration(d *Duration, v time.Duration) {
	if d.Duration == 0 {
		d.Duration = v
	}
}
