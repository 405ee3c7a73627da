package peers

import (
	"maps"
	"sync"
	"sync/atomic"
)

// Stats are the exchange's counters, for metrics.
type Stats struct {
	Peers        int64            // peers followed with a live stream
	Sent         int64            // frames queued to peers
	Dropped      int64            // frames dropped for a peer too slow to take them
	Received     int64            // batches applied from peers
	Speculations int64            // peer decisions whose entries this replica holds
	Demands      int64            // peer requests whose KV demand this replica counted
	Unshared     int64            // own decisions not shared (too many open, or too many keys)
	Lost         int64            // peer streams lost after they delivered
	CutOffs      int64            // peers cut off for a malformed message
	Rejected     map[string]int64 // refused streams and frames, by reason
	Skipped      map[string]int64 // peer entries not applied, by reason
}

type counters struct {
	connected, sent, dropped, received, speculations, demands, unshared, lost, cutOffs atomic.Int64

	mu             sync.Mutex
	rejects, skips map[string]int64
}

func (c *counters) rejected(reason string) { c.add(&c.rejects, reason, 1) }

func (c *counters) skipped(reason string, n int) { c.add(&c.skips, reason, int64(n)) }

func (c *counters) add(m *map[string]int64, reason string, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if *m == nil {
		*m = make(map[string]int64)
	}
	(*m)[reason] += n
}

// Stats returns a snapshot of the counters.
func (x *Exchange) Stats() Stats {
	c := &x.c
	c.mu.Lock()
	rej, skip := maps.Clone(c.rejects), maps.Clone(c.skips)
	c.mu.Unlock()
	return Stats{Peers: c.connected.Load(), Sent: c.sent.Load(), Dropped: c.dropped.Load(), Received: c.received.Load(),
		Speculations: c.speculations.Load(), Demands: c.demands.Load(), Unshared: c.unshared.Load(), Lost: c.lost.Load(), CutOffs: c.cutOffs.Load(),
		Rejected: rej, Skipped: skip}
}
