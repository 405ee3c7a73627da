package scoring

import (
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/index"
)

// TestLoadBoundScores: the bound is ceil(factor x (total + 1) / pods) of the
// router's in-flight requests; pods at or over it score 0, the rest 1.
func TestLoadBoundScores(t *testing.T) {
	for _, tc := range []struct {
		factor   float64
		inFlight []int
		want     []float64
	}{
		// 12 in flight on 4 pods: bound ceil(1.25 x 13 / 4) = 5.
		{1.25, []int{10, 0, 2, 0}, []float64{0, 1, 1, 1}},
		{1.25, []int{5, 4, 4, 0}, []float64{0, 1, 1, 1}},
		// Factor 2: bound ceil(2 x 13 / 4) = 7.
		{2, []int{6, 6, 0, 0}, []float64{1, 1, 1, 1}},
		// An idle fleet: bound ceil(1.25 / 4) = 1, every pod under it.
		{1.25, []int{0, 0, 0, 0}, []float64{1, 1, 1, 1}},
		// A factor <= 1 takes the default 1.25 (a bound at the mean could
		// leave no pod under it).
		{1, []int{10, 0, 2, 0}, []float64{0, 1, 1, 1}},
	} {
		pods := make([]Pod, len(tc.inFlight))
		for i, n := range tc.inFlight {
			pods[i] = Pod{Name: string(rune('a' + i)), Load: fresh(0, 0, n, 0)}
		}
		out := make([]float64, len(pods))
		NewLoadBound(tc.factor).Score(&State{Pods: pods}, out)
		for i := range out {
			if out[i] != tc.want[i] {
				t.Errorf("factor %g in flight %v: scores %v, want %v", tc.factor, tc.inFlight, out, tc.want)
				break
			}
		}
	}
}

// TestLoadBoundSpillsAHotPrefix: with the bound weighted above the other
// scorers, the pod holding the prefix keeps it while under the bound and the
// request spills to the best other pod (the least loaded, by in-flight) once
// the holder reaches it, however strongly prefix affinity pulls.
func TestLoadBoundSpillsAHotPrefix(t *testing.T) {
	ix := index.New(index.Config{BlockSize: bs})
	prompt := seq(1, 64*bs)
	store(t, ix, "warm", prompt, index.TierGPU)
	p := picker(t, ix, config.Scorer{Type: PrefixType, Weight: 3}, config.Scorer{Type: InFlightType, Weight: 1},
		config.Scorer{Type: LoadBoundType, Weight: 10})
	for _, tc := range []struct {
		warm, others []int
		want         string
	}{
		// 8 + 6 + 6 + 6 = 26 in flight: bound ceil(1.25 x 27 / 4) = 9.
		{[]int{8}, []int{6, 6, 6}, "warm"},
		// 12 + 3 + 2 + 6 = 23: bound 8; the least loaded other pod takes it.
		{[]int{12}, []int{3, 2, 6}, "cold1"},
	} {
		pods := []Pod{{Name: "warm", Load: fresh(0, 0, tc.warm[0], 0)}}
		for i, n := range tc.others {
			pods = append(pods, Pod{Name: "cold" + string(rune('0'+i)), Load: fresh(0, 0, n, 0)})
		}
		d, err := p.Explain(&Request{Tokens: prompt}, pods)
		if err != nil {
			t.Fatal(err)
		}
		if d.Pod != tc.want {
			t.Errorf("warm at %d in flight, others %v: picked %s, want %s\n%v", tc.warm[0], tc.others, d.Pod, tc.want, d)
		}
	}
}
