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
)

// MaxDataParallelSize bounds discovery.data_parallel_size: the block index
// tracks 64 engines (index.MaxEngines), which DP 8 leaves to 8 pods.
const MaxDataParallelSize = 8

// DefaultScorers is used when the file lists none: llm-d's precise
// prefix-cache configuration (prefix 3 : KV use 2 : queue 2).
func DefaultScorers() []Scorer {
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
	if c.Discovery.Topic == "" {
		c.Discovery.Topic = DefaultTopic
	}
	setDuration(&c.Metrics.Interval, DefaultScrapeInterval)
	setDuration(&c.Metrics.StaleAfter, DefaultStaleAfter)
	setDuration(&c.Metrics.Timeout, DefaultScrapeTimeout)
	setDuration(&c.Index.SpeculationTTL, DefaultSpeculationTTL)
	if len(c.Scoring.Scorers) == 0 {
		c.Scoring.Scorers = DefaultScorers()
	}
}

func setDuration(d *Duration, v time.Duration) {
	if d.Duration == 0 {
		d.Duration = v
	}
}
