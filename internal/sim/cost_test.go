package sim

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestStepCostAtKnownShapes prices three step shapes with DefaultCost and
// compares them with the figures worked by hand from the sourced
// parameters (doc.go, "Cost model"): 13.06 GFLOP per token, 1.09 GFLOP
// per sample, 401,408 FLOP per attention pair at 125 TFLOPS x 0.48; 15.22
// GB of weights and 57,344 B per context token at 600 GB/s x 0.77; 0.1 ms
// per scheduled sequence.
func TestStepCostAtKnownShapes(t *testing.T) {
	c := DefaultCost()
	for _, tc := range []struct {
		name  string
		shape StepShape
		// want is hand-computed: max(compute, memory) + seqs x 0.1 ms.
		want float64
	}{{
		// 64 sequences decoding one token each after 2,304 context tokens:
		// memory (15.22e9 + 57,344 x 2,305 x 64) / 462e9 = 51.254 ms beats
		// compute 16.080 ms; + 6.4 ms of per-sequence host time.
		name:  "decode 64 x 2,305",
		shape: StepShape{Seqs: 64, Tokens: 64, Samples: 64, Pairs: 64 * 2305, KVTokens: 64 * 2305},
		want:  0.051254084155844155 + 0.0064,
	}, {
		// A 2,048-token prefill chunk of a fresh prompt: compute
		// (13.06e9 x 2,048 + 401,408 x 2,048 x 2,049 / 2) / 60e12 = 459.818 ms.
		name:  "prefill chunk 2,048",
		shape: StepShape{Seqs: 1, Tokens: 2048, Pairs: 2048 * 2049 / 2, KVTokens: 2048},
		want:  0.45981841053013334 + 0.0001,
	}, {
		// One sequence decoding at 2,176 tokens: the weights alone, 33.21 ms,
		// 77% of the datasheet roofline as vLLM measures at batch 1.
		name:  "decode 1 x 2,176",
		shape: StepShape{Seqs: 1, Tokens: 1, Samples: 1, Pairs: 2176, KVTokens: 2176},
		want:  0.0332138107012987 + 0.0001,
	}} {
		if got := c.StepTime(&tc.shape); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("%s: %.6f s, want %.6f s", tc.name, got, tc.want)
		}
	}
}

// TestEngineStepShape checks that the engine prices the step it schedules:
// 8 requests of 2,112 prompt tokens go through chunked prefill, then every
// step is a decode step of all 8, whose cost is the decode shape priced
// from each request's context.
func TestEngineStepShape(t *testing.T) {
	ec := SeedEngineConfig()
	e, err := NewEngine(ec)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var reqs []*Request
	for i := range 8 {
		r := &Request{ID: uint64(i), Prompt: randomTokens(rng, make([]uint32, 2112)), MaxTokens: 64}
		if err := e.Add(r); err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, r)
	}
	var now float64
	for slices.ContainsFunc(reqs, func(r *Request) bool { return r.Output == 0 }) {
		d, ok := e.Schedule()
		if !ok {
			t.Fatal("engine idle before every request decodes")
		}
		now += d
		e.Finish(now)
	}
	want := StepShape{Seqs: 8, Tokens: 8, Samples: 8, Decodes: 8}
	for _, r := range reqs {
		want.Pairs += float64(r.computed + 1)
		want.KVTokens += float64(r.computed + 1)
		want.DecodeContext += float64(r.computed + 1)
	}
	d, ok := e.Schedule()
	if !ok {
		t.Fatal("no decode step")
	}
	if w := ec.Cost.StepTime(&want); math.Abs(d-w) > 1e-12 {
		t.Errorf("decode step of 8 costs %.6f s, want %.6f s", d, w)
	}
}
