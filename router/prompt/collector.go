package prompt

import (
	"github.com/prometheus/client_golang/prometheus"

	cm "github.com/llmd-dev/terraform-provider-llmd/router/constmetric"
)

// Collector exports the tokenizer prefix cache's counters at scrape time;
// without a cache it exports nothing.
type Collector struct{ Chat *Chat }

var _ prometheus.Collector = Collector{}

var (
	descCacheSegments = cm.Desc("llmd_router_tokenizer_cache_lookups_total", "Prompt segments (text between special "+
		"tokens, 512 bytes or more) by how the prefix cache served them: hit (whole segment reused), resumed (a cached "+
		"segment's prefix reused, the rest tokenized), miss (tokenized from its start).", "result")
	descCacheText = cm.Desc("llmd_router_tokenizer_cache_text_bytes_total", "Text of the counted segments by whether "+
		"its ids came from the cache (reused) or were tokenized (encoded).", "kind")
	descCacheEvicted = cm.Desc("llmd_router_tokenizer_cache_evicted_total", "Segments dropped by the cache's byte bound.")
	descCacheBytes   = cm.Desc("llmd_router_tokenizer_cache_bytes", "Estimated memory of the tokenizer prefix cache.")
	descCacheMax     = cm.Desc("llmd_router_tokenizer_cache_max_bytes", "The cache's bound (tokenizer.cache_bytes).")
	descCacheHeld    = cm.Desc("llmd_router_tokenizer_cache_segments", "Segments the cache holds.")
)

// Describe implements prometheus.Collector.
func (Collector) Describe(ch chan<- *prometheus.Desc) {
	cm.Describe(ch, descCacheSegments, descCacheText, descCacheEvicted, descCacheBytes, descCacheMax, descCacheHeld)
}

// Collect implements prometheus.Collector.
func (c Collector) Collect(ch chan<- prometheus.Metric) {
	if c.Chat == nil || c.Chat.Cache == nil {
		return
	}
	e, s := cm.Emitter(ch), c.Chat.Cache.Stats()
	e.Kinds(descCacheSegments, map[string]int64{"hit": s.Hits, "resumed": s.Resumed, "miss": s.Misses})
	e.Kinds(descCacheText, map[string]int64{"reused": s.ReusedBytes, "encoded": s.EncodedBytes})
	e.Counter(descCacheEvicted, s.Evicted)
	e.Gauge(descCacheBytes, float64(s.Bytes))
	e.Gauge(descCacheMax, float64(s.MaxBytes))
	e.Gauge(descCacheHeld, float64(s.Segments))
}
