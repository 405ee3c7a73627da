package vllmcontract

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
)

// The cost table's sample points. Prefill: a chunk of x tokens after y
// cached ones, each a single request on the idle engine (x up to the
// engine's token budget, x + y and the one output token within the
// 4,096-token context). Decode: x streams decoding together at a mean
// context of y (prompt y - 32, 64 output tokens).
var (
	prefillTokens  = []float64{64, 256, 1024, 2048}
	prefillContext = []float64{0, 1024, 1984}
	decodeBatch    = []float64{1, 2, 4, 8, 16}
	decodeContext  = []float64{96, 1024, 3008}
)

// tableBlocks is the table engine's KV cache in blocks: 16 streams at
// 3,040 tokens need 760. A step's cost does not depend on how many blocks
// the cache has, only on what the step reads; the trace's engine keeps
// the fleet's poolBlocks.
const tableBlocks = 1024

// tableFleet is the fleet's engine with room for the table's largest
// decode batch.
func tableFleet() workloads.Fleet {
	f := testFleet()
	f.VLLM.ExtraArgs = []string{"--enforce-eager", "--num-gpu-blocks-override", strconv.Itoa(tableBlocks)}
	return f
}

// decodeOutput is each decode stream's output length.
const decodeOutput = 64

// tableRepeats is how often each prefill point is measured (the median counts).
const tableRepeats = 5

// costSeed numbers the microbenchmarks' prompts, apart from the trace's.
var costSeed uint64 = 1 << 40

// tableRun is the measured table and what the measurement saw beside it.
type tableRun struct {
	Table sim.CostTable
	// Overhead is the mean of client TTFT less the engine's own prefill
	// time over the prefill points: the API server's share of a TTFT.
	Overhead float64
}

// measureCostTable measures the engine's step costs with microbenchmarks
// (never the trace): prefill from the engine's own prefill-time histogram,
// one request at a time; decode from the gaps between streamed tokens
// while every stream of a batch decodes.
func measureCostTable(t testing.TB, e *testenv.Engine) tableRun {
	t.Helper()
	var run tableRun
	warmUp(t, e)
	run.Table.Prefill = sim.Grid{X: prefillTokens, Y: prefillContext}
	var over []float64
	for _, n := range prefillTokens {
		var row []float64
		for _, c := range prefillContext {
			var times []float64
			for range tableRepeats {
				engine, client := measurePrefill(t, e, int(n), int(c))
				times = append(times, engine)
				over = append(over, client-engine)
			}
			row = append(row, median(times))
		}
		run.Table.Prefill.V = append(run.Table.Prefill.V, row)
	}
	run.Overhead = mean(over)
	run.Table.Decode = sim.Grid{X: decodeBatch, Y: decodeContext}
	for _, b := range decodeBatch {
		var row []float64
		for _, c := range decodeContext {
			row = append(row, measureDecode(t, e, int(b), int(c)-decodeOutput/2))
		}
		run.Table.Decode.V = append(run.Table.Decode.V, row)
	}
	if err := run.Table.Validate(); err != nil {
		t.Fatal(err)
	}
	return run
}

// warmUp runs a few requests of each kind first: an engine's first
// requests of a shape are slower than the rest.
func warmUp(t testing.TB, e *testenv.Engine) {
	t.Helper()
	for _, n := range prefillTokens {
		costSeed++
		complete(t, e.URL, tokenPrompt(costSeed, int(n)), 1)
	}
	measureDecode(t, e, 4, 512)
}

// measurePrefill times one prefill chunk of n fresh tokens after a cached
// prefix of c: the engine's prefill time of that request (its own
// histogram's sum moves by exactly it) and the client's TTFT.
func measurePrefill(t testing.TB, e *testenv.Engine, n, c int) (engine, client float64) {
	t.Helper()
	costSeed++
	prompt := tokenPrompt(costSeed, c+n)
	if c > 0 {
		complete(t, e.URL, prompt[:c], 1)
	}
	sum0, count0 := histogram(t, e.URL, "vllm:request_prefill_time_seconds")
	hits0 := series(t, e.URL, "vllm:prefix_cache_hits_total", nil)
	s, err := streamCompletion(e.URL, prompt, 1)
	if err != nil {
		t.Fatal(err)
	}
	sum1, count1 := histogram(t, e.URL, "vllm:request_prefill_time_seconds")
	if count1-count0 != 1 {
		t.Fatalf("prefill of %d after %d: the histogram counted %v requests, not 1", n, c, count1-count0)
	}
	if hit := series(t, e.URL, "vllm:prefix_cache_hits_total", nil) - hits0; int(hit) != c {
		t.Fatalf("prefill of %d after %d: the engine reused %v cached tokens", n, c, hit)
	}
	return sum1 - sum0, s.ttft()
}

// measureDecode runs b streams of fresh c-token prompts at once and
// returns the mean time between tokens while all of them decode: after
// the last one's first token, before the first one's last.
func measureDecode(t testing.TB, e *testenv.Engine, b, c int) float64 {
	t.Helper()
	streams := make([]streamed, b)
	errs := make([]error, b)
	var wg sync.WaitGroup
	for i := range b {
		costSeed++
		prompt := tokenPrompt(costSeed, c)
		wg.Add(1)
		go func() { defer wg.Done(); streams[i], errs[i] = streamCompletion(e.URL, prompt, decodeOutput) }()
	}
	wg.Wait()
	var from, to time.Time
	for i, s := range streams {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if i == 0 || s.Chunks[0].At.After(from) {
			from = s.Chunks[0].At
		}
		if i == 0 || s.done().Before(to) {
			to = s.done()
		}
	}
	var perToken []float64
	for _, s := range streams {
		for k := 1; k < len(s.Chunks); k++ {
			a, z := s.Chunks[k-1], s.Chunks[k]
			if !a.At.Before(from) && !z.At.After(to) {
				perToken = append(perToken, z.At.Sub(a.At).Seconds()/float64(z.Tokens-a.Tokens))
			}
		}
	}
	if len(perToken) < decodeOutput/2 {
		t.Fatalf("decode of %d at %d: only %d gaps while all %d streams decoded", b, c, len(perToken), b)
	}
	// The median: a step the machine's other work stretched is not the engine's.
	return median(perToken)
}

// histogram is a histogram family's sum and count on url's /metrics, over
// all its label sets.
func histogram(t testing.TB, url, name string) (sum, count float64) {
	t.Helper()
	for _, m := range family(t, url, name).GetMetric() {
		h := m.GetHistogram()
		if h == nil {
			t.Fatalf("%s/metrics: %s is not a histogram", url, name)
		}
		sum += h.GetSampleSum()
		count += float64(h.GetSampleCount())
	}
	return sum, count
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	total := 0.0
	for _, x := range xs {
		total += x
	}
	return total / float64(len(xs))
}

// markdown renders the table in milliseconds.
func (r tableRun) markdown() string {
	var b strings.Builder
	grid := func(title, x, y string, g sim.Grid) {
		fmt.Fprintf(&b, "%s (ms; rows: %s, columns: %s)\n\n| %s \\ %s |", title, x, y, x, y)
		for _, v := range g.Y {
			fmt.Fprintf(&b, " %g |", v)
		}
		b.WriteString("\n|---|")
		for range g.Y {
			b.WriteString("---|")
		}
		for i, v := range g.X {
			fmt.Fprintf(&b, "\n| %g |", v)
			for _, s := range g.V[i] {
				fmt.Fprintf(&b, " %.2f |", 1e3*s)
			}
		}
		b.WriteString("\n\n")
	}
	grid("prefill step", "chunk tokens", "cached context", r.Table.Prefill)
	grid("decode step", "sequences", "mean context", r.Table.Decode)
	fmt.Fprintf(&b, "fixed step cost (decode grid at batch 0): %.2f ms; client TTFT less engine prefill time at idle: %.2f ms\n",
		1e3*r.Table.Base(), 1e3*r.Overhead)
	return b.String()
}
