package vllmcontract

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/bench"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
)

// abRun runs the bench against the pool's two engines and a router with
// the default configuration in front of them, round robin first.
func abRun(t testing.TB, w bench.Workload, progress io.Writer) bench.Report {
	t.Helper()
	es := engines(t)
	routerURL, _ := startRouter(t, routerConfig(t, testFleet(), es))
	model := testenv.VLLM(t).Model
	opts := bench.DefaultLiveOptions()
	opts.Model = servedName
	opts.Tokenizer = config.Tokenizer{JSON: filepath.Join(model, "tokenizer.json"), Config: filepath.Join(model, "tokenizer_config.json")}
	ep := bench.Endpoints{Routers: []string{routerURL}}
	for _, e := range es {
		ep.Engines = append(ep.Engines, e.URL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	rep, err := bench.RunEndpoints(ctx, w, []string{bench.PolicyRR, bench.PolicyRouter}, ep, opts, progress)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// abWorkload is a prefix-repetition workload of text prompts: prefixes
// prefixes of prefixLen tokens, 128-token suffixes, prompts per prefix.
func abWorkload(prefixes, prefixLen, perPrefix, outputLen, concurrency int) bench.Workload {
	return bench.Workload{Dataset: bench.DatasetPrefixRepetition, NumPrefixes: prefixes, PrefixLen: prefixLen,
		SuffixLen: 128, NumPrompts: prefixes * perPrefix, OutputLen: outputLen, IgnoreEOS: true,
		MaxConcurrency: concurrency, Seed: 7, Prompts: bench.PromptsText, BlockSize: testFleet().VLLM.BlockSize}
}

// TestBenchAgainstRealEngines runs the bench's mode against given endpoints
// on real engines: every request answered and counted once by the engines
// themselves, for each policy in turn on the same engines; the router's
// hit rate, as the engines count it, at least 0.9 of the ceiling its
// prompts allow on the engines' stated caches, and at least round robin's.
// Six prefixes of 1,024 tokens fit one engine, so the ceiling is each
// prefix computed once. Eight prompts a prefix, not fewer: in the opening,
// while new prefixes' prefills are pending, the cost scorer may send a
// prompt to the idle engine rather than behind them (a faster first token,
// at the price of computing the prefix twice), and on a loaded machine,
// where the engines answer late, it does so once or twice a run. Those
// spills are few and fixed in number; each repeat after them is a hit, so
// with eight a prefix two spills still leave the router above 0.9 of the
// ceiling, where with four (a CI run, 2026-12-07: 0.593 of 0.667, the
// engines' requests 10 and 14) they did not.
func TestBenchAgainstRealEngines(t *testing.T) {
	w := abWorkload(6, 1024, 8, 4, 4)
	rep := abRun(t, w, io.Discard)
	if rep.Caches == nil || rep.Caches.Blocks != 2*poolBlocks || rep.Caches.BlockSize != testFleet().VLLM.BlockSize {
		t.Errorf("caches %+v, want the engines' stated %d blocks of %d tokens", rep.Caches, 2*poolBlocks, testFleet().VLLM.BlockSize)
	}
	if p := rep.Probe; p == nil || p.UncachedMS <= p.CachedMS {
		t.Errorf("prefill probe %+v: a cached prefix should shorten the engine's prefill", p)
	}
	for _, s := range rep.Policies {
		t.Logf("%-6s hit %.3f of ceiling %.3f, mean TTFT %.0f ms, pods %v, router %v", s.Policy, s.PrefixHitRate, s.HitCeiling, s.MeanTTFT, s.PodRequests, s.Router)
		served := 0
		for _, n := range s.PodRequests {
			served += n
		}
		if s.Completed != w.NumPrompts || s.Failed != 0 || served != w.NumPrompts {
			t.Errorf("%s: %d completed, %d failed, the engines counted %d; want %d, 0, %d", s.Policy, s.Completed, s.Failed,
				served, w.NumPrompts, w.NumPrompts)
		}
	}
	rr, router := rep.Policy(bench.PolicyRR), rep.Policy(bench.PolicyRouter)
	if router.PrefixHitRate < 0.9*router.HitCeiling || router.PrefixHitRate < rr.PrefixHitRate {
		t.Errorf("router hit rate %.3f (ceiling %.3f, rr %.3f): want at least 0.9 of the ceiling and rr's",
			router.PrefixHitRate, router.HitCeiling, rr.PrefixHitRate)
	}
	if d := router.Router["decisions"]; d != float64(w.NumPrompts) {
		t.Errorf("the router counted %.0f decisions over its run, want %d", d, w.NumPrompts)
	}
}

// BenchmarkABOnRealEngines is the A/B on real vLLM (CPU, tiny model):
// round robin against the router's default on two engines, twelve
// prefixes of 2,048 tokens that fit both engines' caches but not one's.
// `make demo-vllm` runs it; the table goes to stdout and the JSON report to
// $LLMD_BENCH_JSON when set.
func BenchmarkABOnRealEngines(b *testing.B) {
	w := abWorkload(12, 2048, 12, 16, 8)
	for range b.N {
		rep := abRun(b, w, os.Stderr)
		if err := bench.WriteTable(os.Stdout, rep); err != nil {
			b.Fatal(err)
		}
		if err := bench.WriteCeiling(os.Stdout, rep); err != nil {
			b.Fatal(err)
		}
		if path := os.Getenv("LLMD_BENCH_JSON"); path != "" {
			out, err := json.MarshalIndent(rep, "", "  ")
			if err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(path, append(out, '\n'), 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
}
