package bench

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
)

// TestRoundRobinLeavesTheDecodeCostOpen records what the calibration can
// and cannot pin down (BENCHMARKS.md, "What the round-robin side leaves
// open"). Beside the default cost model it prices four others, each with
// its own prefill MFU, KV-read efficiency and per-sequence host time, that
// fit the seed's round-robin side (every figure Figures names) at least as
// well as the default does, and whose five TPOT figures are nearer the
// seed's than the default's, which prices every one of them low. On the
// full seed workload the five predict the routed side (the default mix
// against round robin, virtual time, the live router's lag) more than 20%
// apart: the round-robin side leaves the cost of a step of ~64 long
// decodes open, and with it the routed figure.
func TestRoundRobinLeavesTheDecodeCostOpen(t *testing.T) {
	if testing.Short() {
		t.Skip("calibrates five cost models and runs the full seed workload ten times")
	}
	models := []struct {
		name                string
		mfu, kvRead, perSeq float64
	}{
		{name: "default"},
		{"A", 0.50, 0.60, 0.1e-3},
		{"B", 0.53, 0.40, 0.1e-3},
		{"C", 0.56, 0.40, 0.15e-3},
		{"D", 0.59, 0.30, 0.1e-3},
	}
	w := SeedWorkload()
	var (
		table          strings.Builder
		within         []int
		tpotErr, ratio []float64
	)
	table.WriteString("| model | MFU | KV-read efficiency | host ms per sequence | figures within 10% | mean abs TPOT error | best / rr, full seed workload |\n|---|---|---|---|---|---|---|\n")
	for _, m := range models {
		ec := w.engineConfig()
		cost := ec.Cost.(sim.CostModel)
		if m.name != "default" {
			cost.MFU, cost.KVReadEfficiency, cost.SeqOverhead = m.mfu, m.kvRead, m.perSeq
			ec.Cost = cost
		}
		rep, err := sim.Calibrate(ec, w.Seed)
		if err != nil {
			t.Fatal(err)
		}
		n, tpot, k := 0, 0.0, 0
		for _, f := range rep.Figures() {
			if math.Abs(f.Error()) <= 10 {
				n++
			}
			if strings.HasSuffix(f.Name, "TPOT ms") {
				tpot += math.Abs(f.Error())
				k++
			}
		}
		if k != 5 {
			t.Fatalf("%d TPOT figures, want the column's two and the ladder's three", k)
		}
		rr, err := runVirtualOn(ec, w, PolicyRR, nil, LiveLag(1))
		if err != nil {
			t.Fatal(err)
		}
		scorers, _, _ := RouterScorers(PolicyBest)
		best, err := runVirtualOn(ec, w, PolicyBest, scorers, LiveLag(1))
		if err != nil {
			t.Fatal(err)
		}
		within, tpotErr = append(within, n), append(tpotErr, tpot/float64(k))
		ratio = append(ratio, best.OutputThroughput/rr.OutputThroughput)
		fmt.Fprintf(&table, "| %s | %.2f | %.2f | %.2f | %d of %d | %.1f%% | %.2fx (%.0f / %.0f tok/s) |\n", m.name,
			cost.MFU, cost.KVReadEfficiency, 1e3*cost.SeqOverhead, n, len(rep.Figures()), tpot/float64(k),
			ratio[len(ratio)-1], best.OutputThroughput, rr.OutputThroughput)
	}
	t.Logf("cost models fitting the round-robin side, and the routed side they predict:\n%s", table.String())
	for i := 1; i < len(models); i++ {
		if within[i] < within[0] || tpotErr[i] >= tpotErr[0] {
			t.Errorf("model %s fits %d figures (TPOT error %.1f%%), the default %d (%.1f%%): it should fit at least as many, its TPOTs nearer",
				models[i].name, within[i], tpotErr[i], within[0], tpotErr[0])
		}
	}
	if lo, hi := slices.Min(ratio), slices.Max(ratio); hi/lo < 1.2 {
		t.Errorf("the routed predictions span %.2fx-%.2fx: the round-robin side pins them closer than this test says", lo, hi)
	}
}
