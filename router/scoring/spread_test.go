package scoring

import (
	"math/rand/v2"
	"sort"
	"testing"
)

// TestSpreadRanksLargeFleets: above countRankMax pods, where Spread sorts
// instead of counting, each pod's score is its rank by last pick (ties by
// position), as a stable sort of the fleet orders it.
func TestSpreadRanksLargeFleets(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{countRankMax + 1, 300} {
		s := &State{Pods: make([]Pod, n), LastPicked: make([]uint64, n)}
		for i := range s.LastPicked {
			s.LastPicked[i] = rng.Uint64N(uint64(n / 3)) // ties on purpose
		}
		got := make([]float64, n)
		Spread{}.Score(s, got)

		byPick := make([]int, n)
		for i := range byPick {
			byPick[i] = i
		}
		sort.SliceStable(byPick, func(a, b int) bool { return s.LastPicked[byPick[a]] < s.LastPicked[byPick[b]] })
		for rank, i := range byPick {
			if want := 1 - float64(rank)/float64(n-1); got[i] != want {
				t.Fatalf("%d pods: pod %d scored %v, want %v (last picked %d)", n, i, got[i], want, s.LastPicked[i])
			}
		}
	}
}
