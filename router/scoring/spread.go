package scoring

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
	// Rank by last pick; n is at most index.MaxEngines (64), so counting
	// costs less than sorting and allocates nothing.
	for i := range n {
		older := 0
		for j := range n {
			if s.LastPicked[j] < s.LastPicked[i] || (s.LastPicked[j] == s.LastPicked[i] && j < i) {
				older++
			}
		}
		out[i] = 1 - float64(older)/float64(n-1)
	}
}
