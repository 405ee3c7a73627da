package proxy

import (
	"sync"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// WorkWindow is how far back Work counts: the work placed over the last
// minute, per second.
const WorkWindow = time.Minute

// workOutputBound is the most output tokens one prompt counts in Work: a
// request's max_tokens when it states one up to this, this many when it
// states none or more (vLLM's chat default runs to the context's end,
// which says nothing of what it will generate).
const workOutputBound = 1024

// workMeter counts the work this replica's decisions place on the fleet,
// in one-second buckets over WorkWindow.
type workMeter struct {
	mu      sync.Mutex
	tokens  [int(WorkWindow / time.Second)]int64
	seconds [int(WorkWindow / time.Second)]int64 // the Unix second each bucket counts
}

// add counts tokens placed at now.
func (m *workMeter) add(now time.Time, tokens int) {
	sec := now.Unix()
	i := int(sec % int64(len(m.tokens)))
	m.mu.Lock()
	if m.seconds[i] != sec {
		m.seconds[i], m.tokens[i] = sec, 0
	}
	m.tokens[i] += int64(tokens)
	m.mu.Unlock()
}

// rate is the tokens placed over the WorkWindow before now, per second.
func (m *workMeter) rate(now time.Time) int64 {
	sec := now.Unix()
	var sum int64
	m.mu.Lock()
	for i, s := range m.seconds {
		if s > sec-int64(len(m.tokens)) && s <= sec {
			sum += m.tokens[i]
		}
	}
	m.mu.Unlock()
	return sum / int64(len(m.tokens))
}

// placedWork is what a request placed with uncached prompt tokens on its
// pod asks of the pod: those tokens' prefill and, for each of its prompts,
// its output up to workOutputBound.
func placedWork(req *scoring.Request, uncached int) int {
	out := workOutputBound
	if req.MaxOutputTokens > 0 {
		out = min(out, req.MaxOutputTokens)
	}
	return uncached + out*(1+len(req.More))
}

// Work is the work this replica placed on the fleet over the last
// WorkWindow, in tokens per second: for each request it placed (a retry on
// another pod counts again, its prefill being done again), the prompt
// tokens the decision found uncached on the chosen pod plus the tokens it
// may generate (placedWork). Unlike Demand it grows as the pods' prefix
// caches miss and does not shrink as pods are added, so an autoscaler
// dividing it by a per-pod target lands on the fleet the load needs
// (package autoscale); add the peers' Work for the whole router's.
func (s *Server) Work() int64 { return s.work.rate(time.Now()) }
