package scoring

// CostType names the time-to-first-token scorer in the configuration.
const CostType = "cost"

// Cost estimates each pod's time to first token for the request and scores
// the fastest pod 1 and the others fastest/theirs. The estimate follows
// vLLM's chunked-prefill scheduler: every step computes up to budget_tokens
// tokens, of which the running batch takes one per decoding request, and
// the request's prefill waits behind the prefills queued before it:
//
//	ttft = (backlog + uncached) / (budget_tokens - running) x step_seconds
//
// where uncached is the request's prompt minus the pod's GPU-held leading
// blocks, running is the engine's running batch, and backlog is the larger
// of the router's own pending prefill (Load.PendingTokens: the uncached
// tokens of its requests to the pod that have not answered a byte, exact
// at decision time) and the engine's waiting count x waiting_tokens (the
// queue holds other routers' requests too, whose prompts this router does
// not know). A pod whose scrape is stale counts every request the router
// has open there as waiting, and no running batch.
//
// Parameters (defaults are Qwen2.5-7B on one A10G, see package sim):
//   - budget_tokens (2048): vLLM --max-num-batched-tokens;
//   - step_seconds (0.46): time of a full step of budget_tokens prefill
//     tokens (2,048 x 13.06 GFLOP at 125 TFLOPS x 0.48 MFU, plus 15 ms);
//   - waiting_tokens (512): uncached prompt tokens of an average queued
//     request of another router.
type Cost struct {
	budget, step, waiting float64
}

var _ Scorer = (*Cost)(nil)

// NewCost returns a cost scorer; non-positive parameters take the defaults.
func NewCost(budgetTokens, stepSeconds, waitingTokens float64) *Cost {
	c := &Cost{budget: budgetTokens, step: stepSeconds, waiting: waitingTokens}
	if c.budget <= 0 {
		c.budget = 2048
	}
	if c.step <= 0 {
		c.step = 0.46
	}
	if c.waiting <= 0 {
		c.waiting = 512
	}
	return c
}

// Type implements Scorer.
func (*Cost) Type() string { return CostType }

// Score implements Scorer.
func (c *Cost) Score(s *State, out []float64) {
	best := -1.0
	for i := range s.Pods {
		out[i] = c.ttft(s, i)
		if best < 0 || out[i] < best {
			best = out[i]
		}
	}
	for i := range out {
		out[i] = best / out[i]
	}
}

// ttft is the estimate for pod i, in seconds; never 0, so ratios are defined.
func (c *Cost) ttft(s *State, i int) float64 {
	l := s.Pods[i].Load
	backlog, running := float64(l.PendingTokens), 0
	if l.Fresh {
		backlog, running = max(backlog, float64(l.Waiting)*c.waiting), l.Running
	} else {
		backlog = max(backlog, float64(l.InFlight)*c.waiting)
	}
	capacity := max(c.budget-float64(running), c.budget/8)
	return (backlog + float64(max(s.uncachedTokens(i), 1))) / capacity * c.step
}
