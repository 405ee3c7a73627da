package sim

// StepCost prices one engine step from its shape. CostModel (a roofline of
// a GPU, DefaultCost) and CostTable (step times measured on one engine)
// implement it; the engine's scheduling is the same under either.
type StepCost interface {
	// StepTime is the duration of a step of shape s, in seconds.
	StepTime(s *StepShape) float64
}

// StepShape is what a step's cost may depend on: its aggregates, and the
// same step split into its decodes and its prefill chunks.
type StepShape struct {
	// Seqs is the sequences scheduled, Tokens the tokens computed
	// (prefill chunks and one per decode), Samples the sequences that
	// sample a token at the end of the step.
	Seqs, Tokens, Samples int
	// Pairs is attention's (query token, context position) pairs and
	// KVTokens the context tokens whose KV is read.
	Pairs, KVTokens float64
	// Decodes is the sequences scheduled for one token after their
	// prompt, DecodeContext their context tokens in all (the new one
	// included).
	Decodes       int
	DecodeContext float64
	// Chunks is the step's prefill chunks, in scheduling order.
	Chunks []Chunk
}

// Chunk is one request's prefill work in a step.
type Chunk struct {
	// Tokens is the prompt tokens computed; Context the tokens before
	// them whose KV is already there (a cached prefix, earlier chunks).
	Tokens, Context int
}

// reset empties s, keeping its chunk buffer.
func (s *StepShape) reset() { *s = StepShape{Chunks: s.Chunks[:0]} }

// add records n tokens of a request that had c computed: a decode (its
// one new token after its output so far) or a prefill chunk, sampling or
// not at the end of the step.
func (s *StepShape) add(c, n int, decode, samples bool) {
	s.Seqs++
	s.Tokens += n
	s.Pairs += float64(n)*float64(c) + float64(n)*float64(n+1)/2
	s.KVTokens += float64(c + n)
	if samples {
		s.Samples++
	}
	if decode {
		s.Decodes++
		s.DecodeContext += float64(c + n)
		return
	}
	s.Chunks = append(s.Chunks, Chunk{Tokens: n, Context: c})
}
