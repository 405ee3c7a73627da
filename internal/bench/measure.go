package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// liveSide is where one policy's live requests go and what is read around
// them.
type liveSide struct {
	policy string
	// target returns the base URL request i goes to on connection conn.
	target func(conn, i int) string
	// engines are the pods' base URLs: sampled while the run is loaded,
	// their counters read before and after it.
	engines []string
	// routers are the router replicas' base URLs, whose counters the
	// report carries; none for the policies the client places itself.
	routers []string
	// alive reports a process the bench started that has died (nil: the
	// bench started none).
	alive func() error
}

// measureLive sends reqs through side and summarizes the run. The engines'
// and routers' counters are taken as differences between a reading before
// the first request and one after the last, so a fleet that served
// earlier traffic (one the bench did not start) is measured as a fresh one.
func measureLive(ctx context.Context, w Workload, reqs requests, side liveSide, opts LiveOptions,
	progress io.Writer) (Summary, lagReport, error) {
	hc := &http.Client{Timeout: 10 * time.Second}
	podsBefore, err := scrapeFleet(ctx, hc, side.engines)
	if err != nil {
		return Summary{}, lagReport{}, err
	}
	routersBefore, err := readRouters(ctx, hc, side.routers)
	if err != nil {
		return Summary{}, lagReport{}, err
	}
	c := newClient(w, reqs, opts.Model, side.target)
	c.apiKey, c.classes = opts.APIKey, w.PriorityMix.assign(w.Seed, reqs.Len())
	start := time.Now()
	c.start = start
	reqs.begin(ctx, start)
	sctx, stopSide := context.WithCancel(ctx)
	var sampler fleetSampler
	sideDone := make(chan struct{}, 2)
	go func() {
		sampler.run(sctx, hc, side.engines, max(100*time.Millisecond, time.Duration(float64(time.Second)/opts.TimeScale)),
			func() bool { return reqs.taken() < reqs.Len() }, start, opts.TimeScale)
		sideDone <- struct{}{}
	}()
	go func() {
		c.progress(sctx, progress, side.policy, opts.TimeScale, time.Second)
		sideDone <- struct{}{}
	}()
	c.run(ctx)
	wall := time.Since(c.start).Seconds()
	stopSide()
	<-sideDone
	<-sideDone
	if err := ctx.Err(); err != nil {
		return Summary{}, lagReport{}, err
	}
	if side.alive != nil {
		if err := side.alive(); err != nil {
			return Summary{}, lagReport{}, err
		}
	}
	routersAfter, err := readRouters(ctx, hc, side.routers)
	if err != nil {
		return Summary{}, lagReport{}, err
	}
	if c.firstErr != nil && len(c.recs) == 0 {
		return Summary{}, lagReport{}, fmt.Errorf("every request failed, the first with: %w", c.firstErr)
	}
	podsAfter, err := scrapeFleet(ctx, hc, side.engines)
	if err != nil {
		return Summary{}, lagReport{}, err
	}
	perRouter := make([]int, len(routersAfter.decisions))
	for i, d := range routersAfter.decisions {
		perRouter[i] = int(d - routersBefore.decisions[i])
	}
	fl := Fleet{PeakWaiting: sampler.peakWaiting, PodRequests: make([]int, len(podsAfter)), Series: sampler.series,
		RouterRequests: routerRequests(perRouter)}
	if sampler.samples > 0 {
		fl.MeanKVUsage = sampler.kvSum / float64(sampler.samples)
	}
	var queries, hits float64
	lag := lagReport{wall: wall}
	for i, after := range podsAfter {
		m := after.since(podsBefore[i])
		queries, hits = queries+m.Queries, hits+m.Hits
		fl.Preemptions += m.Preempt
		fl.PodRequests[i] = int(m.Success)
		lag.seconds = max(lag.seconds, m.LagMax)
	}
	if queries > 0 {
		fl.HitRate = hits / queries
	}
	if wall > 0 {
		lag.share = lag.seconds / wall
	}
	// Simulated seconds, so live and virtual figures compare.
	for i := range c.recs {
		r := &c.recs[i]
		r.Sent, r.FirstToken, r.Done = r.Sent*opts.TimeScale, r.FirstToken*opts.TimeScale, r.Done*opts.TimeScale
		for j := range r.Tokens {
			r.Tokens[j] *= opts.TimeScale
		}
	}
	if c.firstErr != nil {
		fmt.Fprintf(progress, "%s: %d requests failed, the first with: %v\n", side.policy, c.failed.Load(), c.firstErr)
	}
	s := Summarize(side.policy, c.recs, int(c.failed.Load()), fl)
	s.Shed, s.Classes = int(c.shed.Load()), classSummaries(w.PriorityMix, c.tallies, c.recs)
	s.Router = routersAfter.since(routersBefore)
	return s, lag, sampler.err
}

// routerReading is the routers' counters summed over the replicas, and
// each replica's decisions.
type routerReading struct {
	sum       map[string]float64
	decisions []float64
}

// readRouters reads every router replica's counters (nil without routers).
func readRouters(ctx context.Context, hc *http.Client, routers []string) (routerReading, error) {
	var r routerReading
	for _, addr := range routers {
		err := getMetrics(ctx, hc, addr, func(body io.Reader) error {
			m, err := parseRouterMetrics(body)
			if r.sum == nil {
				r.sum = map[string]float64{}
			}
			for k, v := range m {
				r.sum[k] += v
			}
			r.decisions = append(r.decisions, m["decisions"])
			return err
		})
		if err != nil {
			return r, fmt.Errorf("reading the router's counters at %s: %w", addr, err)
		}
	}
	return r, nil
}

// routerGauges are the router figures that are levels, not counters: a
// difference of two readings means nothing for them.
var routerGauges = map[string]bool{"index_keys": true}

// since is the counters' growth from before to r (gauges as r read them),
// nil without routers.
func (r routerReading) since(before routerReading) map[string]float64 {
	if r.sum == nil {
		return nil
	}
	out := make(map[string]float64, len(r.sum))
	for k, v := range r.sum {
		if !routerGauges[k] {
			v -= before.sum[k]
		}
		out[k] = v
	}
	return out
}
