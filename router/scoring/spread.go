package scoring

import (
	"cmp"
	"slices"
)

// countRankMax is the largest fleet Spread ranks by counting rather than
// sorting.
const countRankMax = 64

// SpreadType names the spread scorer in the configuration.
const SpreadType = "spread"

// Spread places requests that no pod has cached on the pod chosen least
// recently, so new prefixes spread over the fleet instead of following
// whichever pod the load scores happen to favour for a scrape interval.
// Requests with a hit on any pod score 0 everywhere: there the prefix
// scorer decides. Scores fall linearly from 1 (least recently chosen) to 0
// (most recently chosen).
//
// Parameters: none.
type Spread struct{}

var _ Scorer = Spread{}

// NewSpread returns the spread scorer.
func NewSpread() Spread { return Spread{} }

// Type implements Scorer.
func (Spread) Type() string { return SpreadType }

// Score implements Scorer.
func (Spread) Score(s *State, out []float64) {
	n := len(s.Pods)
	if s.AnyHit || n < 2 {
		clear(out)
		return
	}
	// Rank by last pick (ties by position). Counting costs less than sorting
	// and allocates nothing on fleets of tens of pods; the index serves
	// thousands of engines, where the quadratic count would dominate the
	// decision, so larger fleets sort.
	if n <= countRankMax {
		for i := range n {
			older := 0
			for j := range n {
				if s.LastPicked[j] < s.LastPicked[i] || (s.LastPicked[j] == s.LastPicked[i] && j < i) {
					older++
				}
			}
			out[i] = 1 - float64(older)/float64(n-1)
		}
		return
	}
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		return cmp.Or(cmp.Compare(s.LastPicked[a], s.LastPicked[b]), cmp.Compare(a, b))
	})
	for rank, i := range order {
		out[i] = 1 - float64(rank)/float64(n-1)
	}
}
