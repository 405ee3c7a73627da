package peers

import (
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmd-dev/terraform-provider-llmd/router/index"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
)

// Fleet is what the exchange needs of package discovery: this replica's
// own load per pod, and a place for its peers'. *discovery.Fleet
// implements it.
type Fleet interface {
	OwnLoad(pod string) (inFlight, pending, topPending int, ok bool)
	PodNames(dst []string) []string
	SetPeerLoad(pod string, inFlight, pending, topPending int)
	Synced() bool
}

// KV is where the peers' KV demands go: package proxy's KV bound, which
// counts a peer's request on a pod as it counts its own. *proxy.Server
// implements it.
type KV interface {
	// PeerKV counts (sign 1) or no longer counts (-1) a peer's request on
	// pod's KV cache: its prompts' full blocks by key, one chain per
	// prompt, and its own blocks beyond them.
	PeerKV(pod string, chains [][]uint64, own, sign int)
	// PeerClassCame says a request of the named priority class came to a
	// peer, as one coming to this replica would hold the classes below
	// it to their shares.
	PeerClassCame(class string)
}

// Ingestor is what the exchange needs of package kvevents for warm
// starts. *kvevents.Ingestor implements it.
type Ingestor interface {
	Positions() []kvevents.Position
	Resume(ps []kvevents.Position)
}

// Config configures an Exchange.
type Config struct {
	Index    *index.Index
	Fleet    Fleet
	Ingestor Ingestor
	// DataParallelSize is every pod's data-parallel ranks (0 or 1: none): a
	// peer's entry for a rank beyond it is refused.
	DataParallelSize int
	// Token, when set, is required of peers (a bearer token in the stream's
	// metadata) and presented to them.
	Token string
	// FlushEvery is how long a decision's news waits to share a batch with
	// the next ones (default 2ms): decisions never wait for it.
	FlushEvery time.Duration
	// FullEvery is how often a full batch (every pod's load, every open
	// hold) goes out, which heals what a dropped batch lost and proves the
	// replica alive (default 1s).
	FullEvery time.Duration
	// SilentAfter is how long a peer may send nothing before its entries
	// are settled and its loads forgotten (default 3 x FullEvery).
	SilentAfter time.Duration
	// CutOff is how long a peer that sent a malformed frame is not
	// followed (default 30s).
	CutOff time.Duration
	// KV takes the peers' KV demands (nil: they are dropped).
	KV KV
	// Waiting is how many requests this replica holds waiting for a pod,
	// and Work the work it placed on the fleet, tokens per second
	// (proxy.Server.Work), both sent with every batch (nil: none).
	Waiting, Work func() int
	// Logger gets one line per peer connected, lost or cut off.
	Logger *slog.Logger
}

// Exchange shares this replica's decisions with its peer replicas and
// applies theirs (DESIGN.md decision 10): the speculative index entries a
// decision writes, held until the request's first byte, the in-flight
// requests and pending prefill tokens per pod, and, under the KV bound,
// each request's KV demand until it ends. Nothing on a decision's
// path waits for a peer: news is queued under a short lock and sent by a
// goroutine per peer; a peer that is slow loses batches (the next full
// batch heals them), one that is silent or gone is forgotten (its entries
// expire), one that sends garbage is cut off. Safe for concurrent use.
type Exchange struct {
	cfg Config
	id  string
	c   counters
	// delay is how late peers' decisions reach this replica: from each
	// decision, in the peer's clock, to its entries held here.
	delay prometheus.Histogram

	out outbox

	mu        sync.Mutex
	followers map[string]*follower // by address
	// peerLoads is what each followed peer last reported, by peer address
	// then pod; sums go to the fleet.
	peerLoads map[string]map[string]load
	// peerCounts is what each followed peer last reported it holds
	// waiting and places, by peer address.
	peerCounts map[string]peerCounts
}

// peerCounts is what a peer last reported of its own queue and work.
type peerCounts struct{ waiting, work int }

// New returns an Exchange following no peer yet. Its ID, which peers see
// in its frames, is the host name (the pod name) and a random suffix, so
// that replicas on one host tell each other apart.
func New(cfg Config) *Exchange {
	if cfg.FlushEvery <= 0 {
		cfg.FlushEvery = 2 * time.Millisecond
	}
	if cfg.FullEvery <= 0 {
		cfg.FullEvery = time.Second
	}
	if cfg.SilentAfter <= 0 {
		cfg.SilentAfter = 3 * cfg.FullEvery
	}
	if cfg.CutOff <= 0 {
		cfg.CutOff = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	host, _ := os.Hostname()
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	id := host + "-" + hex.EncodeToString(suffix[:])
	if len(id) > maxReplicaID {
		id = id[len(id)-maxReplicaID:]
	}
	x := &Exchange{cfg: cfg, id: id, followers: make(map[string]*follower), peerLoads: make(map[string]map[string]load), peerCounts: make(map[string]peerCounts),
		delay: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "llmd_router_peer_delay_seconds",
			Help: "How late peer replicas' decisions are held here: from each decision, in the deciding replica's clock (across nodes the clocks' skew adds), to its entries held.",
			// 0.5 ms to ~4 s.
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)})}
	x.out.init(x)
	return x
}

// ID is the name this replica gives itself in its frames.
func (x *Exchange) ID() string { return x.id }

// Speculated implements scoring.Sharer: a decision of this replica wrote
// speculative entries for keys on e, held by h.
func (x *Exchange) Speculated(e index.Engine, keys []uint64, h *index.Hold) {
	if h == nil {
		return
	}
	id := x.out.speculated(e, keys)
	h.OnSettle(func() { x.out.settled(id) })
}

// KVHeld implements proxy.KVSharer: a request of this replica holds a KV
// demand on pod (its prompts' block keys, which must not change, and its
// own blocks) until KVEnded with the returned ID (0: not shared).
func (x *Exchange) KVHeld(pod string, chains [][]uint64, own int) uint64 {
	return x.out.kvHeld(pod, chains, own)
}

// KVEnded implements proxy.KVSharer: the request holding demand id ended.
func (x *Exchange) KVEnded(id uint64) { x.out.kvEnded(id) }

// KVClassCame implements proxy.KVSharer: a request of the named class came
// to this replica.
func (x *Exchange) KVClassCame(class string) { x.out.classCame(class) }

// Changed is the fleet's watch: this replica's own load on pod changed.
func (x *Exchange) Changed(pod string) { x.out.changed(pod) }

// Sync makes the followed peers equal addrs (host:port each), as peer
// discovery reports them; this replica's own address may be among them.
func (x *Exchange) Sync(addrs []string) {
	x.mu.Lock()
	var stop []*follower
	for a, f := range x.followers {
		if !slices.Contains(addrs, a) {
			stop = append(stop, f)
			delete(x.followers, a)
		}
	}
	for _, a := range addrs {
		if x.followers[a] == nil {
			f := newFollower(x, a)
			x.followers[a] = f
			go f.run()
		}
	}
	x.mu.Unlock()
	for _, f := range stop {
		f.close()
	}
}

// Close stops following every peer and stops sending.
func (x *Exchange) Close() {
	x.Sync(nil)
	x.out.close()
}

// setPeerLoads replaces what peer reported of the pods in ls (all of them
// when full) and gives the fleet the new sums over peers.
func (x *Exchange) setPeerLoads(peer string, ls []load, full bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	mine := x.peerLoads[peer]
	touched := make(map[string]bool, len(ls))
	if full || mine == nil {
		for pod := range mine {
			touched[pod] = true
		}
		mine = make(map[string]load, len(ls))
		x.peerLoads[peer] = mine
	}
	for _, l := range ls {
		if _, _, _, ok := x.cfg.Fleet.OwnLoad(l.Pod); !ok {
			continue // not a pod of this replica's fleet (yet)
		}
		mine[l.Pod] = l
		touched[l.Pod] = true
	}
	x.pushSums(touched)
}

// setPeerCounts records what peer holds waiting and places.
func (x *Exchange) setPeerCounts(peer string, c peerCounts) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.peerCounts[peer] = c
}

// sumPeers sums one of the followed peers' counts, as each last reported.
func (x *Exchange) sumPeers(count func(peerCounts) int) int {
	x.mu.Lock()
	defer x.mu.Unlock()
	n := 0
	for _, c := range x.peerCounts {
		n += count(c)
	}
	return n
}

// PeerWaiting is how many requests the followed peers hold waiting for a
// pod, as each last reported.
func (x *Exchange) PeerWaiting() int { return x.sumPeers(func(c peerCounts) int { return c.waiting }) }

// PeerWork is the work the followed peers place on the fleet, tokens per
// second, as each last reported.
func (x *Exchange) PeerWork() int { return x.sumPeers(func(c peerCounts) int { return c.work }) }

// ownCounts is what this replica holds waiting and places, for its
// batches.
func (x *Exchange) ownCounts() peerCounts {
	var c peerCounts
	if x.cfg.Waiting != nil {
		c.waiting = x.cfg.Waiting()
	}
	if x.cfg.Work != nil {
		c.work = x.cfg.Work()
	}
	return c
}

// forgetPeer drops what peer reported.
func (x *Exchange) forgetPeer(peer string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.peerCounts, peer)
	touched := make(map[string]bool)
	for pod := range x.peerLoads[peer] {
		touched[pod] = true
	}
	delete(x.peerLoads, peer)
	x.pushSums(touched)
}

// pushSums sets the fleet's peer loads of pods to the sums over peers.
// Callers hold x.mu.
func (x *Exchange) pushSums(pods map[string]bool) {
	for pod := range pods {
		var in, pend, top int
		for _, ls := range x.peerLoads {
			in += ls[pod].InFlight
			pend += ls[pod].Pending
			top += ls[pod].Top
		}
		x.cfg.Fleet.SetPeerLoad(pod, in, pend, top)
	}
}
