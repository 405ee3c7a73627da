package sim

import (
	"fmt"
	"slices"
)

// CostTable prices a step from step times measured on one engine in
// isolation, interpolated: data in place of the roofline's datasheet
// figures and fitted parameters. It separates the scheduler's structure
// from the hardware's cost, since a replica priced by its engine's own
// table differs from that engine only where its scheduling does.
//
// A step is priced part by part: each prefill chunk as a Prefill row, the
// decodes together as a Decode row, and, since every measured row holds
// one step's fixed cost, the fixed cost Base taken once per step rather
// than once per part.
type CostTable struct {
	// Prefill is the time of a step computing one request's prefill chunk
	// of x prompt tokens after y tokens already in its KV cache.
	Prefill Grid
	// Decode is the time of a step of x sequences each decoding one token
	// at a mean context of y tokens.
	Decode Grid
}

// Grid is a function of two variables sampled on a grid, interpolated
// bilinearly and extrapolated linearly from its edge cells.
type Grid struct {
	// X and Y are the sample points, increasing; V[i][j] is the value at
	// (X[i], Y[j]), in seconds.
	X, Y []float64
	V    [][]float64
}

// Validate reports whether the table's grids are usable.
func (t CostTable) Validate() error {
	if err := t.Prefill.validate(); err != nil {
		return fmt.Errorf("cost table's prefill grid: %w", err)
	}
	if err := t.Decode.validate(); err != nil {
		return fmt.Errorf("cost table's decode grid: %w", err)
	}
	return nil
}

// Base is a step's fixed cost: the decode grid's smallest-context column
// extrapolated to a batch of none along its least-squares line (every
// batch size weighs in, so no one noisy cell decides it).
func (t CostTable) Base() float64 {
	g := t.Decode
	if len(g.X) == 1 {
		return g.V[0][0]
	}
	var sx, sy, sxx, sxy float64
	for i, x := range g.X {
		y := g.V[i][0]
		sx, sy, sxx, sxy = sx+x, sy+y, sxx+x*x, sxy+x*y
	}
	n := float64(len(g.X))
	slope := (n*sxy - sx*sy) / (n*sxx - sx*sx)
	return max((sy-slope*sx)/n, 0)
}

// StepTime is the sum of the step's parts, each a measured step, less the
// fixed cost every part but one counts again.
func (t CostTable) StepTime(s *StepShape) float64 {
	total, parts := 0.0, 0
	for _, c := range s.Chunks {
		total += t.Prefill.At(float64(c.Tokens), float64(c.Context))
		parts++
	}
	if s.Decodes > 0 {
		total += t.Decode.At(float64(s.Decodes), s.DecodeContext/float64(s.Decodes))
		parts++
	}
	if parts > 1 {
		total -= float64(parts-1) * t.Base()
	}
	return max(total, 0)
}

func (g Grid) validate() error {
	if len(g.X) == 0 || len(g.Y) == 0 || len(g.V) != len(g.X) {
		return fmt.Errorf("%d x %d points with %d rows", len(g.X), len(g.Y), len(g.V))
	}
	if !increasing(g.X) || !increasing(g.Y) {
		return fmt.Errorf("sample points %v, %v not increasing", g.X, g.Y)
	}
	for i, row := range g.V {
		if len(row) != len(g.Y) {
			return fmt.Errorf("row %d has %d values for %d points", i, len(row), len(g.Y))
		}
	}
	return nil
}

// increasing reports whether xs strictly increases.
func increasing(xs []float64) bool {
	for i := 1; i < len(xs); i++ {
		if xs[i] <= xs[i-1] {
			return false
		}
	}
	return true
}

// At is the grid's value at (x, y).
func (g Grid) At(x, y float64) float64 {
	i, fx := cell(g.X, x)
	j, fy := cell(g.Y, y)
	at := func(i, j int) float64 { return g.V[min(i, len(g.X)-1)][min(j, len(g.Y)-1)] }
	lo := at(i, j) + fy*(at(i, j+1)-at(i, j))
	hi := at(i+1, j) + fy*(at(i+1, j+1)-at(i+1, j))
	return lo + fx*(hi-lo)
}

// cell is the index i of the segment [xs[i], xs[i+1]] that holds x, or the
// edge segment beyond the ends, and x's fraction along it (below 0 or
// above 1 outside). A single point is a constant.
func cell(xs []float64, x float64) (int, float64) {
	if len(xs) == 1 {
		return 0, 0
	}
	i, _ := slices.BinarySearch(xs, x)
	i = min(max(i-1, 0), len(xs)-2)
	return i, (x - xs[i]) / (xs[i+1] - xs[i])
}
