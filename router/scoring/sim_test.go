package scoring_test

import (
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// simPicker adapts a scoring.Picker to the virtual-time simulator's Picker
// interface: the same scoring code the live router runs, fed with what the
// simulator's router side knows. The simulator creates its index inside
// RunVirtual, so the Picker is built at the first pick. Package sim or
// bench may adopt this adapter as is (router packages cannot import sim).
type simPicker struct {
	scorers    []scoring.Weighted
	staleAfter float64
	p          *scoring.Picker
	pods       []scoring.Pod
	picks      int
}

func (a *simPicker) Pick(r *sim.Route, v *sim.View) int {
	if a.p == nil {
		a.p = scoring.NewPicker(v.Index, a.scorers)
	}
	a.pods = a.pods[:0]
	for i, name := range v.Pods {
		l := v.Load[i]
		a.pods = append(a.pods, scoring.Pod{Name: name, Load: scoring.Load{Running: l.Running, Waiting: l.Waiting,
			KVUsage: l.KVUsage, Fresh: v.Now-l.ScrapedAt <= a.staleAfter, InFlight: l.InFlight}})
	}
	d, err := a.p.Pick(&scoring.Request{Tokens: r.Tokens}, a.pods)
	if err != nil {
		return -1 // the simulator reports the bad pick
	}
	a.picks++
	r.Hold = d.Hold // the simulator settles it at the request's first token
	return d.Chosen
}

func newSimPicker(t *testing.T, scorers ...config.Scorer) *simPicker {
	t.Helper()
	ws, err := scoring.FromConfig(config.Scoring{Scorers: scorers})
	if err != nil {
		t.Fatal(err)
	}
	return &simPicker{scorers: ws, staleAfter: config.DefaultStaleAfter.Seconds()}
}

// virtualRun is a scaled-down seed workload (4 replicas whose caches hold a quarter
// of the 32 prefixes each), which the kube-proxy baseline cannot keep cached.
func virtualRun(p sim.Picker) sim.VirtualConfig {
	ec := sim.DefaultEngineConfig()
	ec.NumGPUBlocks = 400
	return sim.VirtualConfig{Engine: ec, Replicas: 4, Concurrency: 48, Picker: p, EventDelay: 0.005,
		Form: kvevents.FormMap, Seed: 5,
		Workload: sim.PrefixRepetition{NumPrefixes: 32, PrefixLen: 512, SuffixLen: 64, OutputLen: 32, NumPrompts: 1280, Seed: 5}}
}

// TestPickerDrivesVirtualFleet runs the virtual-time simulator with the
// kube-proxy baseline and with the llm-d configuration of this package's
// scorers (prefix 3 : kv-usage 2 : queue 2, speculative entries) and with a
// load-aware mix, on the same workload. Precise prefix routing must raise the
// fleet's prefix-cache hit rate well above the baseline's and cut mean TTFT:
// the scorers see the simulated caches only through encoded KV events.
func TestPickerDrivesVirtualFleet(t *testing.T) {
	base, err := sim.RunVirtual(virtualRun(sim.NewKubeProxy(5)))
	if err != nil {
		t.Fatal(err)
	}
	llmd := newSimPicker(t, config.DefaultScorers()...)
	precise, err := sim.RunVirtual(virtualRun(llmd))
	if err != nil {
		t.Fatal(err)
	}
	mixed, err := sim.RunVirtual(virtualRun(newSimPicker(t, config.Scorer{Type: scoring.PrefixType, Weight: 3},
		config.Scorer{Type: scoring.CostType, Weight: 2}, config.Scorer{Type: scoring.InFlightType, Weight: 1},
		config.Scorer{Type: scoring.SpreadType, Weight: 1})))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		name string
		res  sim.Result
	}{{"kube-proxy", base}, {"llmd", precise}, {"prefix+cost+in-flight+spread", mixed}} {
		t.Logf("%-28s hit %.3f  mean TTFT %.3fs  p99 %.3fs  out %.0f tok/s  pods %v", r.name, r.res.HitRate,
			r.res.MeanTTFT, r.res.P99TTFT, r.res.OutputThroughput, r.res.PodRequests)
	}
	if llmd.picks != precise.Requests {
		t.Errorf("adapter made %d picks for %d requests", llmd.picks, precise.Requests)
	}
	for name, r := range map[string]sim.Result{"llmd": precise, "mixed": mixed} {
		if r.HitRate < base.HitRate+0.2 {
			t.Errorf("%s: hit rate %.3f, baseline %.3f: precise routing should add at least 0.2", name, r.HitRate, base.HitRate)
		}
		if r.MeanTTFT >= base.MeanTTFT {
			t.Errorf("%s: mean TTFT %.3fs not below the baseline's %.3fs", name, r.MeanTTFT, base.MeanTTFT)
		}
	}
}
