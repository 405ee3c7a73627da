package sim

import (
	"math"
	"testing"
)

// testTable is a cost table whose grids are linear, so interpolation and
// extrapolation are exact: prefill 10 ms + 0.1 ms a token + 0.01 ms per
// 100 context tokens; decode 10 ms + 1 ms a sequence + 0.001 ms per
// token of mean context.
func testTable() CostTable {
	pre := func(n, c float64) float64 { return 0.010 + 1e-4*n + 1e-7*c }
	dec := func(b, c float64) float64 { return 0.010 + 1e-3*b + 1e-6*c }
	t := CostTable{Prefill: Grid{X: []float64{64, 512, 2048}, Y: []float64{0, 1024}},
		Decode: Grid{X: []float64{1, 4, 16}, Y: []float64{128, 2048}}}
	for _, n := range t.Prefill.X {
		var row []float64
		for _, c := range t.Prefill.Y {
			row = append(row, pre(n, c))
		}
		t.Prefill.V = append(t.Prefill.V, row)
	}
	for _, b := range t.Decode.X {
		var row []float64
		for _, c := range t.Decode.Y {
			row = append(row, dec(b, c))
		}
		t.Decode.V = append(t.Decode.V, row)
	}
	return t
}

// TestCostTablePricesParts checks the table's step prices: a lone part is
// its row, interpolated or extrapolated; a mixed step is its parts with
// the fixed cost once.
func TestCostTablePricesParts(t *testing.T) {
	tab := testTable()
	if err := tab.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		shape StepShape
		want  float64
	}{
		{"prefill inside the grid", StepShape{Chunks: []Chunk{{Tokens: 1000, Context: 512}}}, 0.010 + 0.1 + 512e-7},
		{"prefill beyond the context measured", StepShape{Chunks: []Chunk{{Tokens: 64, Context: 3072}}}, 0.010 + 0.0064 + 3072e-7},
		{"decode of 8 at 1,088", StepShape{Decodes: 8, DecodeContext: 8 * 1088}, 0.010 + 0.008 + 1088e-6},
		{"decode beyond the batch measured", StepShape{Decodes: 32, DecodeContext: 32 * 128}, 0.010 + 0.032 + 128e-6},
		// Base: the decode grid at batch 0, context 128: 10.128 ms.
		{"two chunks and 4 decodes", StepShape{Decodes: 4, DecodeContext: 4 * 128,
			Chunks: []Chunk{{Tokens: 512}, {Tokens: 64, Context: 1024}}},
			(0.010 + 0.0512) + (0.010 + 0.0064 + 1024e-7) + (0.010 + 0.004 + 128e-6) - 2*(0.010+128e-6)},
	} {
		if got := tab.StepTime(&tc.shape); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: %.9f s, want %.9f s", tc.name, got, tc.want)
		}
	}
}

// TestCostTableRefusesBadGrids checks Validate's refusals.
func TestCostTableRefusesBadGrids(t *testing.T) {
	for name, edit := range map[string]func(*CostTable){
		"unsorted points": func(c *CostTable) { c.Prefill.X[1] = 64 },
		"short row":       func(c *CostTable) { c.Decode.V[2] = c.Decode.V[2][:1] },
		"no points":       func(c *CostTable) { c.Decode.Y = nil },
	} {
		tab := testTable()
		edit(&tab)
		if tab.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestCostTableBaseIsTheColumnsTrend checks the fixed step cost on a
// noisy column: the least-squares line through every batch size, not the
// first two cells' extrapolation (which would give 14 ms here).
func TestCostTableBaseIsTheColumnsTrend(t *testing.T) {
	tab := CostTable{Decode: Grid{X: []float64{1, 2, 4, 8}, Y: []float64{100}, V: [][]float64{{0.012}, {0.010}, {0.013}, {0.017}}}}
	// x mean 3.75, y mean 13 ms; slope = sum dx*dy / sum dx^2 = 0.025 / 28.75.
	slope := 0.025 / 28.75
	if got, want := tab.Base(), 0.013-slope*3.75; math.Abs(got-want) > 1e-12 {
		t.Errorf("base %.6f s, want %.6f s", got, want)
	}
}
