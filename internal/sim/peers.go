package sim

import (
	"fmt"

	"github.com/llmd-dev/terraform-provider-llmd/router/index"
)

// flight is a routed request as the router replicas count it.
type flight struct {
	// router decided the request and sent it to pod; uncached is its
	// Route.Uncached, counted as pod's pending prefill until the first
	// token (answered).
	router, pod int
	uncached    int
	answered    bool
	// hold is the deciding replica's speculative entries until the first
	// token; keys their block keys, for the peers until they speculate
	// them, and peers each peer's own entries until it learns of the first
	// token (nil without the exchange).
	hold  *index.Hold
	keys  []uint64
	peers []*index.Hold
}

// phase is a step of a request's life that changes a router's view.
type phase uint8

const (
	phaseDecided  phase = iota // sent to its pod: in flight, prefill pending, blocks speculated
	phaseAnswered              // its first token: prefill done, speculative entries settle
	phaseEnded                 // finished: out of flight
)

// count applies phase of a request with uncached pending prefill tokens to
// the pod's load as a router counts it; hold is that router's speculative
// entries for the request, settled at its first token.
func (l *PodLoad) count(p phase, uncached int, hold *index.Hold) {
	switch p {
	case phaseDecided:
		l.InFlight++
		l.PendingTokens += uncached
	case phaseAnswered:
		l.PendingTokens -= uncached
		hold.Settle()
	case phaseEnded:
		l.InFlight--
	}
}

// tell sends phase of request i, which has just happened at the replica
// that decided it, to the other replicas: they learn it PeerDelay later.
func (v *virtualRun) tell(i int, p phase, now float64) {
	if v.peers {
		v.q.push(vevent{t: now + v.cfg.PeerDelay, kind: evPeer, req: i, phase: p})
	}
}

// hear applies phase of request i to every replica's view but the
// deciding one's, each speculating the request's blocks on its own index.
func (v *virtualRun) hear(i int, p phase) error {
	f := &v.flights[i]
	if p == phaseDecided && f.keys != nil {
		f.peers = make([]*index.Hold, len(v.routers))
	}
	for k, rr := range v.routers {
		if k == f.router {
			continue
		}
		if p == phaseDecided && f.keys != nil {
			h, err := rr.view.Index.Speculate(index.Engine{Pod: rr.view.Pods[f.pod]}, f.keys)
			if err != nil {
				return fmt.Errorf("router %d speculating router %d's decision on %s: %w", k, f.router, rr.view.Pods[f.pod], err)
			}
			f.peers[k] = h
		}
		var hold *index.Hold
		if f.peers != nil {
			hold = f.peers[k]
		}
		rr.view.Load[f.pod].count(p, f.uncached, hold)
	}
	switch p {
	case phaseDecided:
		f.keys = nil
	case phaseAnswered:
		f.peers = nil
	}
	return nil
}
