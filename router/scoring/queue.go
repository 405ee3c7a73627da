package scoring

// QueueType names the queue scorer in the configuration.
const QueueType = "queue"

// Queue prefers pods with fewer waiting requests (vllm:num_requests_waiting
// as last scraped), min-max normalised over the candidates. A pod with a
// stale scrape scores 0.
//
// Parameters: none.
type Queue struct{}

var _ Scorer = Queue{}

// NewQueue returns the queue scorer.
func NewQueue() Queue { return Queue{} }

// Type implements Scorer.
func (Queue) Type() string { return QueueType }

// Score implements Scorer.
func (Queue) Score(s *State, out []float64) {
	vals := out // reuse: minMaxLow reads vals[i] before writing out[i]
	for i := range s.Pods {
		vals[i] = float64(s.Pods[i].Load.Waiting)
	}
	minMaxLow(vals, func(i int) bool { return s.Pods[i].Load.Fresh }, out)
}
