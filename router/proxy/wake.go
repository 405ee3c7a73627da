package proxy

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// Waker scales the fleet from zero (autoscale.Scaler): Wake asks for a pod
// and never blocks.
type Waker interface{ Wake() }

// awaitPod holds a request that found no ready pod while the fleet scales
// from zero: it wakes the fleet and waits until some pod is ready, until
// its class's time-to-live from since passes (503 naming why), or until
// ctx ends. The request counts in Demand while it waits.
func (s *Server) awaitPod(ctx context.Context, flow Flow, since time.Time) error {
	s.waking.Add(1)
	defer s.waking.Add(-1)
	s.cfg.Waker.Wake()
	class := s.cfg.Classes[flow.Class]
	began := time.Now()
	ttl := time.NewTimer(time.Until(since.Add(class.TTL)))
	defer ttl.Stop()
	poll := time.NewTicker(refillEvery)
	defer poll.Stop()
	for {
		select {
		case <-poll.C:
			if len(s.br.filter(s.cfg.Fleet.Pods(nil))) > 0 {
				s.cfg.Metrics.queueWait(class.Name, nil, time.Since(began))
				return nil
			}
			s.cfg.Waker.Wake() // the fleet may have gone to zero again meanwhile
		case <-ttl.C:
			err := &ShedError{Code: http.StatusServiceUnavailable, Class: class.Name, Reason: fmt.Sprintf(
				"no pod was ready within class %s's time-to-live (%s): the fleet is scaling from zero", class.Name, class.TTL)}
			s.cfg.Metrics.queueWait(class.Name, err, time.Since(began))
			s.cfg.Metrics.decision(outcomeShed)
			return err
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// Demand is what this router asks of the fleet now: the requests every
// replica has in flight on its ready pods (this replica's and the peers'
// as last exchanged) and the requests this replica holds waiting
// (Waiting); add the peers' Waiting for the whole router's. The fleet's
// autoscaler divides it by its target per pod (package autoscale).
func (s *Server) Demand() int64 {
	n := 0
	for _, p := range s.cfg.Fleet.Pods(nil) {
		n += p.Load.InFlight
	}
	return int64(n + s.Waiting())
}

// Waiting is how many requests this replica holds waiting for a pod: those
// queued for room on one and those held while the fleet scales from zero.
func (s *Server) Waiting() int { return s.adm.queued() + int(s.waking.Load()) }
