package sim

import (
	"cmp"
	"fmt"
	"slices"
)

// Replay runs a trace on one engine of config cfg in virtual time: each
// request joins the waiting queue at its Arrival (engine seconds), and the
// engine steps while it has work. It fills every request's FirstToken and
// Done and returns the engine's counters; reqs must be in arrival order.
// It is how a replica is held against a real engine on the same trace.
func Replay(cfg EngineConfig, reqs []*Request) (EngineStats, error) {
	if !slices.IsSortedFunc(reqs, func(a, b *Request) int { return cmp.Compare(a.Arrival, b.Arrival) }) {
		return EngineStats{}, fmt.Errorf("replay: %d requests not in arrival order", len(reqs))
	}
	e, err := NewEngine(cfg)
	if err != nil {
		return EngineStats{}, err
	}
	now, next := 0.0, 0
	for next < len(reqs) || e.Busy() {
		for ; next < len(reqs) && reqs[next].Arrival <= now; next++ {
			if err := e.Add(reqs[next]); err != nil {
				return EngineStats{}, fmt.Errorf("replay: %w", err)
			}
		}
		d, ok := e.Schedule()
		if !ok {
			if next == len(reqs) {
				return EngineStats{}, fmt.Errorf("replay: engine stalled at %.3f s with %d waiting", now, e.Waiting())
			}
			now = max(now, reqs[next].Arrival)
			continue
		}
		now += d
		e.Finish(now)
	}
	return e.Stats(), nil
}
