package kvevents

import (
	"github.com/prometheus/client_golang/prometheus"

	cm "github.com/llmd-dev/terraform-provider-llmd/router/constmetric"
)

// Collector exports the ingestion Stats at scrape time.
type Collector struct{ Ingestor *Ingestor }

var _ prometheus.Collector = Collector{}

var (
	descLag         = cm.Desc("llmd_router_kv_event_lag_seconds", "Age of the last applied KV-event batch when applied (engine clock to router clock).")
	descMaxLag      = cm.Desc("llmd_router_kv_event_max_lag_seconds", "Largest KV-event lag seen since start.")
	descMessages    = cm.Desc("llmd_router_kv_event_messages_total", "KV-event messages applied.")
	descConnections = cm.Desc("llmd_router_kv_event_connections_total", "Connections completed with KV-event publishers, each caught up by replay.")
	descGaps        = cm.Desc("llmd_router_kv_event_gaps_total", "Jumps ahead in a pod's KV-event sequence.")
	descRestarts    = cm.Desc("llmd_router_kv_event_restarts_total", "KV-event sequences that went backwards: the engine restarted.")
	descReplays     = cm.Desc("llmd_router_kv_event_replays_total", "KV-event replay requests sent.")
	descFullReplays = cm.Desc("llmd_router_kv_event_full_replays_total", "KV-event replays from seq 0: first contact without a peer replica's position, or a rebuild.")
	descResumed     = cm.Desc("llmd_router_kv_event_resumed_total", "Engines first followed from a peer replica's position (warm start) instead of a replay from seq 0.")
	descReplayFails = cm.Desc("llmd_router_kv_event_replay_failures_total", "KV-event replays that timed out or failed.")
	descPurges      = cm.Desc("llmd_router_kv_event_purges_total", "Engines wiped from the index (cleared, restarted, unrecoverable gap, removed).")
	descDecodeErrs  = cm.Desc("llmd_router_kv_event_decode_errors_total", "Malformed KV-event messages.")
	descFollowed    = cm.Desc("llmd_router_kv_event_endpoints", "KV-event publishers being followed.")
	descKinds       = cm.Desc("llmd_router_kv_event_events_total", "KV events and messages by kind: stored, removed, cleared, "+
		"unknown kinds, unknown fields of known kinds (skipped), other KV groups, duplicates, apply errors, transport errors.", "kind")
)

// Describe implements prometheus.Collector.
func (Collector) Describe(ch chan<- *prometheus.Desc) {
	cm.Describe(ch, descLag, descMaxLag, descMessages, descConnections, descGaps, descRestarts, descReplays,
		descFullReplays, descResumed, descReplayFails, descPurges, descDecodeErrs, descFollowed, descKinds)
}

// Collect implements prometheus.Collector.
func (c Collector) Collect(ch chan<- prometheus.Metric) {
	e, s := cm.Emitter(ch), c.Ingestor.Stats()
	e.Gauge(descLag, s.LagSeconds)
	e.Gauge(descMaxLag, s.MaxLagSeconds)
	e.Counter(descMessages, s.Messages)
	e.Counter(descConnections, s.Connections)
	e.Counter(descGaps, s.Gaps)
	e.Counter(descRestarts, s.Restarts)
	e.Counter(descReplays, s.Replays)
	e.Counter(descFullReplays, s.FullReplays)
	e.Counter(descResumed, s.Resumed)
	e.Counter(descReplayFails, s.ReplayFailures)
	e.Counter(descPurges, s.Purges)
	e.Counter(descDecodeErrs, s.DecodeErrors)
	e.Gauge(descFollowed, float64(s.Pods))
	e.Kinds(descKinds, map[string]int64{"stored": s.Stored, "removed": s.Removed, "cleared": s.Cleared,
		"unknown": s.UnknownEvents, "unknown_field": s.UnknownFields, "other_group": s.OtherGroupEvents, "duplicate": s.Duplicates,
		"apply_error": s.ApplyErrors, "transport_error": s.TransportErrors})
}
