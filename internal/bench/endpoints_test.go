package bench

import (
	"context"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
)

// TestEndpointsModeMeasuresEachPolicyAlone runs the bench against a fleet
// it did not start (simulated replicas over real HTTP, started here), two
// policies one after the other on the same engines. Each policy's figures
// must be its own: every request served once by the engines' counters
// (read as growth, so the second policy does not count the first's), a
// hit rate within the ceiling the engines' stated caches allow, and the
// ceiling the workload's shape gives (8 prompts per prefix: 7 repeats of
// the prefix's 8 full blocks in 9 blocks of prompt, the last always
// computed).
func TestEndpointsModeMeasuresEachPolicyAlone(t *testing.T) {
	ec := sim.DefaultEngineConfig()
	ec.BlockSize, ec.NumGPUBlocks = 64, 400
	fleet, err := sim.StartFleet(sim.FleetConfig{Replica: sim.ReplicaConfig{Model: "m", Engine: ec, TimeScale: 20,
		Form: kvevents.FormMap}, Replicas: 2, Host: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	defer fleet.Start(ctx)()
	ep := Endpoints{Engines: []string{fleet.Infos[0].HTTP, fleet.Infos[1].HTTP}}
	w := Workload{Dataset: DatasetPrefixRepetition, NumPrompts: 32, NumPrefixes: 4, PrefixLen: 512, SuffixLen: 64,
		OutputLen: 4, IgnoreEOS: true, MaxConcurrency: 4, Seed: 3, Prompts: PromptsTokens, BlockSize: 64}
	opts := DefaultLiveOptions()
	opts.Model = "m"
	rep, err := RunEndpoints(ctx, w, []string{PolicyRR, PolicyRandom}, ep, opts, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Caches == nil || *rep.Caches != (EngineCaches{Blocks: 800, BlockSize: 64}) {
		t.Errorf("caches %+v, want the two engines' 400 blocks of 64 tokens", rep.Caches)
	}
	if p := rep.Probe; p == nil || p.UncachedMS <= 0 || p.CachedMS <= 0 || p.CachedShare != 512.0/576 {
		t.Errorf("prefill probe %+v, want both times and a cached share of 512/576", p)
	}
	want := 28.0 * 512 / (32 * 576)
	for _, s := range rep.Policies {
		served := 0
		for _, n := range s.PodRequests {
			served += n
		}
		if s.Completed != w.NumPrompts || served != w.NumPrompts {
			t.Errorf("%s: %d completed, engines counted %d (pods %v); want %d each", s.Policy, s.Completed, served, s.PodRequests, w.NumPrompts)
		}
		if math.Abs(s.HitCeiling-want) > 1e-9 {
			t.Errorf("%s: ceiling %.4f, want %.4f", s.Policy, s.HitCeiling, want)
		}
		if s.PrefixHitRate <= 0 || s.PrefixHitRate > s.HitCeiling+1e-9 {
			t.Errorf("%s: hit rate %.4f, want above 0 and within the ceiling %.4f", s.Policy, s.PrefixHitRate, s.HitCeiling)
		}
	}
}

// TestEndpointsModeNamesBadInput: every wrong flag is named with its fix,
// all at once, before anything is sent.
func TestEndpointsModeNamesBadInput(t *testing.T) {
	w := SeedWorkload()
	_, err := RunEndpoints(context.Background(), w, []string{PolicyRouter, PolicyBest},
		Endpoints{Engines: []string{"10.0.0.1:8000"}}, DefaultLiveOptions(), io.Discard)
	for _, want := range []string{`--engines: "10.0.0.1:8000" is not a base URL`, "--router-urls: the router policy needs",
		`--policies: "best" does not run against given endpoints`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v, want it to say %q", err, want)
		}
	}
}

// TestHitCeilingEvictsWhatDoesNotFit: with room for every prefix the
// ceiling is each prefix computed once; with room for fewer blocks than
// two prompts, a prompt of the other prefix evicts everything.
func TestHitCeilingEvictsWhatDoesNotFit(t *testing.T) {
	work, err := sim.PrefixRepetition{NumPrefixes: 2, PrefixLen: 256, SuffixLen: 64, OutputLen: 1, NumPrompts: 8, Seed: 1}.Build()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := hitCeiling(work, EngineCaches{Blocks: 100, BlockSize: 64}), 6.0*256/(8*320); math.Abs(got-want) > 1e-9 {
		t.Errorf("ample cache: ceiling %.4f, want %.4f", got, want)
	}
	// Room for 5 blocks holds one prompt's (4 of prefix, 1 of suffix): a
	// prompt finds its prefix only right after a prompt of the same prefix.
	var prev, cur []uint32
	hits := 0
	for i := range work.Len() {
		cur = work.Prompt(i, nil)
		if prev != nil && slices.Equal(prev[:256], cur[:256]) {
			hits += 256
		}
		prev = cur
	}
	if got, want := hitCeiling(work, EngineCaches{Blocks: 5, BlockSize: 64}), float64(hits)/(8*320); math.Abs(got-want) > 1e-9 {
		t.Errorf("5 blocks of room: ceiling %.4f, want %.4f", got, want)
	}
}
