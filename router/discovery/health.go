package discovery

import (
	"fmt"
	"time"
)

// Why a pod is out of service, the values of Outage.Reason.
const (
	// OutScrape: metrics.eject_after_failures scrapes in a row failed or
	// timed out. A pod that accepts connections and never answers (a stuck
	// collective, a wedged API server) looks exactly like this.
	OutScrape = "scrape_failing"
	// OutFrozen: the pod reports requests running but its token counters
	// stayed flat for metrics.frozen_after: an engine that answers /metrics
	// and makes no progress.
	OutFrozen = "frozen"
)

// Outage is a pod out of service: left out of Fleet.Pods until its scrape
// says it recovered. The probe is the scrape itself, which keeps running
// every interval while the pod is out: a good scrape ends a scrape outage,
// moving counters (or nothing running) end a frozen one. vLLM's /health is
// not asked: it reports only whether the engine core has errored (the
// EngineDeadError check of vllm/v1/engine/async_llm.py check_health), which
// a wedged engine never sets, and a dead core fails requests, which the
// proxy's breaker already counts.
type Outage struct {
	Pod    string
	Reason string
	// Detail says what was seen, for /readyz and logs.
	Detail string
	Since  time.Time
}

func (o Outage) String() string {
	return fmt.Sprintf("pod %s out of service since %s (%s): %s", o.Pod, o.Since.UTC().Format(time.RFC3339), o.Reason, o.Detail)
}

// health is one pod's service state, guarded by its podState's mu.
type health struct {
	failsInRow int
	// out is the current outage; Reason "" while in service.
	out Outage
	// outc is closed when the pod goes out, and replaced when it returns.
	outc chan struct{}
	// tokens and progressAt are the last progress counter value seen and
	// when it last moved (or the pod last reported nothing running).
	tokens     float64
	progressAt time.Time
}

// judge updates h from one scrape and returns the outage that began
// (Reason set) or ended (ended true), for the caller to log.
func (h *health) judge(pod string, s Scraped, err error, now time.Time, ejectAfter int, frozenAfter time.Duration) (began Outage, ended bool) {
	var o Outage
	if err != nil {
		h.failsInRow++
		if ejectAfter > 0 && h.failsInRow >= ejectAfter {
			o = Outage{Pod: pod, Reason: OutScrape, Detail: fmt.Sprintf("%d scrapes in a row failed, last: %v", h.failsInRow, err)}
		}
		if h.out.Reason == OutFrozen {
			o = h.out // frozen stays frozen until a scrape says otherwise
		}
	} else {
		h.failsInRow = 0
		if !s.HasTokens || s.Running == 0 || s.Tokens != h.tokens || h.progressAt.IsZero() {
			h.tokens, h.progressAt = s.Tokens, now
		}
		if flat := now.Sub(h.progressAt); frozenAfter > 0 && flat >= frozenAfter {
			o = Outage{Pod: pod, Reason: OutFrozen, Detail: fmt.Sprintf("%d requests running, vllm:generation_tokens_total and "+
				"vllm:prompt_tokens_total flat at %g for %s", s.Running, s.Tokens, flat.Round(time.Millisecond))}
		}
	}
	switch {
	case o.Reason == "" && h.out.Reason != "":
		h.out = Outage{}
		h.outc = nil
		return Outage{}, true
	case o.Reason != "" && h.out.Reason == "":
		o.Since = now
		h.out = o
		if h.outc != nil {
			close(h.outc)
		}
		return o, false
	case o.Reason != "":
		o.Since = h.out.Since
		h.out = o // the same outage, its detail brought up to date
	}
	return Outage{}, false
}

// closed is a channel that is always closed: the signal of a pod already out.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// signal returns the channel closed when the pod goes out (already closed
// if it is out now).
func (h *health) signal() <-chan struct{} {
	if h.out.Reason != "" {
		return closed
	}
	if h.outc == nil {
		h.outc = make(chan struct{})
	}
	return h.outc
}
