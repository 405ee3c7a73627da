package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/index"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
)

// VirtualConfig describes one benchmark run in virtual time.
type VirtualConfig struct {
	Engine   EngineConfig
	Replicas int
	Workload Dataset
	// Concurrency is the client's --max-concurrency: at most that many
	// requests in flight, each on its own keep-alive connection; a freed
	// connection carries the next request (the most recently freed first,
	// as a connection pool hands out its idle connections).
	Concurrency int
	// RequestRate is the client's --request-rate in requests per second,
	// with Poisson arrivals; 0 means every request is ready at once (inf).
	RequestRate float64
	Picker      Picker
	// EventDelay is how long after a step ends its KV events reach the
	// router's index, in seconds (publish, network, decode).
	EventDelay float64
	// ScrapeInterval is the router's /metrics polling period (default 50 ms,
	// PROTOCOLS.md section 3).
	ScrapeInterval float64
	// SpeculationTTL is how long the router's index keeps a speculative
	// entry no event confirmed, in seconds (default: the index's, 2 s).
	SpeculationTTL float64
	// RouterCost is the router's processing time per request in seconds
	// (reading and tokenizing it, scoring, forwarding), spent by one
	// router worker in arrival order: request k of a burst is decided k
	// costs after the burst, on what the router knows then, and reaches
	// its engine at that moment. 0 decides every request the instant the
	// client sends it.
	RouterCost float64
	// RouterWorkers is how many requests the router decides at once, each
	// taking RouterCost (default 1): a router process deciding on several
	// cores, each request handed to the worker free first.
	RouterWorkers int
	// SampleInterval is how often the report samples fleet gauges (default 1 s).
	SampleInterval float64
	// Form is the KV-event wire form the engines publish.
	Form kvevents.Form
	// Seed seeds the engines' hash roots and the arrivals; the workload and
	// picker carry their own.
	Seed uint64
}

// Result summarises a run the way `vllm bench serve` does, plus the fleet
// gauges it cannot see (read from the engines' metrics).
type Result struct {
	Requests                  int
	Duration                  float64 // seconds, first arrival to last token
	InputTokens, OutputTokens int
	RequestThroughput         float64 // requests per second
	OutputThroughput          float64 // output tokens per second
	TotalThroughput           float64 // prompt and output tokens per second
	MeanTTFT, MedianTTFT      float64
	P99TTFT, MeanTPOT         float64
	P99TPOT                   float64
	// HitRate is prefix-cache hits over queries, in tokens, over the fleet.
	HitRate float64
	// MeanWaiting and MeanRunning are fleet totals and MeanKVUsage the pod
	// average, time-averaged while the client still has requests to send
	// (with the default rate, while every connection is busy).
	MeanWaiting, MeanRunning, MeanKVUsage float64
	// PeakWaiting is the largest sampled fleet total of waiting requests.
	PeakWaiting int
	Preemptions uint64
	// PodRequests counts requests each pod served.
	PodRequests []int
	// Records holds every request in completion order, for percentiles and
	// plots the summary does not carry.
	Records []RequestRecord `json:"-"`
}

// RequestRecord is one finished request.
type RequestRecord struct {
	Pod, Conn                  int
	Sent, FirstToken, Done     float64
	PromptTokens, OutputTokens int
	// CachedTokens came from the prefix cache at the request's last admission.
	CachedTokens, Preemptions int
}

// virtualRun is the state of one run.
type virtualRun struct {
	cfg      VirtualConfig
	engines  []*Engine
	stepping []bool
	kick     []int
	q        evQueue
	view     View
	sink     eventSink
	route    Route
	work     Workload
	arrivals *rand.Rand
	arrived  int   // requests that have arrived at the client
	next     int   // next request to send
	conns    []int // idle connections, most recently freed last
	// routerFree is when each router worker finishes the requests it has
	// been handed so far; sentAt is when the client sent each request.
	routerFree []float64
	sentAt     []float64
	// pending is each routed request's Route.Uncached until its first
	// token, holds its Route.Hold.
	pending []int
	holds   []*index.Hold
	res     Result
	sampled int
	// Buffers of delivered payloads and finished requests' tokens, reused
	// so a run allocates per in-flight item, not per step or request.
	spareBytes  [][]byte
	spareTokens [][]uint32
}

// RunVirtual runs the workload through a simulated fleet in virtual time.
// It is deterministic: the same config gives the same Result.
func RunVirtual(cfg VirtualConfig) (Result, error) {
	if cfg.Replicas <= 0 || cfg.Replicas > index.MaxEngines || cfg.Concurrency <= 0 || cfg.Picker == nil ||
		cfg.Workload == nil || cfg.RequestRate < 0 || cfg.RouterCost < 0 || cfg.SpeculationTTL < 0 || cfg.RouterWorkers < 0 {
		return Result{}, fmt.Errorf("virtual run: needs 1..%d replicas, concurrency > 0, a rate, router cost, router workers and speculation TTL >= 0, a workload and a picker",
			index.MaxEngines)
	}
	if cfg.ScrapeInterval <= 0 {
		cfg.ScrapeInterval = 0.05
	}
	if cfg.SampleInterval <= 0 {
		cfg.SampleInterval = 1
	}
	work, err := cfg.Workload.Build()
	if err != nil {
		return Result{}, err
	}
	v := &virtualRun{cfg: cfg, work: work, stepping: make([]bool, cfg.Replicas), routerFree: make([]float64, max(cfg.RouterWorkers, 1)),
		arrivals: rand.New(rand.NewPCG(cfg.Seed, 0x61727276)), res: Result{Records: make([]RequestRecord, 0, work.Len())},
		sentAt: make([]float64, work.Len()), pending: make([]int, work.Len()), holds: make([]*index.Hold, work.Len())}
	var now float64
	ix := index.New(index.Config{BlockSize: cfg.Engine.BlockSize, SpeculationTTL: seconds(cfg.SpeculationTTL),
		Now: func() time.Time { return time.Unix(0, 0).Add(seconds(now)) }})
	v.sink.applier.Index = ix
	v.view = View{Pods: make([]string, cfg.Replicas), Load: make([]PodLoad, cfg.Replicas), Index: ix,
		BlockSize: cfg.Engine.BlockSize}
	v.res.PodRequests = make([]int, cfg.Replicas)
	for i := range cfg.Replicas {
		ec := cfg.Engine
		ec.Seed = replicaSeed(cfg.Seed, i)
		e, err := NewEngine(ec)
		if err != nil {
			return Result{}, err
		}
		v.engines = append(v.engines, e)
		v.view.Pods[i] = "sim-" + strconv.Itoa(i)
	}
	for c := cfg.Concurrency - 1; c >= 0; c-- {
		v.conns = append(v.conns, c)
	}
	v.q.push(vevent{t: 0, kind: evScrape})
	v.q.push(vevent{t: 0, kind: evSample})
	if cfg.RequestRate == 0 {
		v.arrived = work.Len()
	} else {
		v.q.push(vevent{t: 0, kind: evArrive})
	}
	total := work.Len()
	for v.q.len() > 0 && len(v.res.Records) < total {
		ev := v.q.pop()
		now = ev.t
		if err := v.handle(ev); err != nil {
			return Result{}, fmt.Errorf("virtual run at t=%.3fs: %w", now, err)
		}
		if err := v.sendReady(now); err != nil {
			return Result{}, fmt.Errorf("virtual run at t=%.3fs: %w", now, err)
		}
		v.kickAll(now)
	}
	if len(v.res.Records) < total {
		return Result{}, errors.New("virtual run stalled with requests unfinished")
	}
	return v.summary(), nil
}

func (v *virtualRun) handle(ev vevent) error {
	switch ev.kind {
	case evStepEnd:
		return v.stepEnd(ev.pod, ev.t)
	case evDeliver:
		err := v.sink.deliver(v.view.Pods[ev.pod], ev.payload)
		v.spareBytes = append(v.spareBytes, ev.payload[:0])
		return err
	case evArrive:
		v.arrived++
		if v.arrived < v.work.Len() {
			v.q.push(vevent{t: ev.t + v.arrivals.ExpFloat64()/v.cfg.RequestRate, kind: evArrive})
		}
	case evRoute:
		return v.route1(ev.pod, ev.req, ev.sent, ev.t)
	case evScrape:
		for i, e := range v.engines {
			l := &v.view.Load[i]
			l.Running, l.Waiting, l.KVUsage, l.ScrapedAt = e.Running(), e.Waiting(), e.KVUsage(), ev.t
		}
		v.q.push(vevent{t: ev.t + v.cfg.ScrapeInterval, kind: evScrape})
	case evSample:
		v.sample()
		v.q.push(vevent{t: ev.t + v.cfg.SampleInterval, kind: evSample})
	}
	return nil
}

// sample records the fleet gauges. Means cover only the time the client
// still has requests to send: ramp-up and drain would dilute them.
func (v *virtualRun) sample() {
	waiting := 0
	for _, e := range v.engines {
		waiting += e.Waiting()
	}
	v.res.PeakWaiting = max(v.res.PeakWaiting, waiting)
	if v.next >= v.work.Len() {
		return
	}
	for _, e := range v.engines {
		v.res.MeanRunning += float64(e.Running())
		v.res.MeanKVUsage += e.KVUsage() / float64(len(v.engines))
	}
	v.res.MeanWaiting += float64(waiting)
	v.sampled++
}

// stepEnd completes pod's step: its events leave for the router, its
// finished requests free their connections.
func (v *virtualRun) stepEnd(pod int, now float64) error {
	v.stepping[pod] = false
	batch, progress := v.engines[pod].Finish(now)
	if batch != nil {
		var buf []byte
		if n := len(v.spareBytes); n > 0 {
			buf, v.spareBytes = v.spareBytes[n-1], v.spareBytes[:n-1]
		}
		payload, err := kvevents.AppendBatch(buf, v.cfg.Form, batch)
		if err != nil {
			return fmt.Errorf("encoding KV events of %s: %w", v.view.Pods[pod], err)
		}
		v.q.push(vevent{t: now + v.cfg.EventDelay, kind: evDeliver, pod: pod, payload: payload})
	}
	for _, r := range progress {
		if i := uint32(r.ID); r.Output > 0 {
			v.view.Load[pod].PendingTokens -= v.pending[i]
			v.pending[i] = 0
			if h := v.holds[i]; h != nil {
				h.Settle()
				v.holds[i] = nil
			}
		}
		if !r.Finished() {
			continue
		}
		conn := int(r.ID >> 32)
		v.res.Records = append(v.res.Records, RequestRecord{Pod: pod, Conn: conn, Sent: v.sentAt[uint32(r.ID)],
			FirstToken: r.FirstToken, Done: r.Done, PromptTokens: len(r.Prompt), OutputTokens: r.Output,
			CachedTokens: r.HitTokens, Preemptions: r.Preemptions})
		v.view.Load[pod].InFlight--
		// The engine is done with the request; its token buffer serves the next.
		v.spareTokens = append(v.spareTokens, r.tokens[:0])
		v.conns = append(v.conns, conn)
	}
	v.kick = append(v.kick, pod)
	return nil
}

// sendReady sends arrived requests while connections are idle.
func (v *virtualRun) sendReady(now float64) error {
	for v.next < v.arrived && len(v.conns) > 0 {
		conn := v.conns[len(v.conns)-1]
		v.conns = v.conns[:len(v.conns)-1]
		if err := v.send(conn, now); err != nil {
			return err
		}
	}
	return nil
}

// send hands the next request on connection conn to the router, which
// routes it at once or, with a router cost, when its worker gets to it.
func (v *virtualRun) send(conn int, now float64) error {
	i := v.next
	v.next++
	if v.cfg.RouterCost == 0 {
		return v.route1(conn, i, now, now)
	}
	w := 0
	for j, t := range v.routerFree {
		if t < v.routerFree[w] {
			w = j
		}
	}
	v.routerFree[w] = max(v.routerFree[w], now) + v.cfg.RouterCost
	v.q.push(vevent{t: v.routerFree[w], kind: evRoute, pod: conn, req: i, sent: now})
	return nil
}

// route1 routes request i, sent on conn at sent, at time now: the picker
// sees the fleet as the router knows it now, and the request joins its
// engine's queue now.
func (v *virtualRun) route1(conn, i int, sent, now float64) error {
	var buf []uint32
	if n := len(v.spareTokens); n > 0 {
		buf, v.spareTokens = v.spareTokens[n-1], v.spareTokens[:n-1]
	}
	tokens := v.work.Prompt(i, buf)
	v.route = Route{Conn: conn, Tokens: tokens, Uncached: len(tokens)}
	v.view.Now = now
	pod := v.cfg.Picker.Pick(&v.route, &v.view)
	if pod < 0 || pod >= len(v.engines) {
		return fmt.Errorf("picker chose pod %d of %d", pod, len(v.engines))
	}
	r := &Request{ID: uint64(conn)<<32 | uint64(i), Prompt: tokens, MaxTokens: v.work.OutputLen(i), Arrival: now}
	v.sentAt[i] = sent
	if err := v.engines[pod].Add(r); err != nil {
		return err
	}
	v.res.Requests++
	v.res.InputTokens += len(tokens)
	v.res.PodRequests[pod]++
	v.view.Load[pod].InFlight++
	v.pending[i] = v.route.Uncached
	v.holds[i] = v.route.Hold
	v.view.Load[pod].PendingTokens += v.route.Uncached
	v.kick = append(v.kick, pod)
	return nil
}

// kickAll starts a step on every pod that has work and no step running.
func (v *virtualRun) kickAll(now float64) {
	for _, pod := range v.kick {
		if v.stepping[pod] {
			continue
		}
		if d, ok := v.engines[pod].Schedule(); ok {
			v.stepping[pod] = true
			v.q.push(vevent{t: now + d, kind: evStepEnd, pod: pod})
		}
	}
	v.kick = v.kick[:0]
}

func (v *virtualRun) summary() Result {
	r := v.res
	ttft := make([]float64, 0, len(r.Records))
	tpot := make([]float64, 0, len(r.Records))
	for _, rec := range r.Records {
		r.OutputTokens += rec.OutputTokens
		r.Duration = max(r.Duration, rec.Done)
		ttft = append(ttft, rec.FirstToken-rec.Sent)
		if rec.OutputTokens > 1 {
			tpot = append(tpot, (rec.Done-rec.FirstToken)/float64(rec.OutputTokens-1))
		}
	}
	if r.Duration > 0 {
		r.RequestThroughput = float64(len(r.Records)) / r.Duration
		r.OutputThroughput = float64(r.OutputTokens) / r.Duration
		r.TotalThroughput = float64(r.InputTokens+r.OutputTokens) / r.Duration
	}
	r.MeanTPOT, _, r.P99TPOT = MeanMedianP99(tpot)
	var queries, hits uint64
	for _, e := range v.engines {
		s := e.Stats()
		queries += s.PrefixQueries
		hits += s.PrefixHits
		r.Preemptions += s.Preemptions
	}
	if queries > 0 {
		r.HitRate = float64(hits) / float64(queries)
	}
	if v.sampled > 0 {
		r.MeanWaiting /= float64(v.sampled)
		r.MeanRunning /= float64(v.sampled)
		r.MeanKVUsage /= float64(v.sampled)
	}
	r.MeanTTFT, r.MedianTTFT, r.P99TTFT = MeanMedianP99(ttft)
	return r
}

// seconds converts a time in seconds to a Duration.
func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// MeanMedianP99 sorts xs and returns its mean, median and 99th percentile,
// the percentiles interpolated linearly between order statistics as numpy's
// default (which vLLM's benchmark summary uses).
func MeanMedianP99(xs []float64) (mean, median, p99 float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	slices.Sort(xs)
	for _, x := range xs {
		mean += x
	}
	return mean / float64(len(xs)), percentile(xs, 50), percentile(xs, 99)
}

// percentile is the q-th percentile of sorted xs, interpolated linearly.
func percentile(xs []float64, q float64) float64 {
	pos := q / 100 * float64(len(xs)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(xs)-1)
	return xs[lo] + (pos-float64(lo))*(xs[hi]-xs[lo])
}
