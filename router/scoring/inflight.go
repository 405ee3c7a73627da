package scoring

// InFlightType names the in-flight scorer in the configuration.
const InFlightType = "in-flight"

// InFlight prefers pods with fewer requests the router has sent and not
// seen finish: the running batch plus queue as this router knows it at the
// moment of the decision, where scrapes lag by up to an interval. With
// several router replicas each counts only its own, which is why the queue
// scorer reads the engine's numbers too. Min-max normalised.
//
// Parameters: none.
type InFlight struct{}

var _ Scorer = InFlight{}

// NewInFlight returns the in-flight scorer.
func NewInFlight() InFlight { return InFlight{} }

// Type implements Scorer.
func (InFlight) Type() string { return InFlightType }

// Score implements Scorer.
func (InFlight) Score(s *State, out []float64) {
	for i := range s.Pods {
		out[i] = float64(s.Pods[i].Load.InFlight)
	}
	minMaxLow(out, always, out)
}
