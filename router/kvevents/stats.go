package kvevents

import (
	"math"
	"sync/atomic"
)

// Stats are the ingestion counters the server exports as metrics; the
// index's own gauges (keys, orphans, memory) come from index.Stats.
type Stats struct {
	Pods             int64 // endpoints being followed
	Connections      int64 // connections completed with publishers (each is caught up by replay)
	Messages         int64 // messages applied
	Stored           int64 // BlockStored events applied
	Removed          int64 // BlockRemoved events applied
	Cleared          int64 // AllBlocksCleared events applied
	UnknownEvents    int64 // events of a kind this version does not know
	UnknownFields    int64 // fields of known events this version does not know (skipped)
	OtherGroupEvents int64 // events of hybrid-model KV groups other than 0, not indexed
	Duplicates       int64 // messages already applied (live copies of replayed ones)
	Gaps             int64 // jumps ahead in a (pod, rank) sequence
	Restarts         int64 // sequences that went backwards: the engine restarted
	Replays          int64 // replay requests sent
	FullReplays      int64 // of which from seq 0 (first contact without a peer's position, or a rebuild)
	Resumed          int64 // engines first followed from a peer replica's position instead of seq 0
	ReplayFailures   int64 // replays that timed out or failed
	Purges           int64 // engines wiped by the lifecycle rules
	DecodeErrors     int64 // malformed messages
	ApplyErrors      int64 // decoded events the index refused
	TransportErrors  int64 // socket errors (the feed reconnects)
	LagSeconds       float64
	MaxLagSeconds    float64 // largest lag seen, since start
}

type counters struct {
	pods, connections, messages, stored, removed, cleared, unknown, otherGroup atomic.Int64
	unknownFields                                                              atomic.Int64
	duplicates, gaps, restarts, replays, replayFailures, purges                atomic.Int64
	fullReplays, resumed                                                       atomic.Int64
	decodeErrors, applyErrors, transportErrors                                 atomic.Int64
	lagBits, maxLagBits                                                        atomic.Uint64
}

// lag records now-ts of the latest applied batch.
func (c *counters) lag(seconds float64) {
	c.lagBits.Store(math.Float64bits(seconds))
	for {
		old := c.maxLagBits.Load()
		if seconds <= math.Float64frombits(old) || c.maxLagBits.CompareAndSwap(old, math.Float64bits(seconds)) {
			return
		}
	}
}

func (c *counters) snapshot() Stats {
	return Stats{
		Pods: c.pods.Load(), Connections: c.connections.Load(), Messages: c.messages.Load(), Stored: c.stored.Load(), Removed: c.removed.Load(),
		Cleared: c.cleared.Load(), UnknownEvents: c.unknown.Load(), UnknownFields: c.unknownFields.Load(), OtherGroupEvents: c.otherGroup.Load(),
		Duplicates: c.duplicates.Load(), Gaps: c.gaps.Load(), Restarts: c.restarts.Load(), Replays: c.replays.Load(),
		FullReplays: c.fullReplays.Load(), Resumed: c.resumed.Load(),
		ReplayFailures: c.replayFailures.Load(), Purges: c.purges.Load(), DecodeErrors: c.decodeErrors.Load(),
		ApplyErrors: c.applyErrors.Load(), TransportErrors: c.transportErrors.Load(),
		LagSeconds: math.Float64frombits(c.lagBits.Load()), MaxLagSeconds: math.Float64frombits(c.maxLagBits.Load()),
	}
}
