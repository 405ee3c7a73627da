package sim

import (
	"sort"

	"github.com/llmd-dev/terraform-provider-llmd/router/index"
)

// PreemptionMemory is how long after its engine last preempted the day's
// router holds a pod's requests to its cache (router/discovery's
// PreemptionMemory).
const PreemptionMemory = 60.0

// dayKV is one pod's KV demand as router/proxy's KV bound counts it: the
// prompt blocks of its requests by key, once however many share them, and
// each request's own blocks (its last partial prompt block and its output
// up to its bound), all at their longest.
type dayKV struct {
	refs map[uint64]int
	own  int
}

// kvDemand is one request's demand on a pod's cache at its longest.
type kvDemand struct {
	keys []uint64
	own  int
}

// newDayKVDemand is the demand of prompt generating up to out tokens, in
// blocks of bs tokens.
func newDayKVDemand(prompt []uint32, out, bs int) kvDemand {
	keys := index.Keys(nil, prompt, bs, "", nil)
	return kvDemand{keys: keys, own: (len(prompt)+out+bs-1)/bs - len(keys)}
}

// blocks is what the pod's requests hold at their longest.
func (k *dayKV) blocks() int { return len(k.refs) + k.own }

// adds is the blocks d would add: its own and its prompt's from the first
// key no request holds (held keys are prefix-closed).
func (k *dayKV) adds(d kvDemand) int {
	return d.own + len(d.keys) - sort.Search(len(d.keys), func(j int) bool { return k.refs[d.keys[j]] == 0 })
}

// add counts d (sign 1) or no more (-1).
func (k *dayKV) add(d kvDemand, sign int) {
	if k.refs == nil {
		k.refs = make(map[uint64]int)
	}
	for _, key := range d.keys {
		if k.refs[key] += sign; k.refs[key] <= 0 {
			delete(k.refs, key)
		}
	}
	k.own += sign * d.own
}
