package bench

import (
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
)

// buildRouter builds llmd-router, whose serve command live mode runs.
func buildRouter(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "llmd-router")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/llmd-dev/terraform-provider-llmd/router/cmd/llmd-router")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building llmd-router: %v\n%s", err, out)
	}
	return bin
}

// TestLiveModeThroughRouterProcess runs live mode end to end on a small
// workload: simulated replicas over real HTTP and ZeroMQ, rr placed by the
// client (connections pinned to random pods), llmd through a real
// `llmd-router serve` process that learns the caches from KV events. Every
// request must stream back its tokens, the replicas' counters must show
// the precise router keeping each prefix on one pod (8 misses of 8
// prefixes) where pinned connections spread them, and the run must report
// its time scale and lag. Prompts are text, so the router and the replicas
// tokenize every one.
func TestLiveModeThroughRouterProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds llmd-router and runs live replicas (~1 min)")
	}
	tok := testenv.Tokenizer(t, "qwen3")
	w := Workload{Dataset: DatasetPrefixRepetition, NumPrompts: 64, NumPrefixes: 8, PrefixLen: 1024, SuffixLen: 32,
		OutputLen: 16, IgnoreEOS: true, MaxConcurrency: 4, Seed: 5, Replicas: 4, Prompts: PromptsText, BlockSize: 16}
	opts := DefaultLiveOptions()
	opts.TimeScale, opts.MaxLag, opts.Router = 5, 1, buildRouter(t)
	opts.Tokenizer = config.Tokenizer{JSON: tok.TokenizerJSON, Config: tok.TokenizerConfig}
	// The KV bound on, as the provider deploys it: one class, so it holds
	// nothing back, but the replicas tell each other every request's
	// demand.
	opts.RouterArgs = []string{"--kv-output-reserve=1024"}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := RunLive(ctx, w, []string{PolicyRR, PolicyLLMD, PolicyBest + routersSep + "2"}, opts, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rep.Policies {
		t.Logf("%-5s out %.0f tok/s  mean TTFT %.0f ms  ITL %.1f ms  hit %.3f  pods %v", s.Policy, s.OutputThroughput,
			s.MeanTTFT, s.MeanITL, s.PrefixHitRate, s.PodRequests)
		if s.Completed != w.NumPrompts || s.Failed != 0 || s.OutputTokens != w.NumPrompts*w.OutputLen {
			t.Errorf("%s: %d completed, %d failed, %d output tokens; want %d, 0, %d", s.Policy, s.Completed, s.Failed,
				s.OutputTokens, w.NumPrompts, w.NumPrompts*w.OutputLen)
		}
		// Behind two router processes, both report their decisions.
		if n := Routers(s.Policy); n > 1 && (len(s.RouterRequests) != n || s.RouterRequests[0]+s.RouterRequests[1] != w.NumPrompts) {
			t.Errorf("%s: router decisions %v, want %d counts summing to %d", s.Policy, s.RouterRequests, n, w.NumPrompts)
		}
		// ... and each holds the other's decisions (every decision of a
		// tokenized prompt writes entries), the peer exchange on.
		if Routers(s.Policy) > 1 && s.Router["peer_speculations"] != float64(w.NumPrompts) {
			t.Errorf("%s: the replicas held %v of each other's %d decisions", s.Policy, s.Router["peer_speculations"], w.NumPrompts)
		}
		// ... and count each other's requests under the KV bound.
		if Routers(s.Policy) > 1 && s.Router["peer_kv_demands"] != float64(w.NumPrompts) {
			t.Errorf("%s: the replicas counted %v of each other's %d requests' KV demands", s.Policy, s.Router["peer_kv_demands"], w.NumPrompts)
		}
		if s.MeanITL <= 0 || s.MeanTTFT <= 0 || s.PeakOutputThroughput <= 0 {
			t.Errorf("%s: streamed timings missing: %+v", s.Policy, s)
		}
		served := 0
		for _, n := range s.PodRequests {
			served += n
		}
		if served != w.NumPrompts {
			t.Errorf("%s: replicas counted %d successes, want %d", s.Policy, served, w.NumPrompts)
		}
	}
	rr, llmd := rep.Policy(PolicyRR), rep.Policy(PolicyLLMD)
	// 64 prompts of 1,056 tokens, 16-token blocks: a first sight of a prefix
	// on a pod computes 1,056 tokens, a repeat 32 (suffix) + 1 if aligned. One
	// miss per prefix gives about 1 - (8 x 1,056 + 56 x 32) / 67,584 = 0.85.
	if llmd.PrefixHitRate < 0.8 || llmd.PrefixHitRate <= rr.PrefixHitRate {
		t.Errorf("llmd hit rate %.3f (rr %.3f): the router should keep each prefix on one pod", llmd.PrefixHitRate, rr.PrefixHitRate)
	}
	if rep.Live == nil || rep.Live.TimeScale != 5 || rep.Live.WallSeconds <= 0 {
		t.Errorf("live info: %+v", rep.Live)
	}
	// The ceiling is a virtual run of the same workload without router lag:
	// a live router on four replicas gets most of it and not much more.
	if c := rep.Ceiling; c == nil || c.OutputThroughput <= 0 {
		t.Errorf("no ceiling of routing: %+v", c)
	} else if share := llmd.OutputThroughput / c.OutputThroughput; share < 0.5 || share > 1.2 {
		t.Errorf("llmd reached %.2f of the ceiling (%.0f tok/s, %s)", share, c.OutputThroughput, c.Policy)
	} else {
		t.Logf("llmd reached %.2f of the ceiling (%.0f tok/s, %s)", share, c.OutputThroughput, c.Policy)
	}
}

// TestLiveMultiTurnChat runs the multi-turn workload through the router:
// every turn is a chat request carrying the whole conversation so far, the
// router renders it with the model's chat template, and since each turn
// extends the previous one (reply included), each conversation stays on one
// pod and most of every later turn's prompt is a cache hit.
func TestLiveMultiTurnChat(t *testing.T) {
	if testing.Short() {
		t.Skip("builds llmd-router and runs live replicas")
	}
	tok := testenv.Tokenizer(t, "qwen3")
	w := Workload{Dataset: DatasetMultiTurn, NumPrompts: 24, NumPrefixes: 6, PrefixLen: 512, SuffixLen: 64,
		OutputLen: 32, IgnoreEOS: true, MaxConcurrency: 6, Seed: 7, Replicas: 3, Prompts: PromptsText, BlockSize: 64}
	opts := DefaultLiveOptions()
	opts.TimeScale, opts.MaxLag, opts.Router = 5, 1, buildRouter(t)
	opts.Tokenizer = config.Tokenizer{JSON: tok.TokenizerJSON, Config: tok.TokenizerConfig}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := RunLive(ctx, w, []string{PolicyLLMD}, opts, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Policies[0]
	t.Logf("out %.0f tok/s  mean TTFT %.0f ms  hit %.3f  pods %v  router %v", s.OutputThroughput, s.MeanTTFT,
		s.PrefixHitRate, s.PodRequests, s.Router)
	if s.Completed != w.NumPrompts || s.Failed != 0 {
		t.Fatalf("%d completed, %d failed; want %d, 0", s.Completed, s.Failed, w.NumPrompts)
	}
	if s.Router["untokenizable"] != 0 || s.Router["decisions"] != float64(w.NumPrompts) {
		t.Errorf("router counters %v: every turn should be rendered and routed on its tokens", s.Router)
	}
	// Turn t (0-based) of 4 resends about 512 + t x (64 + 32) tokens plus the
	// template's; all but the newest user message was computed by the
	// previous turn on the same pod: about (0 + 579 + 675 + 771) / (590 +
	// 686 + 782 + 878) = 0.69 at best, less the blocks the reply's re-encoding
	// and the template's turn markers break.
	if s.PrefixHitRate < 0.5 {
		t.Errorf("hit rate %.3f: later turns should find their conversation on the pod that served it", s.PrefixHitRate)
	}
	if s.PodsOverTime == nil || len(s.PodsOverTime.T) == 0 || len(s.PodsOverTime.Pods) != w.Replicas {
		t.Errorf("no per-pod series in the report: %+v", s.PodsOverTime)
	}
	if rep.Ceiling != nil {
		t.Errorf("a ceiling %+v for a workload virtual time cannot run", rep.Ceiling)
	}
}
