package scoring

// PrefixType names the prefix scorer in the configuration.
const PrefixType = "prefix"

// Prefix scores the share of the request's full blocks that a pod holds as
// leading blocks, from the KV-event index (plus speculative entries).
//
// Parameters:
//   - offload_weight (default 0.5, 0..1): what a block held only on a CPU or
//     storage tier counts for relative to a GPU block; it saves the prefill
//     but costs a load back into GPU memory. 0 ignores offload tiers.
type Prefix struct {
	offloadWeight float64
}

var _ Scorer = (*Prefix)(nil)

// NewPrefix returns a prefix scorer; offloadWeight is clamped to [0, 1].
func NewPrefix(offloadWeight float64) *Prefix {
	return &Prefix{offloadWeight: min(max(offloadWeight, 0), 1)}
}

// Type implements Scorer.
func (*Prefix) Type() string { return PrefixType }

// Score implements Scorer. A request without a full block scores 0
// everywhere, so prefix weight never decides between pods it cannot tell apart.
func (p *Prefix) Score(s *State, out []float64) {
	for i := range out {
		if s.Blocks == 0 {
			out[i] = 0
			continue
		}
		h := s.Hits[i]
		out[i] = (float64(h.GPUBlocks) + p.offloadWeight*float64(h.Blocks-h.GPUBlocks)) / float64(s.Blocks)
	}
}
