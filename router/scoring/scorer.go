package scoring

// Scorer rates every candidate pod for one request. Scores lie in [0, 1],
// higher is better; the picker multiplies them by the configured weights
// and picks the largest sum.
type Scorer interface {
	// Type is the name the configuration uses for this scorer.
	Type() string
	// Score writes one score per s.Pods[i] into out[i] (len(out) ==
	// len(s.Pods)). It must not keep s or out.
	Score(s *State, out []float64)
}

// Observer is implemented by scorers that learn from decisions, such as the
// routing-history scorer. Picked is called once per committed decision (never
// for Explain) with the chosen pod's position in s.Pods; Forget when a pod
// leaves the fleet, so a pod that returns under the same name starts afresh.
type Observer interface {
	Picked(s *State, chosen int)
	Forget(pod string)
}

// Load is what the router knows about one pod's load.
type Load struct {
	// Running, Waiting and KVUsage are vLLM's num_requests_running,
	// num_requests_waiting and kv_cache_usage_perc (0..1) as last scraped.
	Running int     `json:"running"`
	Waiting int     `json:"waiting"`
	KVUsage float64 `json:"kv_usage"`
	// KVCacheTokens is the size of the pod's KV cache in tokens
	// (vllm:cache_config_info's num_gpu_blocks x block_size) as last
	// scraped; 0 when unknown.
	KVCacheTokens int `json:"kv_cache_tokens,omitempty"`
	// Fresh says the scrape is within the staleness limit; scorers that read
	// scraped values treat a stale pod as the worst candidate, since a pod
	// whose /metrics stopped answering is more likely sick than idle.
	Fresh bool `json:"fresh"`
	// InFlight counts requests the router, and its peer replicas, sent to
	// the pod that have not finished: exact at decision time for its own,
	// a few milliseconds old for its peers', where scrapes are up to an
	// interval old.
	InFlight int `json:"in_flight"`
	// PeerInFlight is the part of InFlight the peer router replicas sent
	// (package peers), as they last reported it.
	PeerInFlight int `json:"peer_in_flight,omitempty"`
	// PendingTokens sums the uncached prompt tokens of those requests that
	// have not yet answered a byte (a stream's first token): the prefill
	// backlog this router gave the pod, exact where the engine's waiting
	// count lags a burst and says nothing of how long its prompts are.
	PendingTokens int `json:"pending_tokens"`
	// PeerPendingTokens is the part of PendingTokens the peer router
	// replicas sent, as they last reported it.
	PeerPendingTokens int `json:"peer_pending_tokens,omitempty"`
	// PeerTopPendingTokens is the part of PeerPendingTokens of requests of
	// the highest priority class (package proxy's admission holds that
	// class's prefill apart).
	PeerTopPendingTokens int `json:"peer_top_pending_tokens,omitempty"`
	// Preempting says the pod's engine preempted requests within the last
	// minute (vllm:num_preemptions_total rose between two scrapes): its KV
	// cache ran out of blocks for the running requests' next tokens.
	Preempting bool `json:"preempting,omitempty"`
}

// Pod is one candidate. Its engine in the block index is index.Engine{Pod:
// Name} (data-parallel ranks other than 0 are not candidates of their own).
type Pod struct {
	Name string
	Load Load
}

// Hit is one pod's hold on the request's prefix, from the block index.
type Hit struct {
	// Blocks are leading blocks held on any tier, GPUBlocks those on GPU,
	// Speculative those held only by a speculative entry.
	Blocks      int `json:"blocks"`
	GPUBlocks   int `json:"gpu_blocks"`
	Speculative int `json:"speculative"`
	// Rank is the data-parallel rank holding them, the pod's best.
	Rank int `json:"rank,omitempty"`
}

// better reports whether h holds more of the prefix than o.
func (h Hit) better(o Hit) bool {
	return h.Blocks > o.Blocks || (h.Blocks == o.Blocks && h.GPUBlocks > o.GPUBlocks)
}

// State is everything scorers see about one decision. The picker fills it;
// scorers read it.
type State struct {
	Req  *Request
	Pods []Pod
	// Hits[i] is Pods[i]'s prefix hold.
	Hits []Hit
	// Blocks is the request's number of full blocks, BlockSize the fleet's.
	Blocks, BlockSize int
	// Keys are the request's block keys, as the index names them (nil
	// without an index or tokens); read-only.
	Keys []uint64
	// AnyHit says some pod holds at least one leading block.
	AnyHit bool
	// LastPicked[i] is the decision sequence number at which Pods[i] was last
	// chosen (0: never); larger is more recent.
	LastPicked []uint64
}

// uncachedTokens is the number of prompt tokens pod i would have to compute.
func (s *State) uncachedTokens(i int) int {
	return max(len(s.Req.Tokens)-s.Hits[i].GPUBlocks*s.BlockSize, 0)
}
