package scoring

import "math"

// LoadBoundType names the bounded-load scorer in the configuration.
const LoadBoundType = "load-bound"

// LoadBound caps how far one pod's load may run ahead of the fleet's, as
// consistent hashing with bounded loads does (Mirrokni, Thorup and
// Zadimoghaddam, 2016): a pod whose count of this router's in-flight
// requests has reached
//
//	bound = ceil(factor x (in_flight_total + 1) / pods)
//
// scores 0, every other pod 1, so no pod takes more than the bound. Given a
// weight above the sum of the other scorers' weights it is a hard bound:
// prefix affinity still decides among the pods under it, and a request
// whose prefix lives only on full pods spills to the best of the others,
// which then holds the prefix too. Without it a pod that came to hold more
// prefixes than its share (a burst's worth of new prefixes placed on one
// scrape's view) keeps drawing their requests until its KV cache
// overflows and its queue grows without bound, while pods beside it idle.
// The bound reads the router's own in-flight counts, which are exact at
// decision time, not the scrapes, which lag a burst by an interval.
//
// Parameters:
//   - factor (default 1.25, > 1): how far above the mean a pod may go.
type LoadBound struct {
	factor float64
}

var _ Scorer = (*LoadBound)(nil)

// NewLoadBound returns a bounded-load scorer; a factor <= 1 takes the
// default (a bound at the mean would leave no pod room for the request).
func NewLoadBound(factor float64) *LoadBound {
	if factor <= 1 {
		factor = 1.25
	}
	return &LoadBound{factor: factor}
}

// Type implements Scorer.
func (*LoadBound) Type() string { return LoadBoundType }

// Score implements Scorer.
func (b *LoadBound) Score(s *State, out []float64) {
	total := 0
	for _, p := range s.Pods {
		total += p.Load.InFlight
	}
	bound := int(math.Ceil(b.factor * float64(total+1) / float64(len(s.Pods))))
	for i, p := range s.Pods {
		out[i] = 0
		if p.Load.InFlight < bound {
			out[i] = 1
		}
	}
}
