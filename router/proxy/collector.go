package proxy

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmd-dev/terraform-provider-llmd/router/discovery"
	"github.com/llmd-dev/terraform-provider-llmd/router/index"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// CoreCollector exports the routing core's own counters at scrape time:
// the block index, KV-event ingestion, the per-pod in-flight counts and the
// admission queue. Reading snapshots at scrape time keeps the hot paths of
// those packages free of metric updates. Nil fields are left out.
type CoreCollector struct {
	Index    *index.Index
	Ingestor *kvevents.Ingestor
	Fleet    Fleet
	Server   *Server
	Picker   *scoring.Picker
	// Scrapes reports the fleet's scrape health and discovery errors;
	// *discovery.Fleet implements it.
	Scrapes interface {
		Health() []discovery.Health
		UpdateErrors() int64
	}
}

var _ prometheus.Collector = (*CoreCollector)(nil)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, labels, nil)
}

var (
	descKeys        = desc("llmd_router_index_keys", "Distinct block keys held by any engine on any tier.")
	descPairs       = desc("llmd_router_index_holdings", "(block key, engine) holdings in the index.")
	descMemory      = desc("llmd_router_index_memory_bytes", "Estimated memory of the block index.")
	descOrphans     = desc("llmd_router_index_orphans", "Blocks waiting for their parent block's event.")
	descSpeculative = desc("llmd_router_index_speculative", "Live speculative (key, engine) entries.")
	descEvicted     = desc("llmd_router_index_evicted_total", "Holdings dropped by the index's memory bound.")
	descLag         = desc("llmd_router_kv_event_lag_seconds", "Age of the last applied KV-event batch when applied (engine clock to router clock).")
	descMaxLag      = desc("llmd_router_kv_event_max_lag_seconds", "Largest KV-event lag seen since start.")
	descEvents      = desc("llmd_router_kv_event_messages_total", "KV-event messages applied.")
	descConnections = desc("llmd_router_kv_event_connections_total", "Connections completed with KV-event publishers, each caught up by replay.")
	descGaps        = desc("llmd_router_kv_event_gaps_total", "Jumps ahead in a pod's KV-event sequence.")
	descRestarts    = desc("llmd_router_kv_event_restarts_total", "KV-event sequences that went backwards: the engine restarted.")
	descReplays     = desc("llmd_router_kv_event_replays_total", "KV-event replay requests sent.")
	descReplayFails = desc("llmd_router_kv_event_replay_failures_total", "KV-event replays that timed out or failed.")
	descPurges      = desc("llmd_router_kv_event_purges_total", "Engines wiped from the index (cleared, restarted, unrecoverable gap, removed).")
	descDecodeErrs  = desc("llmd_router_kv_event_decode_errors_total", "Malformed KV-event messages.")
	descFollowed    = desc("llmd_router_kv_event_endpoints", "KV-event publishers being followed.")
	descInFlight    = desc("llmd_router_pod_in_flight", "Requests this router has open on the pod.", "pod")
	descPods        = desc("llmd_router_pods", "Ready pods discovery reports.")
	descQueued      = desc("llmd_router_queued_requests", "Requests waiting for a pod under its in-flight cap.")
	descStale       = desc("llmd_router_pod_load_stale", "1 while the pod's scraped load is older than metrics.stale_after: it is scored without load.", "pod")
	descCircuit     = desc("llmd_router_pod_circuit", "1 for the pod's circuit-breaker state (closed, open: out of scoring, half-open: one probe).", "pod", "state")
	descOpenings    = desc("llmd_router_circuit_openings_total", "Times a pod's circuit breaker opened.")
	descFailed      = desc("llmd_router_pod_failed_attempts_total", "Attempts on the pod that failed: refused connections, timeouts, 5xx, broken responses (the circuit breaker's input).", "pod")
	descSilent      = desc("llmd_router_pod_kv_events_silent", "1 while the pod was sent requests but published no KV events for discovery.kv_events_silent_after: the index is blind to it.", "pod")

	// Counters computed by the core packages, exported as they are.
	descIndexCounters = desc("llmd_router_index_events_total", "Block-index operations by kind: blocks stored and removed, "+
		"orphans linked and dropped, unresolved token-less blocks, block-size mismatches, speculation confirmed and expired.", "kind")
	descIngestCounters = desc("llmd_router_kv_event_events_total", "KV events and messages by kind: stored, removed, cleared, "+
		"unknown kinds, other KV groups, duplicates, apply errors, transport errors.", "kind")
	descPickerCounters = desc("llmd_router_picker_total", "Picker outcomes by kind: decisions, untokenizable decisions, failed speculative writes.", "kind")
	descScrapeErrs     = desc("llmd_router_pod_scrape_errors_total", "Failed /metrics scrapes of the pod.", "pod")
	descUpdateErrs     = desc("llmd_router_discovery_update_errors_total", "Discovery reports the router could not follow completely.")
)

// Describe implements prometheus.Collector.
func (c *CoreCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descKeys, descPairs, descMemory, descOrphans, descSpeculative, descEvicted,
		descLag, descMaxLag, descEvents, descConnections, descGaps, descRestarts, descReplays, descReplayFails, descPurges,
		descDecodeErrs, descFollowed, descInFlight, descPods, descQueued, descStale, descCircuit, descOpenings, descFailed, descSilent,
		descIndexCounters, descIngestCounters, descPickerCounters, descScrapeErrs, descUpdateErrs} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *CoreCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	kinds := func(d *prometheus.Desc, vs map[string]int64) {
		for k, v := range vs {
			counter(d, v, k)
		}
	}
	if c.Index != nil {
		s := c.Index.Stats()
		gauge(descKeys, float64(s.Keys))
		gauge(descPairs, float64(s.Pairs))
		gauge(descMemory, float64(s.MemoryBytes))
		gauge(descOrphans, float64(s.Orphans))
		gauge(descSpeculative, float64(s.Speculative))
		counter(descEvicted, s.Evicted)
		kinds(descIndexCounters, map[string]int64{"blocks_stored": s.BlocksStored, "blocks_removed": s.BlocksRemoved,
			"orphans_linked": s.OrphansLinked, "orphans_dropped": s.OrphansDropped, "unresolved": s.Unresolved,
			"block_size_mismatch": s.BlockSizeMismatches, "speculation_confirmed": s.SpecConfirmed, "speculation_expired": s.SpecExpired})
	}
	if c.Ingestor != nil {
		s := c.Ingestor.Stats()
		gauge(descLag, s.LagSeconds)
		gauge(descMaxLag, s.MaxLagSeconds)
		counter(descEvents, s.Messages)
		counter(descConnections, s.Connections)
		counter(descGaps, s.Gaps)
		counter(descRestarts, s.Restarts)
		counter(descReplays, s.Replays)
		counter(descReplayFails, s.ReplayFailures)
		counter(descPurges, s.Purges)
		counter(descDecodeErrs, s.DecodeErrors)
		gauge(descFollowed, float64(s.Pods))
		kinds(descIngestCounters, map[string]int64{"stored": s.Stored, "removed": s.Removed, "cleared": s.Cleared,
			"unknown": s.UnknownEvents, "other_group": s.OtherGroupEvents, "duplicate": s.Duplicates,
			"apply_error": s.ApplyErrors, "transport_error": s.TransportErrors})
	}
	if c.Picker != nil {
		s := c.Picker.Stats()
		kinds(descPickerCounters, map[string]int64{"decisions": s.Decisions, "untokenizable": s.Untokenizable, "speculate_errors": s.SpeculateErrs})
	}
	if c.Scrapes != nil {
		for _, h := range c.Scrapes.Health() {
			counter(descScrapeErrs, h.ScrapeErrs, h.Pod)
		}
		counter(descUpdateErrs, c.Scrapes.UpdateErrors())
	}
	var pods []scoring.Pod
	if c.Fleet != nil {
		pods = c.Fleet.Pods(nil)
		gauge(descPods, float64(len(pods)))
		for _, p := range pods {
			gauge(descInFlight, float64(p.Load.InFlight), p.Name)
			stale := 0.0
			if !p.Load.Fresh {
				stale = 1
			}
			gauge(descStale, stale, p.Name)
		}
		silent := map[string]bool{}
		for _, sl := range c.Fleet.Silences() {
			silent[sl.Pod] = true
		}
		for _, p := range pods {
			v := 0.0
			if silent[p.Name] {
				v = 1
			}
			gauge(descSilent, v, p.Name)
		}
	}
	if c.Server != nil {
		gauge(descQueued, float64(c.Server.adm.queued()))
		states, opened := c.Server.br.states()
		counter(descOpenings, opened)
		for _, p := range pods {
			gauge(descCircuit, 1, p.Name, states[p.Name].String())
			counter(descFailed, c.Server.br.failures(p.Name), p.Name)
		}
	}
}
