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
	// Routers, when it has more than one picker, are router replicas
	// behind one Kubernetes Service in place of Picker: kube-proxy sends
	// each new client connection to one of them at random and the
	// keep-alive connection stays there. Each replica has its own view
	// (in-flight counts, pending tokens, an index holding its own
	// speculative entries, its own scrape phase and router workers); every
	// pod's KV events and scrapes reach all of them, and, unless NoPeers,
	// so do the other replicas' decisions (PeerDelay).
	Routers []Picker
	// PeerDelay is the peer exchange between Routers (DESIGN.md decision
	// 10), in seconds: what one replica's decision adds to its view reaches
	// every other replica this long after it happens there. A decision
	// adds the request to its pod's in-flight count and pending prefill
	// (Route.Uncached) and its speculative entries (Route.Hold's keys) to
	// the index; the request's first token settles the entries and ends the
	// pending prefill; its end takes it out of flight. The deciding replica
	// sees each at once and never waits on a peer; a peer applies each to
	// its own view PeerDelay later, its entries held until the first token
	// reaches it and then living SpeculationTTL. 0 is an instant exchange;
	// internal/bench models the live one's batching and pod network.
	PeerDelay float64
	// NoPeers runs the Routers without the exchange: each knows only its
	// own decisions, as replicas whose peers are gone decide.
	NoPeers bool
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
	// RouterRequests counts requests each router replica decided.
	RouterRequests []int
	// Records holds every request in completion order, for percentiles and
	// plots the summary does not carry.
	Records []RequestRecord `json:"-"`
}

// RequestRecord is one finished request.
type RequestRecord struct {
	Pod, Conn int
	// Router is the router replica that decided the request (0 with one).
	Router                     int
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
	routers  []*routerReplica
	// peers says the routers exchange their decisions.
	peers bool
	// connRouter is the router replica each client connection reached
	// (-1 before its first request).
	connRouter []int
	balance    *rand.Rand
	route      Route
	work       Workload
	arrivals   *rand.Rand
	arrived    int   // requests that have arrived at the client
	next       int   // next request to send
	conns      []int // idle connections, most recently freed last
	// sentAt is when the client sent each request; flights what the
	// routers count of it.
	sentAt  []float64
	flights []flight
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
	pickers := cfg.Routers
	if len(pickers) <= 1 {
		pickers = []Picker{cfg.Picker}
	}
	if cfg.Replicas <= 0 || cfg.Replicas > index.MaxEngines || cfg.Concurrency <= 0 || slices.Contains(pickers, nil) ||
		cfg.Workload == nil || cfg.RequestRate < 0 || cfg.RouterCost < 0 || cfg.SpeculationTTL < 0 || cfg.RouterWorkers < 0 ||
		cfg.PeerDelay < 0 {
		return Result{}, fmt.Errorf("virtual run: needs 1..%d replicas, concurrency > 0, a rate, router cost, router workers, speculation TTL and peer delay >= 0, a workload and a picker (or routers)",
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
	v := &virtualRun{cfg: cfg, work: work, stepping: make([]bool, cfg.Replicas),
		arrivals: rand.New(rand.NewPCG(cfg.Seed, 0x61727276)), res: Result{Records: make([]RequestRecord, 0, work.Len())},
		sentAt: make([]float64, work.Len()), flights: make([]flight, work.Len()), connRouter: make([]int, cfg.Concurrency),
		balance: rand.New(rand.NewPCG(cfg.Seed, 0x73766370)), peers: len(pickers) > 1 && !cfg.NoPeers}
	var now float64
	clock := func() time.Time { return time.Unix(0, 0).Add(seconds(now)) }
	pods := make([]string, cfg.Replicas)
	for i := range pods {
		pods[i] = "sim-" + strconv.Itoa(i)
	}
	for k, p := range pickers {
		rr := &routerReplica{picker: p, free: make([]float64, max(cfg.RouterWorkers, 1))}
		ix := index.New(index.Config{BlockSize: cfg.Engine.BlockSize, SpeculationTTL: seconds(cfg.SpeculationTTL), Now: clock})
		rr.sink.applier.Index = ix
		rr.view = View{Pods: pods, Load: make([]PodLoad, cfg.Replicas), Index: ix, BlockSize: cfg.Engine.BlockSize}
		v.routers = append(v.routers, rr)
		// Replicas started apart scrape out of phase: spread them evenly.
		v.q.push(vevent{t: float64(k) * cfg.ScrapeInterval / float64(len(pickers)), kind: evScrape, pod: k})
	}
	for c := range v.connRouter {
		v.connRouter[c] = -1
	}
	v.res.PodRequests = make([]int, cfg.Replicas)
	v.res.RouterRequests = make([]int, len(pickers))
	for i := range cfg.Replicas {
		ec := cfg.Engine
		ec.Seed = replicaSeed(cfg.Seed, i)
		e, err := NewEngine(ec)
		if err != nil {
			return Result{}, err
		}
		v.engines = append(v.engines, e)
	}
	for c := cfg.Concurrency - 1; c >= 0; c-- {
		v.conns = append(v.conns, c)
	}
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
		for _, rr := range v.routers {
			if err := rr.sink.deliver(rr.view.Pods[ev.pod], ev.payload); err != nil {
				return err
			}
		}
		v.spareBytes = append(v.spareBytes, ev.payload[:0])
	case evArrive:
		v.arrived++
		if v.arrived < v.work.Len() {
			v.q.push(vevent{t: ev.t + v.arrivals.ExpFloat64()/v.cfg.RequestRate, kind: evArrive})
		}
	case evRoute:
		return v.route1(ev.pod, ev.req, ev.sent, ev.t)
	case evPeer:
		return v.hear(ev.req, ev.phase)
	case evScrape:
		view := &v.routers[ev.pod].view
		for i, e := range v.engines {
			l := &view.Load[i]
			l.Running, l.Waiting, l.KVUsage, l.ScrapedAt = e.Running(), e.Waiting(), e.KVUsage(), ev.t
		}
		v.q.push(vevent{t: ev.t + v.cfg.ScrapeInterval, kind: evScrape, pod: ev.pod})
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
			return fmt.Errorf("encoding KV events of sim-%d: %w", pod, err)
		}
		v.q.push(vevent{t: now + v.cfg.EventDelay, kind: evDeliver, pod: pod, payload: payload})
	}
	for _, r := range progress {
		i := int(uint32(r.ID))
		f := &v.flights[i]
		if r.Output > 0 && !f.answered {
			f.answered = true
			v.routers[f.router].view.Load[pod].count(phaseAnswered, f.uncached, f.hold)
			f.hold = nil
			v.tell(i, phaseAnswered, now)
		}
		if !r.Finished() {
			continue
		}
		conn := int(r.ID >> 32)
		v.res.Records = append(v.res.Records, RequestRecord{Pod: pod, Conn: conn, Router: f.router, Sent: v.sentAt[i],
			FirstToken: r.FirstToken, Done: r.Done, PromptTokens: len(r.Prompt), OutputTokens: r.Output,
			CachedTokens: r.HitTokens, Preemptions: r.Preemptions})
		v.routers[f.router].view.Load[pod].count(phaseEnded, 0, nil)
		v.tell(i, phaseEnded, now)
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
	k := v.connRouter[conn]
	if k < 0 {
		k = 0
		if len(v.routers) > 1 {
			k = v.balance.IntN(len(v.routers))
		}
		v.connRouter[conn] = k
	}
	v.flights[i].router = k
	if v.cfg.RouterCost == 0 {
		return v.route1(conn, i, now, now)
	}
	free := v.routers[k].free
	w := 0
	for j, t := range free {
		if t < free[w] {
			w = j
		}
	}
	free[w] = max(free[w], now) + v.cfg.RouterCost
	v.q.push(vevent{t: free[w], kind: evRoute, pod: conn, req: i, sent: now})
	return nil
}

// routerReplica is one router process of the run: its picker, what it
// knows of the fleet and when its workers are free.
type routerReplica struct {
	picker Picker
	view   View
	sink   eventSink
	// free is when each worker finishes the requests handed to it so far.
	free []float64
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
	f := &v.flights[i]
	rr := v.routers[f.router]
	rr.view.Now = now
	pod := rr.picker.Pick(&v.route, &rr.view)
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
	v.res.RouterRequests[f.router]++
	f.pod, f.uncached, f.hold = pod, v.route.Uncached, v.route.Hold
	rr.view.Load[pod].count(phaseDecided, f.uncached, nil)
	if v.peers && f.hold != nil {
		f.keys = index.Keys(nil, tokens, v.cfg.Engine.BlockSize, "", nil)
	}
	v.tell(i, phaseDecided, now)
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
