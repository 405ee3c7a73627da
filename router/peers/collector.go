package peers

import (
	"github.com/prometheus/client_golang/prometheus"

	cm "github.com/llmd-dev/terraform-provider-llmd/router/constmetric"
)

// Collector exports an Exchange's counters.
type Collector struct{ Exchange *Exchange }

var _ prometheus.Collector = Collector{}

var (
	descPeers    = cm.Desc("llmd_router_peers", "Peer router replicas followed with a live stream.")
	descFrames   = cm.Desc("llmd_router_peer_frames_total", "Peer frames: sent (queued to peers), dropped (a peer too slow to take them), received (batches applied).", "kind")
	descSpecs    = cm.Desc("llmd_router_peer_speculations_total", "Peer decisions whose speculative entries this replica held.")
	descDemands  = cm.Desc("llmd_router_peer_kv_demands_total", "Peer requests whose KV demand this replica counted under the KV bound.")
	descUnshared = cm.Desc("llmd_router_peer_unshared_total", "This replica's decisions and KV demands not shared: too many open, or too many keys.")
	descLost     = cm.Desc("llmd_router_peer_lost_total", "Peer streams lost after they delivered: the replica decides without that peer until it is back.")
	descCutOffs  = cm.Desc("llmd_router_peer_cut_offs_total", "Peers cut off for a malformed message.")
	descRejected = cm.Desc("llmd_router_peer_rejected_total", "Peer streams and frames refused, by reason.", "reason")
	descSkipped  = cm.Desc("llmd_router_peer_skipped_total", "Peer speculative entries not applied, by reason.", "reason")
)

// Describe implements prometheus.Collector.
func (c Collector) Describe(ch chan<- *prometheus.Desc) {
	cm.Describe(ch, descPeers, descFrames, descSpecs, descDemands, descUnshared, descLost, descCutOffs, descRejected, descSkipped)
	c.Exchange.delay.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c Collector) Collect(ch chan<- prometheus.Metric) {
	c.Exchange.delay.Collect(ch)
	e, s := cm.Emitter(ch), c.Exchange.Stats()
	e.Gauge(descPeers, float64(s.Peers))
	e.Kinds(descFrames, map[string]int64{"sent": s.Sent, "dropped": s.Dropped, "received": s.Received})
	e.Counter(descSpecs, s.Speculations)
	e.Counter(descDemands, s.Demands)
	e.Counter(descUnshared, s.Unshared)
	e.Counter(descLost, s.Lost)
	e.Counter(descCutOffs, s.CutOffs)
	for _, r := range []string{"malformed", "version", "unauthenticated", "address"} {
		e.Counter(descRejected, s.Rejected[r], r)
	}
	for _, r := range []string{"block_size", "unknown_pod", "rank", "too_many_holds", "index"} {
		e.Counter(descSkipped, s.Skipped[r], r)
	}
}
