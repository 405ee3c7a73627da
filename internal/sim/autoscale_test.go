package sim

import (
	"math"
	"testing"
)

func newTestHPA(t *testing.T, cfg HPAConfig) *HPA {
	t.Helper()
	h, err := NewHPA(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// The proposal is the HPA's desiredReplicas = ceil(currentReplicas x
// currentMetricValue / desiredMetricValue), current unchanged within the
// 10% tolerance.
func TestHPAProposalIsTheHPAFormula(t *testing.T) {
	h := newTestHPA(t, HPAConfig{Min: 1, Max: 100, Target: 40})
	for _, c := range []struct {
		current int
		total   float64
		want    int
	}{
		{4, 160, 4},           // at target
		{4, 4 * 40 * 1.09, 4}, // within the tolerance: no change
		{4, 4 * 40 * 0.91, 4},
		{4, 4 * 40 * 1.11, 5}, // ceil(4 x 44.4 / 40) = ceil(4.44)
		{4, 100, 3},           // ceil(4 x 25 / 40) = ceil(2.5)
		{10, 0, 0},            // no demand: the clamp keeps Min
		{3, 1000, 25},
	} {
		got := h.Proposal(c.current, c.total)
		formula := int(math.Ceil(float64(c.current) * (c.total / float64(c.current)) / 40))
		if math.Abs(1-c.total/(40*float64(c.current))) <= HPATolerance {
			formula = c.current
		}
		if got != c.want || got != formula {
			t.Errorf("Proposal(%d, %g) = %d, want %d (formula %d)", c.current, c.total, got, c.want, formula)
		}
	}
}

// Scale-in follows the highest recommendation of the last 300 s; scale-out
// is at once, at most doubling or adding 4 pods per reconciliation, within
// [Min, Max].
func TestHPAStabilisationAndLimits(t *testing.T) {
	h := newTestHPA(t, HPAConfig{Min: 2, Max: 16, Target: 10})
	if got := h.Desired(0, 2, 200, 0); got != 6 { // 20 wanted, +4 at most from 2
		t.Fatalf("scale-out from 2 = %d, want 6 (max(2x, +4))", got)
	}
	if got := h.Desired(15, 6, 200, 0); got != 12 { // doubling
		t.Fatalf("scale-out from 6 = %d, want 12", got)
	}
	if got := h.Desired(30, 12, 200, 0); got != 16 { // Max
		t.Fatalf("scale-out from 12 = %d, want 16 (max)", got)
	}
	for now := 45.0; now <= 315; now += 15 {
		if got := h.Desired(now, 16, 30, 0); got != 16 {
			t.Fatalf("at %gs, within the window of the 20-pod recommendation at 30 s: %d, want 16", now, got)
		}
	}
	// The last high recommendation (30 s) left the window at 330 s.
	if got := h.Desired(345, 16, 30, 0); got != 3 {
		t.Fatalf("after the window: %d, want 3", got)
	}
	if got := h.Desired(360, 3, 0, 0); got != 3 { // the 3 of 345 s is in the window
		t.Fatalf("after the window: %d, want 3", got)
	}
	if got := h.Desired(660, 3, 0, 0); got != 2 {
		t.Fatalf("no demand: %d, want min 2", got)
	}
}

// With a work target alone the work proposes; with both the larger
// proposal wins; a configuration without a target is refused.
func TestHPAWorkMetric(t *testing.T) {
	work := newTestHPA(t, HPAConfig{Min: 1, Max: 16, WorkTarget: 2000})
	if got := work.Desired(0, 4, 1000, 11000); got != 6 { // 11,000 tokens/s at 2,000 a pod; the demand is not read
		t.Fatalf("work alone: Desired = %d, want 6", got)
	}
	both := newTestHPA(t, HPAConfig{Min: 1, Max: 16, Target: 75, WorkTarget: 2000})
	if got := both.Desired(0, 4, 100, 11000); got != 6 { // demand asks 2, work 6
		t.Fatalf("both: Desired = %d, want 6 (the work's)", got)
	}
	if got := newTestHPA(t, HPAConfig{Min: 1, Max: 16, Target: 75, WorkTarget: 2000}).Desired(0, 4, 600, 2000); got != 8 {
		t.Fatalf("both: Desired = %d, want 8 (the demand's)", got)
	}
	for _, c := range []HPAConfig{{Min: 0, Max: 4, Target: 1}, {Min: 1, Max: 4}, {Min: 1, Max: 4, WorkTarget: -1, Target: 5}} {
		if _, err := NewHPA(c); err == nil {
			t.Fatalf("%+v accepted", c)
		}
	}
}
