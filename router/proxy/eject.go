package proxy

import (
	"slices"
	"sync"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// ejector keeps pods that just failed to answer at all (refused or dropped
// connections) out of the candidates for a short while. Discovery needs up
// to a staleness interval to notice a dead pod, and a static list never
// drops it; meanwhile every request the scorers send there would pay a
// failed attempt before its retry.
type ejector struct {
	d   time.Duration
	now func() time.Time

	mu    sync.Mutex
	until map[string]time.Time
}

func newEjector(d time.Duration) *ejector {
	return &ejector{d: d, now: time.Now, until: make(map[string]time.Time)}
}

// eject keeps pod out until the ejection time passes.
func (e *ejector) eject(pod string) {
	if e.d <= 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.until[pod] = e.now().Add(e.d)
}

// filter removes ejected pods from cands in place, unless that would leave
// none: a fleet that is all ejected is better tried than refused.
func (e *ejector) filter(cands []scoring.Pod) []scoring.Pod {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.until) == 0 {
		return cands
	}
	now := e.now()
	for pod, t := range e.until {
		if now.After(t) {
			delete(e.until, pod)
		}
	}
	if !slices.ContainsFunc(cands, func(p scoring.Pod) bool { _, out := e.until[p.Name]; return !out }) {
		return cands
	}
	return slices.DeleteFunc(cands, func(p scoring.Pod) bool { _, out := e.until[p.Name]; return out })
}
