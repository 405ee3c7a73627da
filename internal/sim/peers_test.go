package sim

import (
	"math"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/router/index"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
)

// sighting is what one router replica's view held when it decided.
type sighting struct {
	router, conn, pod int
	at                float64
	first             uint64 // the prompt's first block key
	uncached          int
	inFlight, pending []int
	// holders has, for the first block key of every earlier decision, the
	// pods the index holds it on (a bit each).
	holders map[uint64]uint
}

// speculator is a router replica's picker that, as router/scoring's does,
// speculates each prompt's blocks on the pod it picks and counts the whole
// prompt as its prefill; replica k sends a prefix elsewhere than replica
// k-1, so the replicas' entries differ. It logs what its view held.
type speculator struct {
	router int
	log    *[]sighting
	keys   []uint64
}

func (s *speculator) Pick(r *Route, v *View) int {
	s.keys = index.Keys(s.keys[:0], r.Tokens, v.BlockSize, "", nil)
	pod := int((s.keys[0] + uint64(s.router)) % uint64(len(v.Pods)))
	sg := sighting{router: s.router, conn: r.Conn, pod: pod, at: v.Now, first: s.keys[0], uncached: len(r.Tokens),
		holders: map[uint64]uint{}}
	for _, l := range v.Load {
		sg.inFlight, sg.pending = append(sg.inFlight, l.InFlight), append(sg.pending, l.PendingTokens)
	}
	for _, d := range *s.log {
		for _, m := range v.Index.Lookup([]uint64{d.first}, nil) {
			for i, name := range v.Pods {
				if m.Engine.Pod == name && m.Speculative > 0 {
					sg.holders[d.first] |= 1 << i
				}
			}
		}
	}
	*s.log = append(*s.log, sg)
	h, err := v.Index.Speculate(index.Engine{Pod: v.Pods[pod]}, s.keys)
	if err != nil {
		panic(err)
	}
	r.Uncached, r.Hold = len(r.Tokens), h
	return pod
}

// span is a count that holds from start to end, as one router sees it:
// certainly at t, or only perhaps (a boundary at t itself, whose order
// against the sighting the times cannot tell).
func span(start, end, t float64) (certain, perhaps bool) {
	const eps = 1e-6 // the index's clock is in nanoseconds
	return start < t-eps && end > t+eps, start <= t+eps && end >= t-eps
}

// TestPeersSeeEachOthersDecisionsAfterTheDelay runs two router replicas in
// virtual time with KV events never delivered, so each replica's view
// holds only what decisions told it, on prompts that share no prefix. At
// every decision each pod's in-flight count and pending prefill must be
// the replica's own requests (from its decision to the end, resp. the
// first token) plus, with the exchange, its peer's, each step PeerDelay
// later; and the index must hold the first block of every earlier
// decision's prompt on its pod while its speculative entry lives: for an
// own decision up to the first token plus SpeculationTTL, for a peer's,
// with the exchange, from PeerDelay after the decision to PeerDelay after
// the first token plus SpeculationTTL. Without the exchange no peer
// request may show.
func TestPeersSeeEachOthersDecisionsAfterTheDelay(t *testing.T) {
	const delay, ttl = 0.0371, 0.5
	for _, noPeers := range []bool{false, true} {
		var log []sighting
		cfg := smallRun(nil, 1e9, kvevents.FormMap)
		cfg.Workload = PrefixRepetition{NumPrefixes: 480, PrefixLen: 512, SuffixLen: 64, OutputLen: 48, NumPrompts: 480, Seed: 3}
		cfg.Routers = []Picker{&speculator{router: 0, log: &log}, &speculator{router: 1, log: &log}}
		cfg.SpeculationTTL, cfg.PeerDelay, cfg.NoPeers = ttl, delay, noPeers
		res, err := RunVirtual(cfg)
		if err != nil {
			t.Fatal(err)
		}
		type sent struct {
			conn int
			at   float64
		}
		recs := map[sent]RequestRecord{}
		for _, r := range res.Records {
			recs[sent{r.Conn, r.Sent}] = r
		}
		if len(recs) != len(log) || len(log) != 480 {
			t.Fatalf("%d decisions, %d distinct records", len(log), len(recs))
		}
		// What the exchange would show of the peer's requests, on or not:
		// how often one is shown, still within the delay, and expired.
		var peerShown, peerDelayed, peerExpired int
		for j, sg := range log {
			n := len(sg.inFlight)
			lo, hi, pLo, pHi := make([]int, n), make([]int, n), make([]int, n), make([]int, n)
			for _, d := range log[:j] {
				r := recs[sent{d.conn, d.at}]
				start, shift := math.Inf(-1), 0.0 // an earlier decision of its own
				if d.router != sg.router {
					if c, _ := span(d.at+delay, r.Done+delay, sg.at); c {
						peerShown++
					} else if d.at+delay > sg.at && r.Done > sg.at {
						peerDelayed++
					}
					if r.FirstToken+delay+ttl < sg.at {
						peerExpired++
					}
					if noPeers {
						if got := sg.holders[d.first]; got != 0 {
							t.Fatalf("no peers: router %d at %.4f s holds its peer's entries on pods %b", sg.router, sg.at, got)
						}
						continue
					}
					start, shift = d.at+delay, delay
				}
				count := func(lo, hi []int, end float64, n int) {
					c, p := span(start, end+shift, sg.at)
					if c {
						lo[d.pod] += n
					}
					if p {
						hi[d.pod] += n
					}
				}
				count(lo, hi, r.Done, 1)
				count(pLo, pHi, r.FirstToken, d.uncached)
				c, p := span(start, r.FirstToken+shift+ttl, sg.at)
				if got := sg.holders[d.first]; got&^(1<<d.pod) != 0 || (got != 0) != c && (c || !p) {
					t.Fatalf("no peers %v: router %d at %.4f s holds the entries of router %d's decision at %.4f s (first token %.4f s) on pods %b, want %b held: %v",
						noPeers, sg.router, sg.at, d.router, d.at, r.FirstToken, got, 1<<d.pod, c)
				}
			}
			for p := range n {
				if sg.inFlight[p] < lo[p] || sg.inFlight[p] > hi[p] || sg.pending[p] < pLo[p] || sg.pending[p] > pHi[p] {
					t.Fatalf("no peers %v: router %d at %.4f s saw on pod %d %d in flight and %d tokens pending, want %d-%d and %d-%d",
						noPeers, sg.router, sg.at, p, sg.inFlight[p], sg.pending[p], lo[p], hi[p], pLo[p], pHi[p])
				}
			}
		}
		if peerShown < 1000 || peerDelayed < 10 || peerExpired < 1000 {
			t.Fatalf("no peers %v: peers' requests shown %d times, within the delay %d, expired %d: the test proves little",
				noPeers, peerShown, peerDelayed, peerExpired)
		}
		t.Logf("no peers %v: peers' requests shown %d times, within the delay %d, expired %d", noPeers, peerShown, peerDelayed, peerExpired)
	}
}
