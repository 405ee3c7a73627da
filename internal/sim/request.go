package sim

// Request is one generation request inside an engine. The caller fills the
// exported inputs; the engine owns the rest until the request finishes.
type Request struct {
	// ID identifies the request in the caller's bookkeeping.
	ID uint64
	// Prompt is the prompt's token ids (after any chat template). The engine
	// writes output tokens into its spare capacity, if it has enough.
	Prompt []uint32
	// MaxTokens is how many tokens the request generates: the simulator
	// never stops early, as vLLM with --ignore-eos.
	MaxTokens int
	// LoRA names the adapter the request runs under ("" for the base model)
	// and CacheSalt is its cache_salt: vLLM mixes both into the block
	// hashes (the adapter into every block, the salt into the first), so
	// such blocks are shared only with requests that agree on them.
	LoRA, CacheSalt string
	// Arrival is when the engine received the request, in engine seconds.
	Arrival float64
	// Priority is the request's vLLM priority (lower runs sooner), which
	// only the priority scheduling policy reads.
	Priority int

	// FirstToken and Done are the engine times of the first token and of
	// the last; Output counts tokens generated so far.
	FirstToken, Done float64
	Output           int
	// HitTokens is how many prompt tokens the prefix cache supplied at the
	// last admission; Preemptions how often the engine evicted the request.
	HitTokens   int
	Preemptions int

	tokens   []uint32 // prompt, then output
	hashes   []uint64 // hash of every full block of tokens
	blocks   []int32  // KV blocks held, in order
	computed int      // tokens whose KV is computed (or scheduled this step)
	cachedN  int      // leading blocks registered in the prefix cache
	sched    int      // tokens scheduled in the current step
	running  bool
}

// Finished reports whether every output token has been generated.
func (r *Request) Finished() bool { return r.Output >= r.MaxTokens }

// OutputTokens returns the generated token ids so far.
func (r *Request) OutputTokens() []uint32 { return r.tokens[len(r.Prompt):] }
