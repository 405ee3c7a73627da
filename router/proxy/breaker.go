package proxy

import (
	"slices"
	"sync"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// BreakerState is a pod's circuit-breaker state.
type BreakerState int

// Breaker states. Closed pods are scored; open pods are left out of
// scoring until their open period ends; a half-open pod gets one probe
// request, whose outcome closes or reopens it.
const (
	BreakerClosed BreakerState = iota
	BreakerOpen
	BreakerHalfOpen
)

func (s BreakerState) String() string {
	return [...]string{"closed", "open", "half-open"}[s]
}

// breakers holds one circuit breaker per pod, fed by the outcome of every
// attempt. Discovery needs up to a staleness interval to notice a dead pod
// and never notices one that hangs or fails every request while its
// /metrics answers; meanwhile each request the scorers send there would pay
// a failed attempt before its retry.
type breakers struct {
	cfg config.Breaker
	now func() time.Time

	mu   sync.Mutex
	pods map[string]*breaker
	// opened counts transitions to open, failed the failed attempts per
	// pod (the breaker's input), for metrics.
	opened int64
	failed map[string]int64
}

type breaker struct {
	state    BreakerState
	failures int       // consecutive, while closed
	until    time.Time // end of the open period
	openFor  time.Duration
	probing  bool // a half-open probe is in flight
	// heldUntil is when a pod's Retry-After ends: until then it takes no
	// request, whatever its state.
	heldUntil time.Time
}

func newBreakers(cfg config.Breaker) *breakers {
	return &breakers{cfg: cfg, now: time.Now, pods: make(map[string]*breaker), failed: make(map[string]int64)}
}

func (b *breakers) enabled() bool { return b.cfg.Failures > 0 }

// filter removes the pods that may not take a request now from cands, in
// place: open pods, and half-open pods whose probe is in flight. A pod
// whose open period ended turns half-open and stays. Unless that would
// leave none: a fleet that is all open is better tried than refused.
func (b *breakers) filter(cands []scoring.Pod) []scoring.Pod {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pods) == 0 {
		return cands
	}
	now := b.now()
	blocked := func(p scoring.Pod) bool {
		br := b.pods[p.Name]
		if br == nil {
			return false
		}
		if br.state == BreakerOpen && !now.Before(br.until) {
			br.state, br.probing = BreakerHalfOpen, false
		}
		return br.state == BreakerOpen || (br.state == BreakerHalfOpen && br.probing) || now.Before(br.heldUntil)
	}
	if !slices.ContainsFunc(cands, func(p scoring.Pod) bool { return !blocked(p) }) {
		return cands
	}
	return slices.DeleteFunc(cands, blocked)
}

// attempt is the outcome of one attempt, as the breakers count it.
type attempt int

const (
	// attemptNeutral says nothing of the pod: the client left, or the
	// router gave up for its own reasons.
	attemptNeutral attempt = iota
	// attemptOK is a response passed on whole with a status under 500.
	attemptOK
	// attemptFailed is a timeout, a 5xx or a broken response.
	attemptFailed
	// attemptRefused is a connection nobody accepted: nothing listens
	// there, which opens the breaker without waiting for more failures.
	attemptRefused
)

// begin notes that an attempt goes to pod and returns what records its
// outcome. On a half-open pod the attempt is the probe, and no other
// request goes there until it ends.
func (b *breakers) begin(pod string) (done func(attempt)) {
	if !b.enabled() {
		return func(attempt) {}
	}
	b.mu.Lock()
	br := b.pods[pod]
	probe := br != nil && br.state == BreakerHalfOpen && !br.probing
	if probe {
		br.probing = true
	}
	b.mu.Unlock()
	return func(a attempt) { b.record(pod, a, probe) }
}

func (b *breakers) record(pod string, a attempt, probe bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	br := b.pods[pod]
	switch a {
	case attemptNeutral:
		if probe && br != nil {
			br.probing = false // let another request probe
		}
		return
	case attemptOK:
		if br != nil && b.now().Before(br.heldUntil) {
			*br = breaker{heldUntil: br.heldUntil} // closed, still held
			return
		}
		delete(b.pods, pod) // closed, with no failures counted
		return
	}
	b.failed[pod]++
	if br == nil {
		br = &breaker{}
		b.pods[pod] = br
	}
	switch br.state {
	case BreakerClosed:
		if br.failures++; br.failures < b.cfg.Failures && a != attemptRefused {
			return
		}
		br.openFor = b.cfg.OpenFor.Duration
	case BreakerHalfOpen:
		if !probe {
			return // an attempt that started before the breaker opened
		}
		br.openFor = min(2*br.openFor, b.cfg.MaxOpenFor.Duration)
	case BreakerOpen:
		return // likewise
	}
	br.state, br.until, br.probing, br.failures = BreakerOpen, b.now().Add(br.openFor), false, 0
	b.opened++
}

// hold keeps pod out of scoring for d, as its 429 or 503 asked with
// Retry-After, at most MaxOpenFor so that no answer exiles a pod for long.
// It works with the breaker off too.
func (b *breakers) hold(pod string, d time.Duration) {
	if m := b.cfg.MaxOpenFor.Duration; m > 0 {
		d = min(d, m)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	br := b.pods[pod]
	if br == nil {
		br = &breaker{}
		b.pods[pod] = br
	}
	if until := b.now().Add(d); until.After(br.heldUntil) {
		br.heldUntil = until
	}
}

// forget drops a pod that left the fleet.
func (b *breakers) forget(pod string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.pods, pod)
	delete(b.failed, pod)
}

// failures returns pod's failed attempts so far.
func (b *breakers) failures(pod string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failed[pod]
}

// states returns every pod not closed, and the count of openings so far.
func (b *breakers) states() (map[string]BreakerState, int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]BreakerState, len(b.pods))
	now := b.now()
	for pod, br := range b.pods {
		st := br.state
		if st == BreakerOpen && !now.Before(br.until) {
			st = BreakerHalfOpen
		}
		if st != BreakerClosed {
			out[pod] = st
		}
	}
	return out, b.opened
}
