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

// DayProfile is a day's arrival rate: 24 hourly shares of a peak rate, the
// rate moving linearly from one hour's share at its start to the next
// hour's at the next start, each hour HourSeconds of virtual time.
type DayProfile struct {
	Hourly []float64
	// Peak is the rate at a share of 1, in requests per second.
	Peak float64
	// HourSeconds is how long one hour of the day lasts in the run.
	HourSeconds float64
}

// BusinessDay is the day's shape the bench runs: a quiet night at under a
// tenth of the peak, a morning ramp from 06:00, a plateau at the peak from
// 11:00 to 15:00, an evening decline. Its mean is 48% of its peak, the
// peak-to-mean ratio of about 2 of interactive services' diurnal load. It is
// a chosen shape, not a trace: the savings depend on it, and the report
// says so.
func BusinessDay() []float64 {
	return []float64{0.10, 0.08, 0.07, 0.07, 0.08, 0.10, 0.18, 0.32, 0.52, 0.72, 0.88, 0.97,
		1.00, 0.98, 1.00, 0.95, 0.85, 0.70, 0.55, 0.45, 0.38, 0.30, 0.22, 0.15}
}

// PeakShare is the share of the peak rate from which a moment counts as
// the peak in DayResult's peak figures.
const PeakShare = 0.95

func (p DayProfile) check() error {
	if len(p.Hourly) == 0 || p.Peak <= 0 || p.HourSeconds <= 0 {
		return fmt.Errorf("day profile: needs hourly shares, a peak rate > 0 and an hour > 0 s, got %d shares, peak %g, hour %g s",
			len(p.Hourly), p.Peak, p.HourSeconds)
	}
	for h, s := range p.Hourly {
		if s < 0 || math.IsNaN(s) {
			return fmt.Errorf("day profile: hour %d's share %g is negative", h, s)
		}
	}
	return nil
}

// Duration is the day's length in the run, in seconds.
func (p DayProfile) Duration() float64 { return float64(len(p.Hourly)) * p.HourSeconds }

// Share is the share of the peak at time t (the day wraps).
func (p DayProfile) Share(t float64) float64 {
	x := math.Mod(t/p.HourSeconds, float64(len(p.Hourly)))
	h := int(x)
	a, b := p.Hourly[h], p.Hourly[(h+1)%len(p.Hourly)]
	return a + (x-float64(h))*(b-a)
}

// Rate is the arrival rate at time t, in requests per second.
func (p DayProfile) Rate(t float64) float64 { return p.Peak * p.Share(t) }

// AtPeak says t is in the day's peak: its rate at PeakShare of the peak or more.
func (p DayProfile) AtPeak(t float64) bool { return p.Share(t) >= PeakShare }

// Expected is the mean number of arrivals over the day.
func (p DayProfile) Expected() float64 {
	var sum float64
	for h := range p.Hourly {
		sum += (p.Hourly[h] + p.Hourly[(h+1)%len(p.Hourly)]) / 2
	}
	return sum * p.HourSeconds * p.Peak
}

// Arrivals draws the day's arrival times, a Poisson process of rate Rate(t)
// (thinning a process at the highest rate), deterministic in seed.
func (p DayProfile) Arrivals(seed uint64) []float64 {
	top := p.Peak * slices.Max(p.Hourly)
	if top <= 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, 0x64617920))
	var out []float64
	for t := rng.ExpFloat64() / top; t < p.Duration(); t += rng.ExpFloat64() / top {
		if rng.Float64()*top < p.Rate(t) {
			out = append(out, t)
		}
	}
	return out
}

// Admission is the router's flow control as router/proxy runs it (its
// admission and route chooser), with one class and one tenant: a pod takes
// a request while it has fewer than Cap in flight and fewer than Pending
// yet to answer a byte; a request whose chosen pod (over every pod) has no
// room waits for it in a queue of MaxQueue (full: 503 at once), any pod
// when none has room; room on a pod goes to the oldest waiter wanting it,
// else the oldest wanting any pod or one that left the fleet; a waiter
// handed room is placed among the pods with room then; one still waiting
// TTL seconds after it queued is answered 503. Both limits 0 turn it off:
// every request goes to its chosen pod at once.
type Admission struct {
	Cap, Pending, MaxQueue int
	TTL                    float64
	// KVReserve turns the KV bound on (0: off), counting each request's
	// output up to its max_tokens or KVReserve tokens, whichever is less:
	// with one class it holds a pod's requests to its whole cache within
	// PreemptionMemory of a scrape that saw its engine preempt.
	KVReserve int
}

func (a Admission) on() bool { return a.Cap > 0 || a.Pending > 0 }

// DayConfig is one virtual-time run of a day behind one router.
type DayConfig struct {
	Engine EngineConfig
	// Workload gives the day's n requests, in arrival order.
	Workload func(n int) Dataset
	Profile  DayProfile
	Picker   Picker
	// Fixed runs that many pods all day; 0 autoscales with Autoscale.
	Fixed     int
	Autoscale HPAConfig
	// PodStart is a pod's time from its creation to Ready, in seconds.
	PodStart  float64
	Admission Admission
	// EventDelay, ScrapeInterval and SpeculationTTL are as in VirtualConfig.
	EventDelay, ScrapeInterval, SpeculationTTL float64
	// SampleInterval is the timeline's period (default 60 s).
	SampleInterval float64
	Form           kvevents.Form
	Seed           uint64
}

// DayResult is what a day cost and how it served.
type DayResult struct {
	Requests int `json:"requests"`
	Served   int `json:"served"`
	// Shed counts the requests answered 503: no room within the TTL, a full
	// queue, or no pod at all.
	Shed int `json:"shed"`
	// PodSeconds is the pods' time from creation to removal within the day
	// (a GPU each); MeanPods is it over the day's length.
	PodSeconds  float64 `json:"pod_seconds"`
	MeanPods    float64 `json:"mean_pods"`
	PeakPods    int     `json:"peak_pods"`
	PodsCreated int     `json:"pods_created"`
	PodsRemoved int     `json:"pods_removed"`
	// TTFT of the served requests, from arrival at the router to the first
	// token (queueing in the router included), in seconds, over the day and
	// over the requests that arrived at the peak (DayProfile.AtPeak).
	MeanTTFT     float64 `json:"mean_ttft_s"`
	P99TTFT      float64 `json:"p99_ttft_s"`
	PeakMeanTTFT float64 `json:"peak_mean_ttft_s"`
	PeakP99TTFT  float64 `json:"peak_p99_ttft_s"`
	PeakRequests int     `json:"peak_requests"`
	PeakShed     int     `json:"peak_shed"`
	MeanTPOT     float64 `json:"mean_tpot_s"`
	HitRate      float64 `json:"prefix_hit_rate"`
	// Preemptions counts the engines' preemptions over the day (requests
	// taken back from the running batch for want of KV blocks).
	Preemptions uint64      `json:"preemptions"`
	Timeline    []DaySample `json:"timeline,omitempty"`

	ttfts, peakTTFTs, tpots []float64
	day                     float64
}

// DaySample is the fleet at one moment of the day.
type DaySample struct {
	T    float64 `json:"t"`
	Rate float64 `json:"rate"`
	// Pods are those costing a GPU (starting, ready, draining); Ready those
	// the router routes to.
	Pods     int `json:"pods"`
	Ready    int `json:"ready"`
	InFlight int `json:"in_flight"`
	Queued   int `json:"queued"`
}

type podState uint8

const (
	podStarting podState = iota
	podReady
	podDraining
	podGone
)

// dayPod is one pod of the day's fleet.
type dayPod struct {
	name                    string
	e                       *Engine
	state                   podState
	created, ready, removed float64
	load                    PodLoad
	unanswered              int
	stepping                bool
	// kv is the KV bound's count; preemptions the engine's counter at the
	// last scrape and preemptedAt the scrape that saw it rise (-Inf: none).
	kv          dayKV
	preemptions uint64
	preemptedAt float64
}

// dayFlight is one request of the day.
type dayFlight struct {
	pod, want int // want: the pod it waits for, -1 any
	uncached  int
	hold      *index.Hold
	kv        kvDemand // counted on pod while placed, under the KV bound
	sent      float64
	answered  bool
	state     flightState
}

type flightState uint8

const (
	flightNew flightState = iota
	flightQueued
	flightPlaced
	flightDone
	flightShed
)

type dayRun struct {
	cfg      DayConfig
	pods     []*dayPod
	flights  []dayFlight
	queue    []int // waiting requests, oldest first
	work     Workload
	arrivals []float64
	next     int
	hpa      *HPA
	ix       *index.Index
	sink     eventSink
	q        evQueue
	route    Route
	view     View
	res      DayResult
	resolved int
	spare    [][]uint32
	bytes    [][]byte
	scratch  []int
	kicks    []int
	// routeFor is the request whose prompt d.route holds (-1 none).
	routeFor int
	// explain is the picker's choice without committing, when it can.
	explain Explainer
	// offered is the work placed within the last WorkWindow, oldest first.
	offered []placedWork
}

// placedWork is one placed request's work: the prompt tokens uncached on
// its pod and the tokens it may generate.
type placedWork struct {
	t      float64
	tokens int
}

// Explainer is a Picker that can also say which pod it would choose
// without committing the choice (no speculative entries, nothing learnt),
// as the router's Explain does for a request whose choice may be full.
type Explainer interface {
	Explain(r *Route, v *View) int
}

// Virtual-time events of the day, beyond RunVirtual's.
const (
	evSync   = iota + evPeer + 1 // the autoscaler reconciles
	evReady                      // a pod turns Ready
	evExpire                     // a queued request's TTL runs out
)

// RunDay runs a day's load through a fixed or autoscaled fleet behind one
// router with the given admission, in virtual time. It is deterministic.
func RunDay(cfg DayConfig) (DayResult, error) {
	if err := cfg.Profile.check(); err != nil {
		return DayResult{}, err
	}
	if cfg.Picker == nil || cfg.Workload == nil || cfg.Fixed < 0 || cfg.PodStart < 0 || cfg.Admission.Cap < 0 ||
		cfg.Admission.Pending < 0 || cfg.Admission.MaxQueue < 0 || cfg.Admission.TTL < 0 {
		return DayResult{}, errors.New("day run: needs a picker, a workload, and fixed pods, pod start and admission limits >= 0")
	}
	if cfg.Admission.on() && (cfg.Admission.MaxQueue == 0 || cfg.Admission.TTL == 0) {
		return DayResult{}, errors.New("day run: admission needs a queue bound and a TTL > 0")
	}
	if cfg.ScrapeInterval <= 0 {
		cfg.ScrapeInterval = 0.05
	}
	if cfg.SampleInterval <= 0 {
		cfg.SampleInterval = 60
	}
	d := &dayRun{cfg: cfg, arrivals: cfg.Profile.Arrivals(cfg.Seed), routeFor: -1}
	if len(d.arrivals) == 0 {
		return DayResult{}, errors.New("day run: the profile brings no request")
	}
	work, err := cfg.Workload(len(d.arrivals)).Build()
	if err != nil {
		return DayResult{}, err
	}
	if work.Len() < len(d.arrivals) {
		return DayResult{}, fmt.Errorf("day run: the workload has %d requests for %d arrivals", work.Len(), len(d.arrivals))
	}
	d.work = work
	d.explain, _ = cfg.Picker.(Explainer)
	d.flights = make([]dayFlight, len(d.arrivals))
	d.res.Requests = len(d.arrivals)
	var now float64
	d.ix = index.New(index.Config{BlockSize: cfg.Engine.BlockSize, SpeculationTTL: seconds(cfg.SpeculationTTL),
		Now: func() time.Time { return time.Unix(0, 0).Add(seconds(now)) }})
	d.sink.applier.Index = d.ix
	d.view = View{Index: d.ix, BlockSize: cfg.Engine.BlockSize}
	initial := cfg.Fixed
	if cfg.Fixed == 0 {
		if d.hpa, err = NewHPA(cfg.Autoscale); err != nil {
			return DayResult{}, err
		}
		initial = cfg.Autoscale.Min
		d.q.push(vevent{t: d.hpa.cfg.SyncPeriod, kind: evSync})
	}
	for range initial {
		if err := d.create(0, true); err != nil {
			return DayResult{}, err
		}
	}
	d.q.push(vevent{t: 0, kind: evScrape})
	d.q.push(vevent{t: 0, kind: evSample})
	d.q.push(vevent{t: d.arrivals[0], kind: evArrive})
	for d.resolved < len(d.arrivals) && d.q.len() > 0 {
		ev := d.q.pop()
		now = ev.t
		if err := d.handle(ev); err != nil {
			return DayResult{}, fmt.Errorf("day run at t=%.3fs: %w", now, err)
		}
		d.kickAll(now)
	}
	if d.resolved < len(d.arrivals) {
		return DayResult{}, errors.New("day run stalled with requests unanswered")
	}
	return d.summary(), nil
}

func (d *dayRun) handle(ev vevent) error {
	d.view.Now = ev.t
	switch ev.kind {
	case evArrive:
		i := d.next
		d.next++
		if d.next < len(d.arrivals) {
			d.q.push(vevent{t: d.arrivals[d.next], kind: evArrive})
		}
		d.flights[i].sent = ev.t
		return d.decide(i, ev.t)
	case evStepEnd:
		return d.stepEnd(ev.pod, ev.t)
	case evDeliver:
		if err := d.sink.deliver(d.pods[ev.pod].name, ev.payload); err != nil {
			return err
		}
		d.bytes = append(d.bytes, ev.payload[:0])
	case evScrape:
		for _, p := range d.pods {
			if p.state == podReady || p.state == podDraining {
				p.load.Running, p.load.Waiting, p.load.KVUsage, p.load.ScrapedAt = p.e.Running(), p.e.Waiting(), p.e.KVUsage(), ev.t
				if n := p.e.Stats().Preemptions; n > p.preemptions {
					p.preemptions, p.preemptedAt = n, ev.t
				}
			}
		}
		d.q.push(vevent{t: ev.t + d.cfg.ScrapeInterval, kind: evScrape})
	case evSample:
		d.sample(ev.t)
		d.q.push(vevent{t: ev.t + d.cfg.SampleInterval, kind: evSample})
	case evSync:
		if err := d.sync(ev.t); err != nil {
			return err
		}
		d.q.push(vevent{t: ev.t + d.hpa.cfg.SyncPeriod, kind: evSync})
	case evReady:
		p := d.pods[ev.pod]
		if p.state != podStarting {
			return nil // deleted while starting
		}
		p.state, p.ready = podReady, ev.t
		return d.fill(ev.pod, ev.t)
	case evExpire:
		f := &d.flights[ev.req]
		if f.state == flightQueued {
			d.dequeue(ev.req)
			d.shed(ev.req, ev.t)
		}
	}
	return nil
}

// create adds a pod, Ready now or after PodStart.
func (d *dayRun) create(now float64, ready bool) error {
	ec := d.cfg.Engine
	ec.Seed = replicaSeed(d.cfg.Seed, len(d.pods))
	e, err := NewEngine(ec)
	if err != nil {
		return err
	}
	p := &dayPod{name: "sim-" + strconv.Itoa(len(d.pods)), e: e, created: now, removed: math.Inf(1), preemptedAt: math.Inf(-1)}
	d.pods = append(d.pods, p)
	d.res.PodsCreated++
	if ready {
		p.state, p.ready = podReady, now
	} else {
		d.q.push(vevent{t: now + d.cfg.PodStart, kind: evReady, pod: len(d.pods) - 1})
	}
	return nil
}

// sync is one reconciliation of the autoscaler on the router's exact
// counts: its demand (requests in flight on the pods it routes to and
// waiting in its queue) and its offered work (workRate). Scale-in deletes
// pods as a ReplicaSet picks them (not yet Ready first, then the most
// recently Ready): a deleted pod leaves the router's fleet at once and is
// removed when its last request ends.
func (d *dayRun) sync(now float64) error {
	current, demand := 0, len(d.queue)
	for _, p := range d.pods {
		switch p.state {
		case podStarting:
			current++
		case podReady:
			current++
			demand += p.load.InFlight
		}
	}
	want := d.hpa.Desired(now, current, float64(demand), d.workRate(now))
	for ; current < want; current++ {
		if err := d.create(now, false); err != nil {
			return err
		}
	}
	if current <= want {
		return nil
	}
	drained := false
	for ; current > want; current-- {
		victim := -1
		for i, p := range d.pods { // not Ready first, the newest
			if p.state == podStarting && (victim < 0 || p.created >= d.pods[victim].created) {
				victim = i
			}
		}
		for i, p := range d.pods { // then the most recently Ready
			if victim < 0 || d.pods[victim].state == podReady {
				if p.state == podReady && (victim < 0 || p.ready >= d.pods[victim].ready) {
					victim = i
				}
			}
		}
		p := d.pods[victim]
		if p.state == podStarting {
			if err := d.remove(victim, now); err != nil {
				return err
			}
			continue
		}
		p.state, drained = podDraining, true
		if p.load.InFlight == 0 {
			if err := d.remove(victim, now); err != nil {
				return err
			}
		}
	}
	if drained {
		// Waiters for a pod that left take any pod.
		for i, p := range d.pods {
			if p.state == podReady {
				if err := d.fill(i, now); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// workRate is the offered work, tokens per second: over the last
// WorkWindow, each placed request's prompt tokens the router found uncached
// on the pod it chose plus the tokens it may generate (its max_tokens: the
// seed's requests generate exactly that many).
func (d *dayRun) workRate(now float64) float64 {
	old := 0
	for old < len(d.offered) && d.offered[old].t <= now-WorkWindow {
		old++
	}
	d.offered = append(d.offered[:0], d.offered[old:]...)
	tokens := 0
	for _, w := range d.offered {
		tokens += w.tokens
	}
	return float64(tokens) / WorkWindow
}

// remove ends pod i's life: no GPU from now on, and the router forgets it.
// A pod goes only when nothing runs on it: its drain cuts no request.
func (d *dayRun) remove(i int, now float64) error {
	p := d.pods[i]
	if p.load.InFlight > 0 || p.e.Busy() {
		return fmt.Errorf("removing %s with %d requests in flight", p.name, p.load.InFlight)
	}
	p.state, p.removed = podGone, now
	d.res.PodsRemoved++
	d.ix.DropPod(p.name)
	return nil
}

// room says pod i takes one more request now.
func (d *dayRun) room(i int) bool {
	p, a := d.pods[i], d.cfg.Admission
	return p.state == podReady && (a.Cap == 0 || p.load.InFlight < a.Cap) && (a.Pending == 0 || p.unanswered < a.Pending)
}

// fits says request i's demand fits pod k's cache under the KV bound: any
// request fits while the bound is off, the engine has not preempted within
// PreemptionMemory, or the pod holds nothing.
func (d *dayRun) fits(k, i int, now float64) bool {
	p, reserve := d.pods[k], d.cfg.Admission.KVReserve
	if reserve == 0 || now-p.preemptedAt > PreemptionMemory || p.kv.blocks() == 0 {
		return true
	}
	return p.kv.blocks()+p.kv.adds(d.demand(i)) <= d.cfg.Engine.NumGPUBlocks-1
}

// demand is request i's KV demand at its longest, computed once.
func (d *dayRun) demand(i int) kvDemand {
	f := &d.flights[i]
	if f.kv.keys == nil {
		var buf []uint32
		if n := len(d.spare); n > 0 {
			buf, d.spare = d.spare[n-1], d.spare[:n-1]
		}
		prompt := d.work.Prompt(i, buf)
		f.kv = newDayKVDemand(prompt, min(d.work.OutputLen(i), d.cfg.Admission.KVReserve), d.cfg.Engine.BlockSize)
		d.spare = append(d.spare, prompt[:0])
	}
	return f.kv
}

// decide routes request i as the router's chooser does.
func (d *dayRun) decide(i int, now float64) error {
	cands := d.scratch[:0]
	for k, p := range d.pods {
		if p.state == podReady {
			cands = append(cands, k)
		}
	}
	d.scratch = cands
	if len(cands) == 0 {
		d.shed(i, now)
		return nil
	}
	if !d.cfg.Admission.on() {
		return d.place(i, cands, now)
	}
	open := make([]int, 0, len(cands))
	for _, k := range cands {
		if d.room(k) && d.fits(k, i, now) {
			open = append(open, k)
		}
	}
	// Some pod is full: wait for the one the picker chooses over them all
	// when it is one of those (a picker that cannot explain waits for any).
	want := -1
	if len(open) < len(cands) && d.explain != nil {
		best := d.choose(i, cands, false)
		if !slices.Contains(open, best) {
			want, open = best, open[:0]
		}
	}
	if len(open) > 0 {
		return d.place(i, open, now)
	}
	if len(d.queue) >= d.cfg.Admission.MaxQueue {
		d.shed(i, now)
		return nil
	}
	f := &d.flights[i]
	f.state, f.want = flightQueued, want
	d.queue = append(d.queue, i)
	d.q.push(vevent{t: now + d.cfg.Admission.TTL, kind: evExpire, req: i})
	return nil
}

// choose asks the picker for request i's pod among pods (indices into
// d.pods), committing the choice or not.
func (d *dayRun) choose(i int, pods []int, commit bool) int {
	d.view.Pods = d.view.Pods[:0]
	d.view.Load = d.view.Load[:0]
	for _, k := range pods {
		d.view.Pods = append(d.view.Pods, d.pods[k].name)
		d.view.Load = append(d.view.Load, d.pods[k].load)
	}
	if d.routeFor != i {
		buf := d.route.Tokens
		if d.routeFor < 0 {
			buf = nil
			if n := len(d.spare); n > 0 {
				buf, d.spare = d.spare[n-1], d.spare[:n-1]
			}
		}
		d.route.Tokens, d.routeFor = d.work.Prompt(i, buf), i
	}
	d.route.Conn, d.route.Uncached, d.route.Hold = i, len(d.route.Tokens), nil
	var c int
	if commit {
		c = d.cfg.Picker.Pick(&d.route, &d.view)
	} else {
		c = d.explain.Explain(&d.route, &d.view)
	}
	if c < 0 || c >= len(pods) {
		return -1
	}
	return pods[c]
}

// place sends request i to the pod the picker commits to among pods.
func (d *dayRun) place(i int, pods []int, now float64) error {
	k := d.choose(i, pods, true)
	if k < 0 {
		return fmt.Errorf("picker chose no pod of %d", len(pods))
	}
	// The engine owns the prompt's buffer from here.
	tokens := d.route.Tokens
	d.route.Tokens, d.routeFor = nil, -1
	p := d.pods[k]
	if p.state != podReady {
		return fmt.Errorf("request %d sent to %s, which is not in the router's fleet", i, p.name)
	}
	r := &Request{ID: uint64(i), Prompt: tokens, MaxTokens: d.work.OutputLen(i), Arrival: now}
	if err := p.e.Add(r); err != nil {
		return err
	}
	f := &d.flights[i]
	f.state, f.pod, f.uncached, f.hold = flightPlaced, k, d.route.Uncached, d.route.Hold
	p.load.count(phaseDecided, f.uncached, nil)
	p.unanswered++
	if d.cfg.Admission.KVReserve > 0 {
		p.kv.add(d.demand(i), 1)
	}
	if d.hpa != nil && d.hpa.cfg.WorkTarget > 0 {
		d.offered = append(d.offered, placedWork{t: now, tokens: f.uncached + r.MaxTokens})
	}
	d.kicks = append(d.kicks, k)
	return nil
}

// fill hands pod k's room to waiters while it has room and one may use it.
func (d *dayRun) fill(k int, now float64) error {
	for len(d.queue) > 0 && d.room(k) {
		// A waiter whose demand does not fit the pod's cache waits while
		// later ones that fit pass it, as the router's KV bound lets them.
		w := slices.IndexFunc(d.queue, func(i int) bool { return d.flights[i].want == k && d.fits(k, i, now) })
		if w < 0 {
			w = slices.IndexFunc(d.queue, func(i int) bool {
				want := d.flights[i].want
				return (want < 0 || d.pods[want].state != podReady) && d.fits(k, i, now)
			})
		}
		if w < 0 {
			return nil
		}
		i := d.queue[w]
		d.queue = slices.Delete(d.queue, w, w+1)
		open := make([]int, 0, len(d.pods))
		for j := range d.pods {
			if d.room(j) && d.fits(j, i, now) {
				open = append(open, j)
			}
		}
		if err := d.place(i, open, now); err != nil {
			return err
		}
	}
	return nil
}

func (d *dayRun) dequeue(i int) {
	if w := slices.Index(d.queue, i); w >= 0 {
		d.queue = slices.Delete(d.queue, w, w+1)
	}
}

func (d *dayRun) shed(i int, now float64) {
	d.flights[i].state, d.flights[i].kv = flightShed, kvDemand{}
	d.res.Shed++
	if d.cfg.Profile.AtPeak(d.flights[i].sent) {
		d.res.PeakShed++
		d.res.PeakRequests++
	}
	d.resolved++
}

// kickAll starts a step on every kicked pod that has work and none running.
func (d *dayRun) kickAll(now float64) {
	for _, k := range d.kicks {
		p := d.pods[k]
		if p.stepping {
			continue
		}
		if dt, ok := p.e.Schedule(); ok {
			p.stepping = true
			d.q.push(vevent{t: now + dt, kind: evStepEnd, pod: k})
		}
	}
	d.kicks = d.kicks[:0]
}

// stepEnd completes pod k's step: events leave for the router, first
// tokens and ends free room.
func (d *dayRun) stepEnd(k int, now float64) error {
	p := d.pods[k]
	p.stepping = false
	batch, progress := p.e.Finish(now)
	if batch != nil {
		var buf []byte
		if n := len(d.bytes); n > 0 {
			buf, d.bytes = d.bytes[n-1], d.bytes[:n-1]
		}
		payload, err := kvevents.AppendBatch(buf, d.cfg.Form, batch)
		if err != nil {
			return fmt.Errorf("encoding KV events of %s: %w", p.name, err)
		}
		d.q.push(vevent{t: now + d.cfg.EventDelay, kind: evDeliver, pod: k, payload: payload})
	}
	freed := false
	for _, r := range progress {
		i := int(r.ID)
		f := &d.flights[i]
		if r.Output > 0 && !f.answered {
			f.answered = true
			p.load.count(phaseAnswered, f.uncached, f.hold)
			f.hold = nil
			p.unanswered--
			freed = true
		}
		if !r.Finished() {
			continue
		}
		f.state = flightDone
		p.load.count(phaseEnded, 0, nil)
		if d.cfg.Admission.KVReserve > 0 {
			p.kv.add(f.kv, -1)
		}
		f.kv = kvDemand{}
		freed = true
		d.served(f, r)
		d.spare = append(d.spare, r.tokens[:0])
	}
	if p.state == podDraining && p.load.InFlight == 0 {
		if err := d.remove(k, now); err != nil {
			return err
		}
	}
	d.kicks = append(d.kicks, k)
	if freed && p.state == podReady {
		return d.fill(k, now)
	}
	return nil
}

func (d *dayRun) served(f *dayFlight, r *Request) {
	d.resolved++
	d.res.Served++
	ttft := r.FirstToken - f.sent
	d.res.ttfts = append(d.res.ttfts, ttft)
	if d.cfg.Profile.AtPeak(f.sent) {
		d.res.PeakRequests++
		d.res.peakTTFTs = append(d.res.peakTTFTs, ttft)
	}
	if r.Output > 1 {
		d.res.tpots = append(d.res.tpots, (r.Done-r.FirstToken)/float64(r.Output-1))
	}
}

func (d *dayRun) sample(t float64) {
	s := DaySample{T: t, Rate: d.cfg.Profile.Rate(t), Queued: len(d.queue)}
	for _, p := range d.pods {
		if p.state == podGone {
			continue
		}
		s.Pods++
		s.InFlight += p.load.InFlight
		if p.state == podReady {
			s.Ready++
		}
	}
	if t < d.cfg.Profile.Duration() {
		d.res.Timeline = append(d.res.Timeline, s)
	}
}

// Duration is the day's length the result covers, in seconds.
func (r DayResult) Duration() float64 { return r.day }

func (d *dayRun) summary() DayResult {
	r := d.res
	end := d.cfg.Profile.Duration()
	r.day = end
	for _, p := range d.pods {
		r.PodSeconds += max(0, min(p.removed, end)-p.created)
	}
	r.MeanPods = r.PodSeconds / end
	for _, s := range r.Timeline {
		r.PeakPods = max(r.PeakPods, s.Pods)
	}
	r.MeanTTFT, _, r.P99TTFT = MeanMedianP99(r.ttfts)
	r.PeakMeanTTFT, _, r.PeakP99TTFT = MeanMedianP99(r.peakTTFTs)
	r.MeanTPOT, _, _ = MeanMedianP99(r.tpots)
	var queries, hits uint64
	for _, p := range d.pods {
		s := p.e.Stats()
		queries += s.PrefixQueries
		hits += s.PrefixHits
		r.Preemptions += s.Preemptions
	}
	if queries > 0 {
		r.HitRate = float64(hits) / float64(queries)
	}
	return r
}
