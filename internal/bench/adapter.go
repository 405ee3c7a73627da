package bench

import (
	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// scoringPicker runs router/scoring's Picker, the code the live router runs,
// as the virtual-time simulator's Picker. It sees only the simulator's View:
// scraped loads, the router's own in-flight counts and the index fed by
// encoded KV events. The simulator creates that index inside RunVirtual, so
// the scoring Picker is built at the first pick.
type scoringPicker struct {
	scorers []scoring.Weighted
	// precise says the policy reads the KV-event index; policies that do not
	// get a nil index, so they neither look it up nor write speculative entries.
	precise    bool
	staleAfter float64
	p          *scoring.Picker
	pods       []scoring.Pod
	req        scoring.Request
	err        error
}

var (
	_ sim.Picker    = (*scoringPicker)(nil)
	_ sim.Explainer = (*scoringPicker)(nil)
)

// pickErr is the error of the pick that failed the run, if any.
func (a *scoringPicker) pickErr() error { return a.err }

// Pick implements sim.Picker.
func (a *scoringPicker) Pick(r *sim.Route, v *sim.View) int { return a.decide(r, v, true) }

// Explain implements sim.Explainer: the router's Explain, which commits
// nothing.
func (a *scoringPicker) Explain(r *sim.Route, v *sim.View) int { return a.decide(r, v, false) }

func (a *scoringPicker) decide(r *sim.Route, v *sim.View, commit bool) int {
	if a.p == nil {
		ix := v.Index
		if !a.precise {
			ix = nil
		}
		a.p = scoring.NewPicker(ix, a.scorers)
	}
	a.pods = a.pods[:0]
	for i, name := range v.Pods {
		l := v.Load[i]
		a.pods = append(a.pods, scoring.Pod{Name: name, Load: scoring.Load{Running: l.Running, Waiting: l.Waiting,
			KVUsage: l.KVUsage, Fresh: v.Now-l.ScrapedAt <= a.staleAfter, InFlight: l.InFlight,
			PendingTokens: l.PendingTokens}})
	}
	a.req = scoring.Request{Tokens: r.Tokens}
	var d scoring.Decision
	var err error
	if commit {
		d, err = a.p.Pick(&a.req, a.pods)
	} else {
		d, err = a.p.Explain(&a.req, a.pods)
	}
	if err != nil {
		a.err = err
		return -1 // the runs fail on an out-of-range pick
	}
	if commit {
		r.Uncached, r.Hold = d.UncachedTokens, d.Hold
	}
	return d.Chosen
}
