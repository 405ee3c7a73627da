package scoring

// RendezvousType names the rendezvous scorer in the configuration.
const RendezvousType = "rendezvous"

// Rendezvous places a request no pod holds any block of on one pod that
// every router replica computes alike: the candidate with the highest
// rendezvous (highest-random-weight) hash of the request's first block key
// and the pod's name scores 1, the others 0. Router replicas do not see
// each other's speculative entries, so without it the first requests of a
// new prefix that reach two replicas before the pod's KV events do are
// placed by two views of the load, often on two pods, and the prefix is
// computed twice; with it they meet on one pod, from nothing but the
// prompt and the pod names. A pod that leaves the fleet moves only the
// prefixes it was first for. Requests with a hit on any pod, or without a
// full block, score 0 everywhere: there the prefix scorer decides. Its
// weight against the load scorers is how much load difference the shared
// placement may override; a load bound above them still decides which
// pods compete.
//
// Parameters: none.
type Rendezvous struct{}

var _ Scorer = Rendezvous{}

// NewRendezvous returns the rendezvous scorer.
func NewRendezvous() Rendezvous { return Rendezvous{} }

// Type implements Scorer.
func (Rendezvous) Type() string { return RendezvousType }

// Score implements Scorer.
func (Rendezvous) Score(s *State, out []float64) {
	clear(out)
	if s.AnyHit || len(s.Keys) == 0 || len(s.Pods) == 0 {
		return
	}
	best, bestWeight := 0, uint64(0)
	for i, p := range s.Pods {
		// Ties (a 2^-64 chance) go to the lesser name, so the choice
		// never depends on the order of the candidates.
		if w := rendezvousWeight(s.Keys[0], p.Name); i == 0 || w > bestWeight || (w == bestWeight && p.Name < s.Pods[best].Name) {
			best, bestWeight = i, w
		}
	}
	out[best] = 1
}

// rendezvousWeight is pod's weight for key: FNV-1a of the name, mixed
// with the key by SplitMix64's finalizer. Both are fixed functions, so
// every router process, of any version, weighs a pod alike.
func rendezvousWeight(key uint64, pod string) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for i := 0; i < len(pod); i++ {
		h ^= uint64(pod[i])
		h *= prime
	}
	z := h ^ key
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}
