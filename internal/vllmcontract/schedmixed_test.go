package vllmcontract

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// mixedPoint is one measured mixed step: Decodes streams decoding at a
// mean context of Context while a fresh prompt of Chunk tokens prefills.
type mixedPoint struct {
	Decodes, Context, Chunk int
	// Measured is the decoders' gap across the step, Priced the table's
	// price of that shape, in seconds.
	Measured, Priced float64
}

// mixedPoints are the mixed steps measured to check how the table prices
// a step of several parts (never the trace's steps: the engine is alone).
var mixedPoints = []struct{ decodes, prompt, chunk int }{{4, 96, 256}, {4, 96, 1024}, {4, 96, 2040}, {8, 480, 1024}}

// measureMixed measures each mixed point: the decoders start, and once
// they decode a fresh prompt is sent; the step that prefills it is the one
// whose output reaches the decoders with its first token.
func measureMixed(t testing.TB, e *testenv.Engine, tab sim.CostTable) []mixedPoint {
	t.Helper()
	var out []mixedPoint
	for _, p := range mixedPoints {
		streams := make([]streamed, p.decodes)
		errs := make([]error, p.decodes)
		var wg sync.WaitGroup
		for i := range p.decodes {
			costSeed++
			prompt := tokenPrompt(costSeed, p.prompt)
			wg.Add(1)
			go func() { defer wg.Done(); streams[i], errs[i] = streamCompletion(e.URL, prompt, decodeOutput) }()
		}
		// The decoders' prefills take a step or two of ~20-60 ms; by 400 ms
		// they decode, with most of their 64 tokens still to come.
		time.Sleep(400 * time.Millisecond)
		costSeed++
		pre, err := streamCompletion(e.URL, tokenPrompt(costSeed, p.chunk), 1)
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		first := pre.Chunks[0].At
		var gaps []float64
		ctx := 0.0
		for i, s := range streams {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			k := nearestChunk(s, first)
			if k == 0 || k == len(s.Chunks)-1 {
				t.Fatalf("mixed point %+v: the prefill did not land while stream %d decoded", p, i)
			}
			gaps = append(gaps, s.Chunks[k].At.Sub(s.Chunks[k-1].At).Seconds())
			ctx += float64(p.prompt + s.Chunks[k].Tokens)
		}
		ctx /= float64(p.decodes)
		shape := sim.StepShape{Decodes: p.decodes, DecodeContext: ctx * float64(p.decodes), Chunks: []sim.Chunk{{Tokens: p.chunk}}}
		out = append(out, mixedPoint{Decodes: p.decodes, Context: int(math.Round(ctx)), Chunk: p.chunk,
			Measured: median(gaps), Priced: tab.StepTime(&shape)})
	}
	return out
}

// nearestChunk is the index of s's chunk that arrived nearest to at.
func nearestChunk(s streamed, at time.Time) int {
	best := 0
	for k, c := range s.Chunks {
		if c.At.Sub(at).Abs() < s.Chunks[best].At.Sub(at).Abs() {
			best = k
		}
	}
	return best
}

// mixedMarkdown renders the mixed steps, measured against priced.
func mixedMarkdown(ps []mixedPoint) string {
	var b strings.Builder
	b.WriteString("| decodes | mean context | prefill chunk | measured ms | table's price ms (err) |\n|---|---|---|---|---|\n")
	for _, p := range ps {
		fmt.Fprintf(&b, "| %d | %d | %d | %.2f | %.2f (%+.1f%%) |\n", p.Decodes, p.Context, p.Chunk, 1e3*p.Measured, 1e3*p.Priced,
			pctErr(p.Priced, p.Measured))
	}
	return b.String()
}
