package proxy

import "github.com/llmd-dev/terraform-provider-llmd/router/scoring"

// prefillDemand is what a request held to the prefill bound's leadFits (the
// highest class's, admission.leads) computes on each pod: its prompt's
// tokens that pod does not hold, as the picker counts them.
type prefillDemand struct {
	byPod map[string]int
	whole int // the whole prompt: on a pod not counted
}

// newPrefillDemand counts req's prefill on each of pods with picker.
func newPrefillDemand(picker *scoring.Picker, req *scoring.Request, pods []scoring.Pod) *prefillDemand {
	uncached := picker.UncachedTokens(req, pods, make([]int, 0, len(pods)))
	pf := &prefillDemand{byPod: make(map[string]int, len(pods)), whole: max(len(req.Tokens), 1)}
	for i, p := range pods {
		pf.byPod[p.Name] = uncached[i]
	}
	return pf
}

// on is the request's prefill on pod: its whole prompt where it was not
// counted; 1, the least a request computes, for a nil demand.
func (pf *prefillDemand) on(pod string) int {
	if pf == nil {
		return 1
	}
	if n, ok := pf.byPod[pod]; ok {
		return n
	}
	return pf.whole
}

// cold says no pod holds any of the prompt (false for a nil demand): such a
// request has no pod to prefer for its prefix and may take whichever pod
// has room first.
func (pf *prefillDemand) cold() bool {
	if pf == nil {
		return false
	}
	for _, n := range pf.byPod {
		if n < pf.whole {
			return false
		}
	}
	return true
}
