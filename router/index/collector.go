package index

import (
	"github.com/prometheus/client_golang/prometheus"

	cm "github.com/llmd-dev/terraform-provider-llmd/router/constmetric"
)

// Collector exports the index's Stats at scrape time.
type Collector struct{ Index *Index }

var _ prometheus.Collector = Collector{}

var (
	descKeys        = cm.Desc("llmd_router_index_keys", "Distinct block keys held by any engine on any tier.")
	descPairs       = cm.Desc("llmd_router_index_holdings", "(block key, engine) holdings in the index.")
	descMemory      = cm.Desc("llmd_router_index_memory_bytes", "Estimated memory of the block index.")
	descOrphans     = cm.Desc("llmd_router_index_orphans", "Blocks waiting for their parent block's event.")
	descSpeculative = cm.Desc("llmd_router_index_speculative", "Live speculative (key, engine) entries.")
	descSpecHeld    = cm.Desc("llmd_router_index_speculative_held", "Speculative entries whose request has had no "+
		"response byte yet: blocks of requests still queued or in prefill at their pod.")
	descEvicted = cm.Desc("llmd_router_index_evicted_total", "Holdings dropped by the index's memory bound.")
	descOps     = cm.Desc("llmd_router_index_events_total", "Block-index operations by kind: blocks stored and removed, "+
		"orphans linked and dropped, unresolved token-less blocks, block-size mismatches, speculation confirmed and expired.", "kind")
)

// Describe implements prometheus.Collector.
func (Collector) Describe(ch chan<- *prometheus.Desc) {
	cm.Describe(ch, descKeys, descPairs, descMemory, descOrphans, descSpeculative, descSpecHeld, descEvicted, descOps)
}

// Collect implements prometheus.Collector.
func (c Collector) Collect(ch chan<- prometheus.Metric) {
	e, s := cm.Emitter(ch), c.Index.Stats()
	e.Gauge(descKeys, float64(s.Keys))
	e.Gauge(descPairs, float64(s.Pairs))
	e.Gauge(descMemory, float64(s.MemoryBytes))
	e.Gauge(descOrphans, float64(s.Orphans))
	e.Gauge(descSpeculative, float64(s.Speculative))
	e.Gauge(descSpecHeld, float64(s.SpeculativeHeld))
	e.Counter(descEvicted, s.Evicted)
	e.Kinds(descOps, map[string]int64{"blocks_stored": s.BlocksStored, "blocks_removed": s.BlocksRemoved,
		"orphans_linked": s.OrphansLinked, "orphans_dropped": s.OrphansDropped, "unresolved": s.Unresolved,
		"block_size_mismatch": s.BlockSizeMismatches, "speculation_confirmed": s.SpecConfirmed, "speculation_expired": s.SpecExpired})
}
