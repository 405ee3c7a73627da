package peers

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"

	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/discovery"
	"github.com/llmd-dev/terraform-provider-llmd/router/index"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
)

// The exchange runs here over real gRPC on loopback between exchanges of
// one process, each with a real index and a real discovery.Fleet. The
// fleets' pods are addresses nothing answers on (their scrapes fail, and
// ejection is off): only the counts the router keeps itself matter here.
// The warm-start tests feed the index directly and stand in for the
// ingestor with positionsBook, an in-process fake named as such: the
// end-to-end warm start, with real engines and ingestors, is
// TestWarmStartFromPeer in router/cmd/llmd-router.

var testPods = []string{"pod-a", "pod-b", "pod-c"}

// testTTL is the speculation TTL of the tests' indexes.
const testTTL = 50 * time.Millisecond

type replica struct {
	ix    *index.Index
	fleet *discovery.Fleet
	book  *positionsBook
	x     *Exchange
	addr  string
}

// newReplica starts an exchange serving on loopback. tune adjusts its
// config before it starts.
func newReplica(t testing.TB, tune func(*Config)) *replica {
	t.Helper()
	r := &replica{ix: index.New(index.Config{BlockSize: 4, SpeculationTTL: testTTL}), book: &positionsBook{}}
	r.fleet = discovery.NewFleet(discovery.FleetConfig{Metrics: config.Metrics{Interval: config.Duration{Duration: time.Hour},
		Timeout: config.Duration{Duration: 50 * time.Millisecond}}, Logger: slog.New(slog.DiscardHandler)})
	pods := make([]discovery.Pod, len(testPods))
	for i, p := range testPods {
		pods[i] = discovery.Pod{Name: p, HTTP: "http://127.0.0.1:1"}
	}
	if err := r.fleet.Update(pods); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.fleet.Update(nil) })
	cfg := Config{Index: r.ix, Fleet: r.fleet, Ingestor: r.book, FullEvery: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)}
	if tune != nil {
		tune(&cfg)
	}
	r.x = New(cfg)
	r.fleet.Watch(r.x.Changed)
	r.addr = serve(t, NewServer(r.x))
	t.Cleanup(r.x.Close)
	return r
}

// serve serves g on a loopback port until the test ends.
func serve(t testing.TB, g *grpc.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	return ln.Addr().String()
}

// decide is what the picker and proxy do for one request to pod, of the
// highest priority class when top: count it in flight, write its
// speculative entries and share them.
func (r *replica) decide(t *testing.T, pod string, keys []uint64, prefill int, top bool) (started, end func()) {
	t.Helper()
	begun, ended := r.fleet.Begin(pod, prefill, top)
	e := index.Engine{Pod: pod}
	h, err := r.ix.Speculate(e, keys)
	if err != nil {
		t.Fatal(err)
	}
	r.x.Speculated(e, keys, h)
	return func() { begun(); h.Settle() }, func() { h.Settle(); ended() }
}

// load is pod's load as r's picker sees it.
func (r *replica) load(pod string) (inFlight, peer, pending int) {
	for _, p := range r.fleet.Pods(nil) {
		if p.Name == pod {
			return p.Load.InFlight, p.Load.PeerInFlight, p.Load.PendingTokens
		}
	}
	return -1, -1, -1
}

// peerTop is the peers' pending prefill of the highest class on pod as r's
// picker sees it.
func (r *replica) peerTop(pod string) int {
	for _, p := range r.fleet.Pods(nil) {
		if p.Name == pod {
			return p.Load.PeerTopPendingTokens
		}
	}
	return -1
}

// speculative is how many leading keys r holds on pod only speculatively.
func (r *replica) speculative(pod string, keys []uint64) int {
	for _, m := range r.ix.Lookup(keys, nil) {
		if m.Engine.Pod == pod {
			return m.Speculative
		}
	}
	return 0
}

// eventually polls cond until it holds or 5 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestPeerSeesDecisionsAsTheyHappen(t *testing.T) {
	a, b := newReplica(t, nil), newReplica(t, nil)
	a.x.Sync([]string{b.addr})
	b.x.Sync([]string{a.addr})
	eventually(t, "a and b follow each other", func() bool { return a.x.Stats().Peers == 1 && b.x.Stats().Peers == 1 })

	keys := []uint64{11, 12, 13}
	started, end := a.decide(t, "pod-b", keys, 300, true)
	eventually(t, "b sees a's request in flight with its prefill, of the highest class", func() bool {
		in, peer, pend := b.load("pod-b")
		return in == 1 && peer == 1 && pend == 300 && b.peerTop("pod-b") == 300
	})
	eventually(t, "b holds a's speculative entries", func() bool { return b.speculative("pod-b", keys) == 3 })
	if in, peer, _ := a.load("pod-b"); in != 1 || peer != 0 {
		t.Errorf("a's own view of pod-b: in flight %d (peers' %d), want 1 (0): a replica must not count itself twice", in, peer)
	}
	// Held until the first byte: past the TTL, b still holds them.
	time.Sleep(2 * testTTL)
	if n := b.speculative("pod-b", keys); n != 3 {
		t.Fatalf("before the first byte b holds %d of a's entries, want 3 (held until a settles)", n)
	}
	started()
	eventually(t, "b's entries expire a TTL after a's first byte", func() bool { return b.speculative("pod-b", keys) == 0 })
	eventually(t, "b sees the prefill done", func() bool { _, _, pend := b.load("pod-b"); return pend == 0 && b.peerTop("pod-b") == 0 })
	end()
	eventually(t, "b sees the request end", func() bool { in, _, _ := b.load("pod-b"); return in == 0 })
	if s := b.x.Stats(); s.Speculations != 1 || s.Received == 0 {
		t.Errorf("b's stats %+v: want 1 speculation applied and batches received", s)
	}
	// The decision's delay was measured once, and it is no more than the
	// time the test waited for it.
	var m dto.Metric
	if err := b.x.delay.Write(&m); err != nil {
		t.Fatal(err)
	}
	if h := m.GetHistogram(); h.GetSampleCount() != 1 || h.GetSampleSum() < 0 || h.GetSampleSum() > 5 {
		t.Errorf("b's peer delay histogram: %d samples summing to %v s, want 1 of at most 5 s", h.GetSampleCount(), h.GetSampleSum())
	}
}

func TestPeerLoadsSumOverPeers(t *testing.T) {
	a, b, c := newReplica(t, nil), newReplica(t, nil), newReplica(t, nil)
	c.x.Sync([]string{a.addr, b.addr})
	var ends []func()
	for range 2 {
		_, end := a.decide(t, "pod-a", []uint64{1}, 10, false)
		ends = append(ends, end)
	}
	_, end := b.decide(t, "pod-a", []uint64{2}, 5, false)
	ends = append(ends, end)
	eventually(t, "c sums a's 2 and b's 1", func() bool {
		in, peer, pend := c.load("pod-a")
		return in == 3 && peer == 3 && pend == 25
	})
	for _, end := range ends {
		end()
	}
	eventually(t, "c sees all end", func() bool { in, _, _ := c.load("pod-a"); return in == 0 })
}

// TestPeersCountsSumAndAreForgotten: each replica tells its peers how many
// requests it holds waiting and the work it places (parts of the fleet's
// demand and work, which the autoscaler reads from any one replica); a
// lost peer's counts go.
func TestPeersCountsSumAndAreForgotten(t *testing.T) {
	var waitingA, waitingB, workA, workB atomic.Int64
	a := newReplica(t, func(c *Config) {
		c.Waiting = func() int { return int(waitingA.Load()) }
		c.Work = func() int { return int(workA.Load()) }
	})
	b := newReplica(t, func(c *Config) {
		c.Waiting = func() int { return int(waitingB.Load()) }
		c.Work = func() int { return int(workB.Load()) }
	})
	c := newReplica(t, func(c *Config) { c.SilentAfter = 300 * time.Millisecond })
	link := newRelay(t, b.addr)
	c.x.Sync([]string{a.addr, link.ln.Addr().String()})
	waitingA.Store(7)
	waitingB.Store(5)
	workA.Store(3000)
	workB.Store(1200)
	// Nothing else changes: the full batches (every FullEvery) carry them.
	eventually(t, "c sums a's 7 and b's 5 waiting, 3,000 and 1,200 tokens/s", func() bool {
		return c.x.PeerWaiting() == 12 && c.x.PeerWork() == 4200
	})
	waitingA.Store(0)
	workA.Store(0)
	eventually(t, "c sees a's queue drain and its work stop", func() bool { return c.x.PeerWaiting() == 5 && c.x.PeerWork() == 1200 })
	link.freeze()
	eventually(t, "c forgets the silent b's counts", func() bool { return c.x.PeerWaiting() == 0 && c.x.PeerWork() == 0 })
}

// relay forwards TCP between a client and target until frozen: then it
// stops moving bytes without closing anything, as a partition does.
type relay struct {
	ln     net.Listener
	mu     sync.Mutex
	frozen bool
	conns  []net.Conn
}

func newRelay(t *testing.T, target string) *relay {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{ln: ln}
	t.Cleanup(func() {
		_ = ln.Close()
		r.mu.Lock()
		for _, c := range r.conns {
			_ = c.Close()
		}
		r.mu.Unlock()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			r.mu.Lock()
			r.conns = append(r.conns, c, u)
			r.mu.Unlock()
			go r.pipe(c, u)
			go r.pipe(u, c)
		}
	}()
	return r
}

func (r *relay) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if err != nil {
			return
		}
		for r.isFrozen() {
			time.Sleep(10 * time.Millisecond) // a partition: bytes go nowhere, nothing closes
		}
		if _, err := dst.Write(buf[:n]); err != nil {
			return
		}
	}
}

func (r *relay) isFrozen() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.frozen
}

func (r *relay) freeze() {
	r.mu.Lock()
	r.frozen = true
	r.mu.Unlock()
}

func TestPartitionedPeerIsForgotten(t *testing.T) {
	a := newReplica(t, func(c *Config) { c.SilentAfter = 300 * time.Millisecond })
	b := newReplica(t, nil)
	link := newRelay(t, b.addr)
	a.x.Sync([]string{link.ln.Addr().String()})
	eventually(t, "a follows b", func() bool { return a.x.Stats().Peers == 1 })
	keys := []uint64{21, 22}
	b.decide(t, "pod-c", keys, 50, false) // never started: b would hold its entries forever
	eventually(t, "a sees b's request", func() bool { _, peer, _ := a.load("pod-c"); return peer == 1 })
	eventually(t, "a holds b's entries", func() bool { return a.speculative("pod-c", keys) == 2 })

	link.freeze()
	eventually(t, "a forgets the silent b's load", func() bool { _, peer, pend := a.load("pod-c"); return peer == 0 && pend == 0 })
	eventually(t, "b's entries expire on a", func() bool { return a.speculative("pod-c", keys) == 0 })
	if s := a.x.Stats(); s.Lost == 0 {
		t.Errorf("a's stats %+v: want the lost peer counted", s)
	}
	// Decisions go on alone, without waiting for the silent peer.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 2000 {
			_, end := a.decide(t, testPods[i%len(testPods)], []uint64{uint64(i)}, 1, false)
			end()
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("decisions blocked while a peer was partitioned")
	}
}

// kvBook is an in-process fake of package proxy's KV bound (Config.KV),
// named as such: it records the peers' demands it is given, by pod. The
// bound itself counting them is tested in router/proxy, and the whole
// path between router processes in internal/bench.
type kvBook struct {
	mu   sync.Mutex
	n    map[string]int // live demands
	own  map[string]int
	keys map[string]int
	came []string
}

func (k *kvBook) PeerClassCame(class string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.came = append(k.came, class)
}

// classes are the classes peers said came, in order.
func (k *kvBook) classes() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.came)
}

func newKVBook() *kvBook {
	return &kvBook{n: make(map[string]int), own: make(map[string]int), keys: make(map[string]int)}
}

func (k *kvBook) PeerKV(pod string, chains [][]uint64, own, sign int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.n[pod] += sign
	k.own[pod] += sign * own
	for _, c := range chains {
		k.keys[pod] += sign * len(c)
	}
}

// held is pod's live demands, their own blocks and prompt keys.
func (k *kvBook) held(pod string) (n, own, keys int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.n[pod], k.own[pod], k.keys[pod]
}

// TestPeerKVDemandsLastUntilTheRequestEnds: a replica's KV demands reach
// its peer's bound at once, every prompt's chain with them, and leave it
// when the request ends, or, all of them, when the replica goes.
func TestPeerKVDemandsLastUntilTheRequestEnds(t *testing.T) {
	book := newKVBook()
	a, b := newReplica(t, nil), newReplica(t, func(c *Config) { c.KV = book })
	a.x.Sync([]string{b.addr})
	b.x.Sync([]string{a.addr})
	eventually(t, "a and b follow each other", func() bool { return a.x.Stats().Peers == 1 && b.x.Stats().Peers == 1 })

	batchOfTwo := a.x.KVHeld("pod-b", [][]uint64{{1, 2, 3}, {1, 2, 4}}, 9)
	other := a.x.KVHeld("pod-c", [][]uint64{{7}}, 2)
	if batchOfTwo == 0 || other == 0 || batchOfTwo == other {
		t.Fatalf("demand IDs %d, %d: want two distinct shared ones", batchOfTwo, other)
	}
	a.x.KVHeld("pod-x", [][]uint64{{1}}, 1) // not b's pod
	a.x.KVClassCame("high")
	eventually(t, "b counts a's demands", func() bool {
		n, own, keys := book.held("pod-b")
		m, _, _ := book.held("pod-c")
		return n == 1 && own == 9 && keys == 6 && m == 1
	})
	eventually(t, "b hears a's high request", func() bool { return slices.Equal(book.classes(), []string{"high"}) })
	if s := b.x.Stats(); s.Demands != 2 || s.Skipped["unknown_pod"] != 1 {
		t.Errorf("b's stats %+v: want 2 demands counted and 1 for an unknown pod skipped", s)
	}
	a.x.KVEnded(batchOfTwo)
	a.x.KVEnded(batchOfTwo) // a second end is nothing
	eventually(t, "b stops counting the ended request", func() bool { n, own, keys := book.held("pod-b"); return n == 0 && own == 0 && keys == 0 })
	if n, _, _ := book.held("pod-c"); n != 1 {
		t.Fatalf("the other request's demand on b: %d, want 1", n)
	}
	a.x.Close()
	eventually(t, "b forgets a's demands when a goes", func() bool { n, _, _ := book.held("pod-c"); return n == 0 })
}

// TestPeerKVDemandsHealFromFullBatches: a demand whose end was in a batch
// this replica lost ends with the next full batch, which lists the live
// ones.
func TestPeerKVDemandsHealFromFullBatches(t *testing.T) {
	book := newKVBook()
	a := newReplica(t, func(c *Config) { c.KV = book })
	held := batch{ID: "other", BlockSize: 4, Demands: []demand{{ID: 1, Pod: "pod-a", Own: 3}, {ID: 2, Pod: "pod-a", Own: 4, Chains: [][]uint64{{5}}}}}
	full := batch{ID: "other", BlockSize: 4, Full: true, Live: []uint64{2}}
	a.x.Sync([]string{garbagePeer(t, held.encode(nil), full.encode(nil))})
	eventually(t, "only the live demand counted", func() bool {
		n, own, keys := book.held("pod-a")
		return a.x.Stats().Received == 2 && n == 1 && own == 4 && keys == 1
	})
}

func TestSelfIsNotFollowed(t *testing.T) {
	a := newReplica(t, nil)
	b := newReplica(t, nil)
	a.x.Sync([]string{a.addr, b.addr})
	eventually(t, "a follows b", func() bool { return a.x.Stats().Peers == 1 })
	a.x.mu.Lock()
	self := a.x.followers[a.addr]
	a.x.mu.Unlock()
	select {
	case <-self.done:
	case <-time.After(5 * time.Second):
		t.Fatal("a keeps following its own address")
	}
}

func TestTokenIsRequired(t *testing.T) {
	a := newReplica(t, func(c *Config) { c.Token = "right" })
	wrong := newReplica(t, func(c *Config) { c.Token = "wrong" })
	right := newReplica(t, func(c *Config) { c.Token = "right" })
	wrong.x.Sync([]string{a.addr})
	right.x.Sync([]string{a.addr})
	eventually(t, "the right token is followed", func() bool { return right.x.Stats().Peers == 1 })
	eventually(t, "the wrong token is refused", func() bool { return a.x.Stats().Rejected["unauthenticated"] > 0 })
	if wrong.x.Stats().Peers != 0 {
		t.Error("a replica with the wrong token follows a")
	}
}

// garbagePeer serves the peer service, answering Follow with frames.
func garbagePeer(t *testing.T, frames ...[]byte) string {
	t.Helper()
	g := grpc.NewServer(grpc.ForceServerCodec(codec{}))
	g.RegisterService(&grpc.ServiceDesc{ServiceName: serviceName, HandlerType: (*any)(nil), Streams: []grpc.StreamDesc{{
		StreamName: "Follow", ServerStreams: true, Handler: func(_ any, ss grpc.ServerStream) error {
			var f frame
			if err := ss.RecvMsg(&f); err != nil {
				return err
			}
			for _, b := range frames {
				if err := ss.SendMsg(&frame{b: b}); err != nil {
					return err
				}
			}
			<-ss.Context().Done()
			return nil
		}}}}, struct{}{})
	return serve(t, g)
}

func TestGarbagePeerIsCutOff(t *testing.T) {
	a := newReplica(t, func(c *Config) { c.CutOff = time.Hour })
	good := batch{ID: "liar", BlockSize: 4, Loads: []load{{Pod: "pod-a", InFlight: 7}},
		Specs: []spec{{Hold: 1, Pod: "pod-a", Keys: []uint64{5}}}}
	cut := good.encode(nil)
	bad := append(append([]byte(nil), cut[:len(cut)-3]...), 0xff, 0xff, 0xff) // a count running past the frame
	a.x.Sync([]string{garbagePeer(t, good.encode(nil), bad, good.encode(nil))})
	eventually(t, "the malformed frame is refused and its peer cut off", func() bool {
		s := a.x.Stats()
		return s.Rejected["malformed"] == 1 && s.CutOffs == 1
	})
	// What the peer sent before the garbage is undone, and nothing after
	// it is taken.
	if _, peer, _ := a.load("pod-a"); peer != 0 {
		t.Errorf("pod-a's peer in flight %d after the cut-off, want 0", peer)
	}
	eventually(t, "the cut-off peer's entry expires", func() bool { return a.speculative("pod-a", []uint64{5}) == 0 })
	if s := a.x.Stats(); s.Received != 1 {
		t.Errorf("batches applied %d, want 1 (the one before the garbage)", s.Received)
	}
}

func TestPeerEntriesAreValidated(t *testing.T) {
	a := newReplica(t, nil)
	m := batch{ID: "other", BlockSize: 4, Specs: []spec{
		{Hold: 1, Pod: "not-in-fleet", Keys: []uint64{1}},
		{Hold: 2, Pod: "pod-a", Rank: 3, Keys: []uint64{1}},
	}}
	wrongSize := batch{ID: "other", BlockSize: 16, Specs: []spec{{Hold: 3, Pod: "pod-a", Keys: []uint64{1}}},
		Demands: []demand{{ID: 1, Pod: "pod-a", Own: 1}}}
	a.x.Sync([]string{garbagePeer(t, m.encode(nil), wrongSize.encode(nil))})
	eventually(t, "each refused entry counted", func() bool {
		s := a.x.Stats().Skipped
		return s["unknown_pod"] == 1 && s["rank"] == 1 && s["block_size"] == 2
	})
	if engines := a.ix.Engines(); len(engines) != 0 {
		t.Errorf("a peer's refused entries made engines %v in the index", engines)
	}
}

// positionsBook is an in-process fake of the ingestor's two warm-start
// methods: it reports the positions it is given and records Resume.
type positionsBook struct {
	mu      sync.Mutex
	have    []kvevents.Position
	resumed []kvevents.Position
}

func (p *positionsBook) Positions() []kvevents.Position {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]kvevents.Position(nil), p.have...)
}

func (p *positionsBook) Resume(ps []kvevents.Position) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resumed = append(p.resumed, ps...)
}

// fill stores n chained blocks of 4 tokens on pod, the first blocks on GPU
// and the last on CPU, and records the place seq next.
func (r *replica) fill(t testing.TB, pod string, n int, next uint64) {
	t.Helper()
	hashes := make([]uint64, n)
	tokens := make([]uint32, 4*n)
	seed := uint32(len(r.book.have)) << 20 // each pod its own prefixes
	for i := range hashes {
		// Engine hashes look random, as vLLM's (sha256 or xxhash) do.
		hashes[i] = rand.Uint64() | 1
	}
	for i := range tokens {
		tokens[i] = seed + uint32(i)
	}
	e := index.Engine{Pod: pod}
	if err := r.ix.Store(e, &index.Stored{Hashes: hashes, Tokens: tokens, BlockSize: 4}); err != nil {
		t.Fatal(err)
	}
	if err := r.ix.Store(e, &index.Stored{Hashes: hashes[n/2:], BlockSize: 4, Tier: index.TierCPU}); err != nil {
		t.Fatal(err)
	}
	r.book.have = append(r.book.have, kvevents.Position{Pod: pod, Addr: "tcp://" + pod + ":5557", Next: next, LastTS: float64(next) / 10})
}

func TestWarmStartTakesPeersIndex(t *testing.T) {
	a := newReplica(t, nil)
	a.fill(t, "pod-a", 40, 17)
	a.fill(t, "pod-b", chunkBlocks+5, 3) // more than one chunk
	b := newReplica(t, nil)
	ws, err := b.x.Warm(context.Background(), []string{"127.0.0.1:1", a.addr})
	if err != nil {
		t.Fatal(err)
	}
	if ws.Peer != a.addr || ws.Engines != 2 || ws.Blocks != 40+chunkBlocks+5 {
		t.Errorf("warm start %+v: want 2 engines, %d blocks from %s", ws, 40+chunkBlocks+5, a.addr)
	}
	for _, pod := range []string{"pod-a", "pod-b"} {
		e := index.Engine{Pod: pod}
		na, da, _ := a.ix.Digest(e)
		nb, db, ok := b.ix.Digest(e)
		if !ok || na != nb || da != db {
			t.Errorf("%s: b holds %d blocks (digest %x), a %d (%x)", pod, nb, db, na, da)
		}
	}
	if len(b.book.resumed) != 2 {
		t.Fatalf("b resumes %v, want a's 2 positions", b.book.resumed)
	}
	for _, p := range b.book.resumed {
		if (p.Pod == "pod-a" && (p.Next != 17 || p.LastTS != 1.7)) || (p.Pod == "pod-b" && p.Next != 3) {
			t.Errorf("resumed position %+v differs from a's", p)
		}
	}
}

func TestWarmStartWithoutPeerLeavesIndexAlone(t *testing.T) {
	b := newReplica(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := b.x.Warm(ctx, []string{"127.0.0.1:1"}); err == nil {
		t.Fatal("a warm start from nobody succeeded")
	}
	if _, err := b.x.Warm(ctx, nil); err == nil {
		t.Fatal("a warm start without peers succeeded")
	}
	if len(b.ix.Engines()) != 0 || len(b.book.resumed) != 0 {
		t.Errorf("a failed warm start left engines %v and positions %v", b.ix.Engines(), b.book.resumed)
	}
}
