package scoring

// CostType names the time-to-first-token scorer in the configuration.
const CostType = "cost"

// Cost estimates each pod's time to first token for the request and scores
// the fastest pod 1 and the others fastest/theirs. The estimate follows
// vLLM's chunked-prefill scheduler: every step computes up to budget_tokens
// tokens, of which the running batch takes one per decoding request, and
// the request's prefill waits behind the queued requests' prefills:
//
//	ttft = (queued x waiting_tokens + uncached) / (budget_tokens - running) x step_seconds
//
// where uncached is the request's prompt minus the pod's GPU-held leading
// blocks, queued is the engine's waiting count (or the router's own excess
// in-flight count when that is larger, and only the latter on a stale pod),
// and running is the engine's running batch.
//
// Parameters (defaults are Qwen2.5-7B on one A10G, see package sim):
//   - budget_tokens (2048): vLLM --max-num-batched-tokens;
//   - step_seconds (0.46): time of a full step of budget_tokens prefill
//     tokens (2,048 x 13.06 GFLOP at 125 TFLOPS x 0.48 MFU, plus 15 ms);
//   - waiting_tokens (512): uncached prompt tokens of an average queued request.
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
	queued, running := l.InFlight, 0
	if l.Fresh {
		queued, running = max(l.Waiting, l.InFlight-l.Running), l.Running
	}
	capacity := max(c.budget-float64(running), c.budget/8)
	tokens := float64(queued)*c.waiting + float64(max(s.uncachedTokens(i), 1))
	return tokens / capacity * c.step
}
