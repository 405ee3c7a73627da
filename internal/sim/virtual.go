package sim

import (
	"errors"
	"fmt"
	"math"
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
	Workload PrefixRepetition
	// Concurrency is the client's --max-concurrency: that many keep-alive
	// connections each send their next request when the last one finishes.
	Concurrency int
	Picker      Picker
	// EventDelay is how long after a step ends its KV events reach the
	// router's index, in seconds (publish, network, decode).
	EventDelay float64
	// ScrapeInterval is the router's /metrics polling period (default 50 ms,
	// PROTOCOLS.md section 3).
	ScrapeInterval float64
	// SampleInterval is how often the report samples fleet gauges (default 1 s).
	SampleInterval float64
	// Form is the KV-event wire form the engines publish.
	Form kvevents.Form
	// Seed seeds the engines' hash roots; the workload and picker carry their own.
	Seed uint64
}

// Result summarises a run the way `vllm bench serve` does, plus the fleet
// gauges it cannot see (read from the engines' metrics).
type Result struct {
	Requests                  int
	Duration                  float64 // seconds, first send to last token
	InputTokens, OutputTokens int
	OutputThroughput          float64 // output tokens per second
	MeanTTFT, MedianTTFT      float64
	P99TTFT, MeanTPOT         float64
	// HitRate is prefix-cache hits over queries, in tokens, over the fleet.
	HitRate float64
	// MeanWaiting and MeanRunning are fleet totals and MeanKVUsage the pod
	// average, time-averaged over the steady state (while the client has
	// prompts left, so every connection is busy).
	MeanWaiting, MeanRunning, MeanKVUsage float64
	Preemptions                           uint64
	// PodRequests counts requests each pod served.
	PodRequests []int
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
	work     *prompts
	route    Route
	next     int // next prompt to send
	ttft     []float64
	res      Result
	sampled  int
	// Buffers of delivered payloads and finished requests' tokens, reused
	// so a run allocates per in-flight item, not per step or request.
	spareBytes  [][]byte
	spareTokens [][]uint32
	finished    int
}

// RunVirtual runs the workload through a simulated fleet in virtual time.
// It is deterministic: the same config gives the same Result.
func RunVirtual(cfg VirtualConfig) (Result, error) {
	if cfg.Replicas <= 0 || cfg.Replicas > index.MaxEngines || cfg.Concurrency <= 0 || cfg.Picker == nil {
		return Result{}, fmt.Errorf("virtual run: needs 1..%d replicas, concurrency > 0 and a picker", index.MaxEngines)
	}
	if cfg.ScrapeInterval <= 0 {
		cfg.ScrapeInterval = 0.05
	}
	if cfg.SampleInterval <= 0 {
		cfg.SampleInterval = 1
	}
	work, err := newPrompts(cfg.Workload)
	if err != nil {
		return Result{}, err
	}
	v := &virtualRun{cfg: cfg, work: work, stepping: make([]bool, cfg.Replicas), ttft: make([]float64, 0, work.len())}
	var now float64
	ix := index.New(index.Config{BlockSize: cfg.Engine.BlockSize,
		Now: func() time.Time { return time.Unix(0, 0).Add(time.Duration(now * float64(time.Second))) }})
	v.sink.ix = ix
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
	v.q.push(vevent{t: 0, kind: evScrape})
	v.q.push(vevent{t: 0, kind: evSample})
	for c := 0; c < cfg.Concurrency && v.next < work.len(); c++ {
		if err := v.send(c, 0); err != nil {
			return Result{}, err
		}
	}
	v.kickAll(0)
	for v.q.len() > 0 && v.finished < work.len() {
		ev := v.q.pop()
		now = ev.t
		if err := v.handle(ev); err != nil {
			return Result{}, fmt.Errorf("virtual run at t=%.3fs: %w", now, err)
		}
		v.kickAll(now)
	}
	if v.finished < work.len() {
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
	case evScrape:
		for i, e := range v.engines {
			l := &v.view.Load[i]
			l.Running, l.Waiting, l.KVUsage, l.ScrapedAt = e.Running(), e.Waiting(), e.KVUsage(), ev.t
		}
		v.q.push(vevent{t: ev.t + v.cfg.ScrapeInterval, kind: evScrape})
	case evSample:
		// Gauges are averaged over the steady state only, while the client
		// still has prompts and so keeps every connection busy: ramp-up and
		// drain would dilute them.
		if v.next >= v.work.len() {
			return nil
		}
		for _, e := range v.engines {
			v.res.MeanWaiting += float64(e.Waiting())
			v.res.MeanRunning += float64(e.Running())
			v.res.MeanKVUsage += e.KVUsage() / float64(len(v.engines))
		}
		v.sampled++
		v.q.push(vevent{t: ev.t + v.cfg.SampleInterval, kind: evSample})
	}
	return nil
}

// stepEnd completes pod's step: its events leave for the router, its
// finished requests free their connections for the next prompt.
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
		if r.Output == 1 {
			v.ttft = append(v.ttft, r.FirstToken-r.Arrival)
		}
		if !r.Finished() {
			continue
		}
		v.finished++
		v.view.Load[pod].InFlight--
		v.res.OutputTokens += r.Output
		v.res.Duration = now
		if r.Output > 1 {
			v.res.MeanTPOT += (r.Done - r.FirstToken) / float64(r.Output-1)
		}
		// The engine is done with the request; its token buffer serves the next.
		v.spareTokens = append(v.spareTokens, r.tokens[:0])
		conn := int(r.ID >> 32)
		if v.next < v.work.len() {
			if err := v.send(conn, now); err != nil {
				return err
			}
		}
	}
	v.kick = append(v.kick, pod)
	return nil
}

// send routes the next prompt on connection conn.
func (v *virtualRun) send(conn int, now float64) error {
	i := v.next
	v.next++
	var buf []uint32
	if n := len(v.spareTokens); n > 0 {
		buf, v.spareTokens = v.spareTokens[n-1], v.spareTokens[:n-1]
	}
	tokens := v.work.prompt(i, buf)
	v.route = Route{Conn: conn, Tokens: tokens}
	v.view.Now = now
	pod := v.cfg.Picker.Pick(&v.route, &v.view)
	if pod < 0 || pod >= len(v.engines) {
		return fmt.Errorf("picker chose pod %d of %d", pod, len(v.engines))
	}
	r := &Request{ID: uint64(conn)<<32 | uint64(i), Prompt: tokens, MaxTokens: v.cfg.Workload.OutputLen, Arrival: now}
	if err := v.engines[pod].Add(r); err != nil {
		return err
	}
	v.res.Requests++
	v.res.InputTokens += len(tokens)
	v.res.PodRequests[pod]++
	v.view.Load[pod].InFlight++
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
	if r.Duration > 0 {
		r.OutputThroughput = float64(r.OutputTokens) / r.Duration
	}
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
	if v.finished > 0 {
		r.MeanTPOT /= float64(v.finished)
	}
	r.MeanTTFT, r.MedianTTFT, r.P99TTFT = meanMedianP99(v.ttft)
	return r
}

func meanMedianP99(xs []float64) (mean, median, p99 float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	s := append([]float64(nil), xs...)
	slices.Sort(s)
	for _, x := range s {
		mean += x
	}
	mean /= float64(len(s))
	median = s[len(s)/2]
	if len(s)%2 == 0 {
		median = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	p99 = s[min(len(s)-1, int(math.Ceil(0.99*float64(len(s))))-1)]
	return mean, median, p99
}
