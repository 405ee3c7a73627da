package sim

import (
	"cmp"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/router/index"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
)

// smallRun is a scaled-down seed workload that still evicts and preempts.
func smallRun(p Picker, delay float64, form kvevents.Form) VirtualConfig {
	ec := DefaultEngineConfig()
	ec.NumGPUBlocks = 500
	return VirtualConfig{Engine: ec, Replicas: 4, Concurrency: 48, Picker: p, EventDelay: delay, Form: form, Seed: 3,
		Workload: PrefixRepetition{NumPrefixes: 12, PrefixLen: 512, SuffixLen: 64, OutputLen: 48, NumPrompts: 480, Seed: 3}}
}

func TestVirtualRunIsDeterministic(t *testing.T) {
	a, err := RunVirtual(smallRun(NewRandom(1), 0.01, kvevents.FormMap))
	if err != nil {
		t.Fatal(err)
	}
	b, err := RunVirtual(smallRun(NewRandom(1), 0.01, kvevents.FormMap))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two runs differ:\n%+v\n%+v", a, b)
	}
	if a.Requests != 480 || a.OutputTokens != 480*48 || a.Duration <= 0 || a.HitRate <= 0 || a.MeanTTFT <= 0 {
		t.Fatalf("implausible result %+v", a)
	}
	c, err := RunVirtual(smallRun(NewRandom(2), 0.01, kvevents.FormMap))
	if err != nil {
		t.Fatal(err)
	}
	if reflect.DeepEqual(a, c) {
		t.Fatal("a different picker seed gave the identical result: the seed is not used")
	}
}

// probe is a picker that records what the router side knows at each pick.
type probe struct {
	inner   Picker
	keys    []uint64
	matches []index.Match
	seen    int // picks at which some pod held a leading block of the prompt
	maxSeen int // most blocks any pod held
}

func (p *probe) Pick(r *Route, v *View) int {
	p.keys = index.Keys(p.keys[:0], r.Tokens, v.BlockSize, "", nil)
	p.matches = v.Index.Lookup(p.keys, p.matches)
	if len(p.matches) > 0 {
		p.seen++
	}
	for _, m := range p.matches {
		p.maxSeen = max(p.maxSeen, m.Blocks)
	}
	return p.inner.Pick(r, v)
}

// TestRouterLearnsOnlyFromDelayedEvents holds the boundary of DESIGN.md
// decision 8 in behaviour: when events never arrive within the run, the
// router's index stays empty although the engines serve prefix hits; with
// a short delay the index, fed by the router's own decoder from bytes in
// either wire form, finds the cached prefixes.
func TestRouterLearnsOnlyFromDelayedEvents(t *testing.T) {
	blind := &probe{inner: &RoundRobin{}}
	res, err := RunVirtual(smallRun(blind, 1e9, kvevents.FormMap))
	if err != nil {
		t.Fatal(err)
	}
	if res.HitRate == 0 {
		t.Fatal("engines served no prefix hits: the test proves nothing")
	}
	if blind.seen != 0 {
		t.Fatalf("with events never delivered the router still found cached blocks at %d picks", blind.seen)
	}
	for _, form := range []kvevents.Form{kvevents.FormMap, kvevents.FormArray} {
		informed := &probe{inner: &RoundRobin{}}
		if _, err := RunVirtual(smallRun(informed, 0.005, form)); err != nil {
			t.Fatal(err)
		}
		if informed.seen < 100 || informed.maxSeen < 512/16 {
			t.Fatalf("%s form: router saw cached blocks at only %d picks, at most %d blocks", form, informed.seen, informed.maxSeen)
		}
	}
}

// TestPickerSeesNoSimulatorState holds the boundary in types: nothing a
// picker is handed can reach an engine, a request in an engine, or any
// other simulator internals; the index is the router's own package.
func TestPickerSeesNoSimulatorState(t *testing.T) {
	allowed := map[reflect.Type]bool{reflect.TypeFor[Route](): true, reflect.TypeFor[View](): true, reflect.TypeFor[PodLoad](): true}
	simPkg := reflect.TypeFor[Engine]().PkgPath()
	seen := map[reflect.Type]bool{}
	var walk func(t reflect.Type, path string)
	walk = func(ty reflect.Type, path string) {
		if seen[ty] {
			return
		}
		seen[ty] = true
		if ty.PkgPath() == simPkg && !allowed[ty] {
			t.Errorf("picker can reach %s via %s", ty, path)
		}
		if strings.HasPrefix(ty.PkgPath(), "github.com/llmd-dev/terraform-provider-llmd/router/") {
			return // router packages are the router's own knowledge
		}
		switch ty.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Array, reflect.Chan:
			walk(ty.Elem(), path+"[]")
		case reflect.Map:
			walk(ty.Key(), path+"[key]")
			walk(ty.Elem(), path+"[]")
		case reflect.Struct:
			for i := range ty.NumField() {
				walk(ty.Field(i).Type, path+"."+ty.Field(i).Name)
			}
		case reflect.Interface, reflect.Func:
			t.Errorf("picker argument %s is a %s: it could carry anything", path, ty.Kind())
		}
	}
	m := reflect.TypeFor[Picker]().Method(0)
	for i := range m.Type.NumIn() {
		walk(m.Type.In(i), m.Type.In(i).String())
	}
	if !seen[reflect.TypeFor[PodLoad]()] {
		t.Fatal("walk did not reach PodLoad: the test is not looking")
	}
}

// TestKubeProxyPinsConnections checks the baseline: every request of a
// connection goes to one pod, and connections spread over pods.
func TestKubeProxyPinsConnections(t *testing.T) {
	p := NewKubeProxy(9)
	v := &View{Pods: make([]string, 8)}
	pods := map[int]bool{}
	for conn := range 64 {
		first := p.Pick(&Route{Conn: conn}, v)
		pods[first] = true
		for range 5 {
			if got := p.Pick(&Route{Conn: conn}, v); got != first {
				t.Fatalf("connection %d moved from pod %d to %d", conn, first, got)
			}
		}
	}
	if len(pods) < 6 {
		t.Fatalf("64 connections landed on only %d of 8 pods", len(pods))
	}
}

// inFlightPeak is the most requests in flight at once, per the records.
func inFlightPeak(recs []RequestRecord) int {
	type edge struct {
		t     float64
		delta int
	}
	var edges []edge
	for _, r := range recs {
		edges = append(edges, edge{r.Sent, 1}, edge{r.Done, -1})
	}
	slices.SortFunc(edges, func(a, b edge) int { return cmp.Or(cmp.Compare(a.t, b.t), a.delta-b.delta) })
	n, peak := 0, 0
	for _, e := range edges {
		n += e.delta
		peak = max(peak, n)
	}
	return peak
}

// TestClientConnectionsAndRate checks the client model: with every request
// ready at once, exactly Concurrency are in flight and a connection carries
// one request at a time; with a Poisson rate, requests arrive spread over
// about NumPrompts/rate seconds and none waits for a connection.
func TestClientConnectionsAndRate(t *testing.T) {
	cfg := smallRun(NewRandom(1), 0.01, kvevents.FormMap)
	res, err := RunVirtual(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != 480 || inFlightPeak(res.Records) != cfg.Concurrency {
		t.Fatalf("%d records, peak in flight %d, want 480 and %d", len(res.Records), inFlightPeak(res.Records), cfg.Concurrency)
	}
	byConn := map[int][]RequestRecord{}
	for _, r := range res.Records {
		byConn[r.Conn] = append(byConn[r.Conn], r)
	}
	for conn, recs := range byConn {
		if inFlightPeak(recs) != 1 {
			t.Fatalf("connection %d carried overlapping requests", conn)
		}
	}
	if res.PeakWaiting == 0 || res.PeakWaiting < int(res.MeanWaiting) {
		t.Fatalf("peak waiting %d, mean %v", res.PeakWaiting, res.MeanWaiting)
	}

	cfg = smallRun(NewRandom(1), 0.01, kvevents.FormMap)
	cfg.RequestRate = 4
	res, err = RunVirtual(cfg)
	if err != nil {
		t.Fatal(err)
	}
	last := 0.0
	for _, r := range res.Records {
		last = max(last, r.Sent)
	}
	if last < 0.8*480/4 || last > 1.2*480/4 {
		t.Fatalf("last of 480 requests at 4/s sent at %.1fs", last)
	}
	if peak := inFlightPeak(res.Records); peak >= cfg.Concurrency {
		t.Fatalf("at 4 requests/s %d were in flight at once: the rate does not pace the client", peak)
	}
}

// clock is a picker that records when each decision is taken.
type clock struct {
	inner Picker
	at    []float64
}

func (c *clock) Pick(r *Route, v *View) int {
	c.at = append(c.at, v.Now)
	return c.inner.Pick(r, v)
}

// TestRouterCostSpreadsTheBurst sends the 48-request opening burst through
// a router that spends 10 ms per request: decision k of the burst is taken
// at (k+1) x 10 ms on what the router knows then, no request reaches its
// first token before its decision, TTFT (from the client's send) includes
// the wait, and the run stays deterministic.
func TestRouterCostSpreadsTheBurst(t *testing.T) {
	const cost = 0.01
	run := func(cost float64) (Result, []float64) {
		c := &clock{inner: &RoundRobin{}}
		cfg := smallRun(c, 0.01, kvevents.FormMap)
		cfg.RouterCost = cost
		res, err := RunVirtual(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return res, c.at
	}
	res, at := run(cost)
	for k := range 48 {
		if want := float64(k+1) * cost; math.Abs(at[k]-want) > 1e-9 {
			t.Fatalf("burst decision %d at %.4f s, want %.4f s", k, at[k], want)
		}
	}
	first := make([]float64, 0, len(res.Records))
	for _, r := range res.Records {
		if r.Sent == 0 {
			first = append(first, r.FirstToken)
		}
	}
	if len(first) != 48 {
		t.Fatalf("%d requests sent at t=0, want the 48 of the burst", len(first))
	}
	slices.Sort(first)
	for k, f := range first {
		if f < float64(k+1)*cost {
			t.Errorf("the %d-th first token of the burst at %.4f s, before the %d-th decision", k+1, f, k+1)
		}
	}
	free, _ := run(0)
	if res.MeanTTFT <= free.MeanTTFT {
		t.Errorf("mean TTFT %.4f s with a router cost, %.4f s without: the router's wait is not in TTFT", res.MeanTTFT, free.MeanTTFT)
	}
	again, _ := run(cost)
	if !reflect.DeepEqual(res, again) {
		t.Error("two runs with a router cost differ")
	}
}

// TestRouterWorkersDecideAtOnce sends the same burst through a router of
// three workers at 10 ms a request: decisions come three at a time, the
// k-th at (k/3+1) x 10 ms.
func TestRouterWorkersDecideAtOnce(t *testing.T) {
	const cost, workers = 0.01, 3
	c := &clock{inner: &RoundRobin{}}
	cfg := smallRun(c, 0.01, kvevents.FormMap)
	cfg.RouterCost, cfg.RouterWorkers = cost, workers
	if _, err := RunVirtual(cfg); err != nil {
		t.Fatal(err)
	}
	for k := range 48 {
		if want := float64(k/workers+1) * cost; math.Abs(c.at[k]-want) > 1e-9 {
			t.Fatalf("burst decision %d at %.4f s, want %.4f s", k, c.at[k], want)
		}
	}
}
