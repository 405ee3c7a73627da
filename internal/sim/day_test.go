package sim

import (
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
)

// smallDay is a cheap day: short prompts, a short day with a peak that needs
// several pods and a night that needs one, pods starting in 30 s and the
// scale-down window shortened so scale-in happens within it.
func smallDay(fixed int, adm Admission) DayConfig {
	ec := SeedEngineConfig()
	return DayConfig{Engine: ec, Picker: &RoundRobin{}, Fixed: fixed,
		Profile:   DayProfile{Hourly: []float64{0.05, 0.05, 1, 1, 0.05, 0.05, 0.05, 0.05}, Peak: 24, HourSeconds: 60},
		Autoscale: HPAConfig{Min: 1, Max: 8, Target: 16, ScaleDownWindow: 30}, PodStart: 30, Admission: adm,
		EventDelay: 0.01, SpeculationTTL: 2, Form: kvevents.FormMap, Seed: 7,
		Workload: func(n int) Dataset {
			return PrefixRepetition{NumPrefixes: 4, PrefixLen: 128, SuffixLen: 64, OutputLen: 32, NumPrompts: (n + 3) / 4 * 4, Seed: 7}
		}}
}

var testFlow = Admission{Cap: 256, Pending: 2, MaxQueue: 1024, TTL: 30}

// The autoscaled fleet costs fewer GPU-seconds than the fixed one and
// answers every request; its pods leave only when their last request ended
// (RunDay fails a run that removes a pod with a request in flight or sends
// one to a pod outside the router's fleet).
func TestDayAutoscaledCostsLessAndAnswersAll(t *testing.T) {
	fixed, err := RunDay(smallDay(4, testFlow))
	if err != nil {
		t.Fatal(err)
	}
	auto, err := RunDay(smallDay(0, testFlow))
	if err != nil {
		t.Fatal(err)
	}
	for name, r := range map[string]DayResult{"fixed": fixed, "autoscaled": auto} {
		if r.Requests == 0 || r.Served != r.Requests || r.Shed != 0 {
			t.Errorf("%s: served %d and shed %d of %d requests, want all served", name, r.Served, r.Shed, r.Requests)
		}
	}
	if auto.PodSeconds >= fixed.PodSeconds {
		t.Errorf("autoscaled pod-seconds %.0f, want below the fixed fleet's %.0f", auto.PodSeconds, fixed.PodSeconds)
	}
	if want := 4 * fixed.Duration(); fixed.PodSeconds != want {
		t.Errorf("fixed pod-seconds %.0f, want 4 pods x the day %.0f", fixed.PodSeconds, want)
	}
	if auto.PodsCreated <= 1 || auto.PodsRemoved == 0 {
		t.Errorf("autoscaled: %d pods created, %d removed: want a scale-out and a scale-in", auto.PodsCreated, auto.PodsRemoved)
	}
	again, err := RunDay(smallDay(0, testFlow))
	if err != nil || again.PodSeconds != auto.PodSeconds || again.Served != auto.Served || again.P99TTFT != auto.P99TTFT {
		t.Errorf("a second run differs: %+v, %v", again, err)
	}
}

// A request that finds no room waits in the router and is answered 503
// once its TTL has passed: one pod taking one request at a time, a TTL
// shorter than a request.
func TestDayQueueTTLSheds(t *testing.T) {
	cfg := smallDay(1, Admission{Cap: 1, MaxQueue: 1024, TTL: 0.05})
	res, err := RunDay(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if res.Shed == 0 || res.Served == 0 || res.Served+res.Shed != res.Requests {
		t.Fatalf("served %d, shed %d of %d: want some of each and every request answered", res.Served, res.Shed, res.Requests)
	}
	if res.P99TTFT > 0.05+1 {
		t.Errorf("P99 TTFT %.2fs: a served request waited past its TTL", res.P99TTFT)
	}
}

func TestDayProfile(t *testing.T) {
	p := DayProfile{Hourly: []float64{0, 1}, Peak: 10, HourSeconds: 100}
	if got := p.Rate(50); got != 5 {
		t.Errorf("Rate(50) = %g, want 5 (halfway up the ramp)", got)
	}
	if got := p.Rate(150); got != 5 {
		t.Errorf("Rate(150) = %g, want 5 (halfway down)", got)
	}
	if !p.AtPeak(100) || p.AtPeak(10) {
		t.Error("AtPeak wrong")
	}
	n := len(p.Arrivals(1))
	if e := p.Expected(); e != 1000 || n < 900 || n > 1100 {
		t.Errorf("expected %g arrivals, drew %d", e, n)
	}
}

// TestDayKVBoundHoldsAPreemptingPod: one pod with a small cache (300
// blocks of 64 tokens) and 24 prefixes of 1,024 tokens, at a rate it cannot
// serve. Without the KV bound the router sends it whatever the pending
// bound lets through, the engine preempts request after request, and the
// blocks they take back evict the cached prefixes the next requests
// needed; with it (the provider's default reserve), once a scrape sees the
// engine preempt, a request starts only when every request's output fits,
// and the same pod serves more, from a warmer cache.
func TestDayKVBoundHoldsAPreemptingPod(t *testing.T) {
	day := func(reserve int) DayResult {
		t.Helper()
		cfg := smallDay(1, Admission{Cap: 256, Pending: 2, MaxQueue: 1024, TTL: 30, KVReserve: reserve})
		cfg.Engine.NumGPUBlocks = 300
		cfg.Profile = DayProfile{Hourly: []float64{1, 1}, Peak: 30, HourSeconds: 60}
		cfg.ScrapeInterval = 0.05
		cfg.Workload = func(n int) Dataset {
			return PrefixRepetition{NumPrefixes: 24, PrefixLen: 1024, SuffixLen: 64, OutputLen: 128, NumPrompts: (n + 23) / 24 * 24, Seed: 7}
		}
		res, err := RunDay(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	off, on := day(0), day(1024)
	t.Logf("without the KV bound: %d served, %d preemptions, hit rate %.3f; with it: %d served, %d preemptions, hit rate %.3f",
		off.Served, off.Preemptions, off.HitRate, on.Served, on.Preemptions, on.HitRate)
	if off.Preemptions == 0 {
		t.Fatal("the pod never preempted without the bound: the test's load does not reach its cache")
	}
	if on.Preemptions*4 > off.Preemptions {
		t.Errorf("with the KV bound %d preemptions, want under a quarter of the %d without", on.Preemptions, off.Preemptions)
	}
	if on.Served <= off.Served || on.HitRate <= off.HitRate {
		t.Errorf("with the KV bound %d served at hit rate %.3f, want more than the %d at %.3f without", on.Served, on.HitRate, off.Served, off.HitRate)
	}
}
