package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// contended is a scaled-down seed workload that the Kubernetes baseline
// cannot keep cached: 4 replicas hold about 40 of the 96 prefixes each,
// so pods that see every prefix keep evicting them, while a router that
// partitions them (24 per pod) keeps them all.
func contended() Workload {
	return Workload{Dataset: DatasetPrefixRepetition, NumPrompts: 768, NumPrefixes: 96, PrefixLen: 2048, SuffixLen: 64,
		OutputLen: 32, IgnoreEOS: true, MaxConcurrency: 64, Seed: 11, Replicas: 4, BlockSize: SeedBlockSize}
}

// TestVirtualPoliciesAreDeterministicAndSeparate runs the five policies
// twice on the contended workload: the same seed must give the same
// report, every request must finish, and the prefix-aware policies must
// raise the fleet's hit rate (read from the engines' counters, which no
// policy sees) and output throughput over the baseline.
func TestVirtualPoliciesAreDeterministicAndSeparate(t *testing.T) {
	w := contended()
	a, err := RunVirtual(w, AllPolicies, LiveLag(1))
	if err != nil {
		t.Fatal(err)
	}
	b, err := RunVirtual(w, AllPolicies, LiveLag(1))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("two runs with one seed differ:\n%+v\n%+v", a.Policies, b.Policies)
	}
	rr := a.Policy(PolicyRR)
	for _, s := range a.Policies {
		t.Logf("%-7s out %6.0f tok/s  mean TTFT %7.0f ms  hit %.3f  peak waiting %3d  pods %v", s.Policy,
			s.OutputThroughput, s.MeanTTFT, s.PrefixHitRate, s.PeakWaiting, s.PodRequests)
		if s.Completed != w.NumPrompts || s.OutputTokens != w.NumPrompts*w.OutputLen || len(s.TTFTs) != w.NumPrompts {
			t.Errorf("%s: %d requests, %d output tokens, want %d and %d", s.Policy, s.Completed, s.OutputTokens,
				w.NumPrompts, w.NumPrompts*w.OutputLen)
		}
	}
	for _, p := range []string{PolicyApprox, PolicyLLMD, PolicyBest} {
		s := a.Policy(p)
		if s.PrefixHitRate < rr.PrefixHitRate+0.2 || s.OutputThroughput <= rr.OutputThroughput {
			t.Errorf("%s: hit rate %.3f and %.0f tok/s against rr's %.3f and %.0f: prefix routing should add 0.2 and throughput",
				p, s.PrefixHitRate, s.OutputThroughput, rr.PrefixHitRate, rr.OutputThroughput)
		}
	}
	other := w
	other.Seed++
	c, err := RunVirtual(other, []string{PolicyRR}, LiveLag(1))
	if err != nil {
		t.Fatal(err)
	}
	if c.Policies[0].Duration == rr.Duration && c.Policies[0].MeanTTFT == rr.MeanTTFT {
		t.Error("another seed gave rr the same duration and TTFT: the seed does not reach the run")
	}
}

// TestDemoScaleVirtualStretchesTheRouterLag runs the demo workload in
// virtual mode: the report names the router lag it modelled, every
// wall-clock delay of the live router (50 ms scrapes, 10 ms events, 2 s
// speculation, the router's time per request, 5 ms between router
// replicas) stretched by the demo's time scale of 2.5, as live replicas at
// 2.5x real time experience them.
func TestDemoScaleVirtualStretchesTheRouterLag(t *testing.T) {
	rep := benchReport(t, "--mode", "virtual", "--demo-scale", "--policies", "llmd", "--router-cost", "4ms")
	want := RouterLag{Scrape: 0.125, EventDelay: 0.025, SpeculationTTL: 5, PerRequest: 0.01, PeerDelay: 0.0125}
	if rep.Lag == nil || math.Abs(rep.Lag.Scrape-want.Scrape) > 1e-9 || math.Abs(rep.Lag.EventDelay-want.EventDelay) > 1e-9 ||
		math.Abs(rep.Lag.SpeculationTTL-want.SpeculationTTL) > 1e-9 || math.Abs(rep.Lag.PerRequest-want.PerRequest) > 1e-9 ||
		math.Abs(rep.Lag.PeerDelay-want.PeerDelay) > 1e-9 {
		t.Errorf("router lag %+v, want %+v", rep.Lag, want)
	}
	if s := rep.Policy(PolicyLLMD); s == nil || s.Completed != DemoWorkload(SeedWorkload()).NumPrompts/150*150 {
		t.Errorf("llmd did not run the demo workload: %+v", s)
	}
}

// TestOracleShowsWhatTheLagCosts runs llm-d's mix on the demo workload with
// the live router's lag and with none (--oracle): without the lag its
// opening burst is placed on fresh loads and it no longer trails the
// cost-aware mix, whose scorers read only the router's own counts and so
// lose next to nothing to the lag.
func TestOracleShowsWhatTheLagCosts(t *testing.T) {
	args := []string{"--mode", "virtual", "--demo-scale", "--policies", "llmd,best"}
	lagged, oracle := benchReport(t, args...), benchReport(t, append(args, "--oracle")...)
	if l := oracle.Lag; l == nil || l.Scrape != 0.001 || l.EventDelay != 0 || l.PerRequest != 0 {
		t.Errorf("oracle lag %+v, want 1 ms scrapes, no event delay, no router time", oracle.Lag)
	}
	tput := func(r *Report, p string) float64 { return r.Policy(p).OutputThroughput }
	if l, o := tput(lagged, PolicyLLMD), tput(oracle, PolicyLLMD); o < 1.05*l {
		t.Errorf("llmd: %.0f tok/s with the lag, %.0f without: want the oracle 5%% ahead", l, o)
	}
	if l, o := tput(lagged, PolicyBest), tput(oracle, PolicyBest); math.Abs(o/l-1) > 0.02 {
		t.Errorf("best: %.0f tok/s with the lag, %.0f without: want them within 2%%", l, o)
	}
}

// benchReport runs the bench command with args and returns its JSON report.
func benchReport(t *testing.T, args ...string) *Report {
	t.Helper()
	jsonPath := filepath.Join(t.TempDir(), "report.json")
	var stderr bytes.Buffer
	if err := Command(context.Background(), append(args, "--json", jsonPath), io.Discard, &stderr); err != nil {
		t.Fatalf("bench %v: %v\n%s", args, err, stderr.String())
	}
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	return &rep
}

// TestSpeculationOutlastsTheQueue runs the demo workload with speculative
// entries that would expire long before the opening burst's queues drain
// (a 20 ms TTL against prefills that wait seconds). Held until each
// request's first token, as the live router holds them until its first
// byte, they keep every routed policy's hit rate and throughput: a prefix
// queued at a pod still draws its repeats there.
func TestSpeculationOutlastsTheQueue(t *testing.T) {
	w := DemoWorkload(SeedWorkload())
	policies := []string{PolicyLLMD, PolicyBest}
	long := LiveLag(DemoTimeScale)
	short := long
	short.SpeculationTTL = 0.02 * DemoTimeScale
	a, err := RunVirtual(w, policies, long)
	if err != nil {
		t.Fatal(err)
	}
	b, err := RunVirtual(w, policies, short)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range policies {
		l, s := a.Policy(p), b.Policy(p)
		if math.Abs(s.OutputThroughput/l.OutputThroughput-1) > 0.02 || math.Abs(s.PrefixHitRate-l.PrefixHitRate) > 0.01 {
			t.Errorf("%s: %.0f tok/s, hit %.1f%% with a %.0f s TTL; %.0f tok/s, hit %.1f%% with %.2f s: want them within 2%% and 1 point",
				p, l.OutputThroughput, 100*l.PrefixHitRate, long.SpeculationTTL, s.OutputThroughput, 100*s.PrefixHitRate, short.SpeculationTTL)
		}
	}
}
