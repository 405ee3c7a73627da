package scoring

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/llmd-dev/terraform-provider-llmd/router/index"
)

// Picker combines weighted scorers into a decision. It is safe for
// concurrent use: the only state it keeps is when each pod was last chosen
// and its counters; scorers that learn (Observer) lock their own state.
type Picker struct {
	ix      *index.Index
	scorers []Weighted
	types   []string // scorer types in order, shared by every Decision

	dp     int    // data-parallel ranks per pod; 0 and 1: none
	sharer Sharer // nil: no peers

	mu         sync.Mutex
	seq        uint64
	lastPicked map[string]uint64
	nextRank   map[string]int // per pod, the rank a request without a hit gets

	decisions, untokenizable, speculateErrs atomic.Int64
	bufs                                    sync.Pool
}

// Stats are the picker's counters for export as metrics.
type Stats struct {
	Decisions     int64 // committed decisions (Pick, not Explain)
	Untokenizable int64 // decisions for requests without token ids
	SpeculateErrs int64 // speculative entries the index refused
}

// ErrNoPods is returned when there is no candidate.
var ErrNoPods = errors.New("no ready pod to route to")

// NewPicker returns a picker over ix with the given scorers. ix may be nil
// for policies without precise prefix scoring.
func NewPicker(ix *index.Index, scorers []Weighted) *Picker {
	p := &Picker{ix: ix, scorers: scorers, lastPicked: make(map[string]uint64), nextRank: make(map[string]int)}
	for _, w := range scorers {
		p.types = append(p.types, w.Scorer.Type())
	}
	p.bufs.New = func() any { return new(scratch) }
	return p
}

// SetDataParallelSize tells the picker that every pod runs n data-parallel
// ranks, each with its own prefix cache; call it before the first decision.
// Each decision then also names a rank: the one holding the most of the
// prefix, or for a request no rank has cached, the pod's ranks in turn.
func (p *Picker) SetDataParallelSize(n int) { p.dp = n }

// Decision is the outcome for one request, shaped for the explain endpoint's
// JSON as well as for logs.
type Decision struct {
	// Chosen is the index into the candidate list, Pod its name.
	Chosen int    `json:"chosen"`
	Pod    string `json:"pod"`
	// Scorers names the columns of PodScore.ByScorer (shared, read-only).
	Scorers []string `json:"scorers"`
	// Scores holds every candidate's breakdown, in candidate order.
	Scores []PodScore `json:"scores"`
	// Blocks is the request's full-block count.
	Blocks int `json:"blocks"`
	// Untokenizable repeats the request's reason: it was routed on load alone.
	Untokenizable string `json:"untokenizable,omitempty"`
	// DPRank is the data-parallel rank of Pod the request is sent to (vLLM's
	// X-data-parallel-rank header); -1 without data parallelism.
	DPRank int `json:"dp_rank"`
	// UncachedTokens are the prompt tokens Pod holds no GPU block of: the
	// prefill the request costs it, as the index tells.
	UncachedTokens int `json:"uncached_tokens"`
	// Hold holds the speculative index entries a committed decision wrote
	// on Pod (nil when none): the caller settles it at the request's first
	// response byte, or when the attempt ends without one.
	Hold *index.Hold `json:"-"`
}

// PodScore is one candidate's part of a decision.
type PodScore struct {
	Pod  string `json:"pod"`
	Load Load   `json:"load"`
	Hit  Hit    `json:"hit"`
	// ByScorer holds each scorer's [0, 1] score, in configuration order and
	// named by Decision.Scorers; Total is the weighted sum.
	ByScorer []float64 `json:"by_scorer"`
	Total    float64   `json:"total"`
}

// BlockSize is the engines' KV block size in tokens as the index learnt it
// from their events; 0 until then, or without an index.
func (p *Picker) BlockSize() int {
	if p.ix == nil {
		return 0
	}
	return p.ix.BlockSize()
}

// Types names the scorers in the order of PodScore.ByScorer.
func (p *Picker) Types() []string { return slices.Clone(p.types) }

// scratch holds one decision's working memory, pooled so the hot path
// allocates only its Decision.
type scratch struct {
	state   State
	keys    []uint64
	matches []index.Match
	hits    []Hit
	last    []uint64
	score   []float64
}

// Pick decides and commits: the chosen pod is recorded as last chosen, the
// index gets speculative entries for the request's blocks on it (held until
// the caller settles Decision.Hold), and learning scorers observe the choice.
func (p *Picker) Pick(r *Request, pods []Pod) (Decision, error) {
	return p.decide(r, pods, true, nil)
}

// ErrNotAdmitted is PickAdmitted's answer when admit refused the chosen pod.
var ErrNotAdmitted = errors.New("the chosen pod was not admitted")

// PickAdmitted is Pick with a gate: admit is asked to take the chosen pod,
// given the prefill the request costs it (Decision.UncachedTokens), before
// anything is committed; the proxy takes its in-flight slot there. When it
// refuses, nothing is recorded, so the index never holds a speculative
// entry for a pod the request did not go to, and PickAdmitted returns
// ErrNotAdmitted.
func (p *Picker) PickAdmitted(r *Request, pods []Pod, admit func(pod string, uncachedTokens int) bool) (Decision, error) {
	return p.decide(r, pods, true, admit)
}

// UncachedTokens appends to dst, for each of pods in order, the prompt
// tokens the request would have to compute there (its GPU-held leading
// blocks left out, speculative entries included), as a decision counts
// them (Decision.UncachedTokens); a request without token ids or before
// the block size is known counts its whole prompt everywhere.
func (p *Picker) UncachedTokens(r *Request, pods []Pod, dst []int) []int {
	sc := p.bufs.Get().(*scratch)
	defer p.bufs.Put(sc)
	s := p.fill(sc, r, pods)
	for i := range pods {
		dst = append(dst, s.uncachedTokens(i))
	}
	return dst
}

// Explain decides without committing anything: what Pick would answer now.
func (p *Picker) Explain(r *Request, pods []Pod) (Decision, error) {
	return p.decide(r, pods, false, nil)
}

func (p *Picker) decide(r *Request, pods []Pod, commit bool, admit func(pod string, uncachedTokens int) bool) (Decision, error) {
	if len(pods) == 0 {
		return Decision{}, ErrNoPods
	}
	sc := p.bufs.Get().(*scratch)
	defer p.bufs.Put(sc)
	s := p.fill(sc, r, pods)

	d := Decision{Chosen: -1, Scorers: p.types, Blocks: s.Blocks, Untokenizable: r.Untokenizable,
		Scores: make([]PodScore, len(pods))}
	flat := make([]float64, len(pods)*len(p.scorers))
	for i := range pods {
		d.Scores[i] = PodScore{Pod: pods[i].Name, Load: pods[i].Load, Hit: s.Hits[i], ByScorer: flat[i*len(p.scorers) : (i+1)*len(p.scorers)]}
	}
	sc.score = grow(sc.score, len(pods))
	for j, w := range p.scorers {
		w.Scorer.Score(s, sc.score)
		for i, v := range sc.score {
			d.Scores[i].ByScorer[j] = v
			d.Scores[i].Total += w.Weight * v
		}
	}
	// Highest total wins; ties go to the pod chosen least recently, so equal
	// pods take turns instead of the first in the list taking everything.
	for i := range d.Scores {
		if c := d.Chosen; c < 0 || d.Scores[i].Total > d.Scores[c].Total ||
			(d.Scores[i].Total == d.Scores[c].Total && s.LastPicked[i] < s.LastPicked[c]) {
			d.Chosen = i
		}
	}
	d.Pod = pods[d.Chosen].Name
	d.UncachedTokens = s.uncachedTokens(d.Chosen)
	if commit && admit != nil && !admit(d.Pod, d.UncachedTokens) {
		return d, ErrNotAdmitted
	}
	d.DPRank = p.rank(d.Pod, s.Hits[d.Chosen], commit)
	if commit {
		d.Hold = p.commit(s, sc.keys, d.Chosen, d.DPRank)
	}
	return d, nil
}

// fill computes the request's keys, looks them up and assembles the State.
func (p *Picker) fill(sc *scratch, r *Request, pods []Pod) *State {
	n := len(pods)
	sc.hits = grow(sc.hits, n)
	clear(sc.hits)
	sc.last = grow(sc.last, n)
	sc.keys = sc.keys[:0]
	s := &sc.state
	*s = State{Req: r, Pods: pods, Hits: sc.hits, LastPicked: sc.last}
	if p.ix != nil && len(r.Tokens) > 0 {
		if bs := p.ix.BlockSize(); bs > 0 {
			s.BlockSize = bs
			sc.keys = index.Keys(sc.keys, r.Tokens, bs, r.LoRA, r.Extra)
			s.Blocks, s.Keys = len(sc.keys), sc.keys
			sc.matches = p.ix.Lookup(sc.keys, sc.matches[:0])
			for _, m := range sc.matches {
				if m.Engine.Rank >= max(p.dp, 1) {
					continue
				}
				h := Hit{Blocks: m.Blocks, GPUBlocks: m.GPUBlocks, Speculative: m.Speculative, Rank: m.Engine.Rank}
				for i := range pods {
					if pods[i].Name == m.Engine.Pod && h.better(sc.hits[i]) {
						sc.hits[i] = h
						s.AnyHit = s.AnyHit || m.Blocks > 0
					}
				}
			}
		}
	}
	p.mu.Lock()
	for i := range pods {
		sc.last[i] = p.lastPicked[pods[i].Name]
	}
	p.mu.Unlock()
	return s
}

// rank is the data-parallel rank a request to pod goes to: the one holding
// most of its prefix, else the pod's next in turn (taken only on commit).
func (p *Picker) rank(pod string, h Hit, commit bool) int {
	switch {
	case p.dp <= 1:
		return -1
	case h.Blocks > 0:
		return h.Rank
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r := p.nextRank[pod]
	if commit {
		p.nextRank[pod] = (r + 1) % p.dp
	}
	return r
}

func (p *Picker) commit(s *State, keys []uint64, chosen, rank int) *index.Hold {
	p.decisions.Add(1)
	if s.Req.Untokenizable != "" {
		p.untokenizable.Add(1)
	}
	name := s.Pods[chosen].Name
	p.mu.Lock()
	p.seq++
	p.lastPicked[name] = p.seq
	p.mu.Unlock()
	var hold *index.Hold
	if p.ix != nil && len(keys) > 0 {
		hold = p.speculate(index.Engine{Pod: s.Pods[chosen].Name, Rank: max(rank, 0)}, keys)
	}
	for _, w := range p.scorers {
		if o, ok := w.Scorer.(Observer); ok {
			o.Picked(s, chosen)
		}
	}
	return hold
}

// speculate writes the speculative entries of a request sent to e and
// tells the sharer; nil when the index refused them.
func (p *Picker) speculate(e index.Engine, keys []uint64) *index.Hold {
	h, err := p.ix.Speculate(e, keys)
	if err != nil {
		p.speculateErrs.Add(1)
		return nil
	}
	if p.sharer != nil {
		p.sharer.Speculated(e, keys, h)
	}
	return h
}

// Index is the block index the picker scores from; nil for policies that
// read none.
func (p *Picker) Index() *index.Index { return p.ix }

// Sharer hears of the speculative entries every committed decision writes,
// before the decision's Hold is returned: package peers tells the other
// router replicas, which hold the same entries until the request starts.
// keys is valid only during the call.
type Sharer interface {
	Speculated(e index.Engine, keys []uint64, h *index.Hold)
}

// SetSharer makes the picker tell s of its decisions' speculative entries.
// Call it before the picker decides.
func (p *Picker) SetSharer(s Sharer) { p.sharer = s }

// Forget drops what the picker and its learning scorers remember of a pod
// that left the fleet, and the pod's engines in the index: a pod followed
// without KV events, or speculated on after its events stopped, would
// otherwise keep one of the index's engine slots for good.
func (p *Picker) Forget(pod string) {
	if p.ix != nil {
		p.ix.DropPod(pod)
	}
	p.mu.Lock()
	delete(p.lastPicked, pod)
	delete(p.nextRank, pod)
	p.mu.Unlock()
	for _, w := range p.scorers {
		if o, ok := w.Scorer.(Observer); ok {
			o.Forget(pod)
		}
	}
}

// Stats returns the counters.
func (p *Picker) Stats() Stats {
	return Stats{Decisions: p.decisions.Load(), Untokenizable: p.untokenizable.Load(), SpeculateErrs: p.speculateErrs.Load()}
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// String renders a decision for logs and test failures.
func (d Decision) String() string {
	s := fmt.Sprintf("-> %s (of %d blocks)", d.Pod, d.Blocks)
	for _, ps := range d.Scores {
		s += fmt.Sprintf("\n  %-12s total %.3f hit %d/%d scores %.3f", ps.Pod, ps.Total, ps.Hit.Blocks, d.Blocks, ps.ByScorer)
	}
	return s
}
