package proxy

import (
	"sort"

	"github.com/llmd-dev/terraform-provider-llmd/router/index"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// kvDemand is what one request holds of a pod's KV cache at its longest:
// each prompt's full blocks, by key (one chain per prompt of a completion
// batch), which it shares with the pod's other requests and its own other
// prompts on the same prefix, and its own blocks beyond them (each
// prompt's last partial block and its output up to its bound), all in
// blocks of bs tokens.
type kvDemand struct {
	chains [][]uint64
	own    int
	bs     int
}

// newKVDemand is req's demand, each prompt's output bounded by the
// request's own bound or, when it states none or a larger one, by reserve
// tokens; nil when the request has no token ids or the block size is not
// known yet.
func newKVDemand(req *scoring.Request, bs, reserve int) *kvDemand {
	if bs <= 0 || len(req.Tokens) == 0 {
		return nil
	}
	out := reserve
	if req.MaxOutputTokens > 0 {
		out = min(out, req.MaxOutputTokens)
	}
	d := &kvDemand{chains: make([][]uint64, 0, 1+len(req.More)), bs: bs}
	prompt := func(toks []uint32) {
		keys := index.Keys(nil, toks, bs, req.LoRA, req.Extra)
		d.chains = append(d.chains, keys)
		d.own += (len(toks)+out+bs-1)/bs - len(keys)
	}
	prompt(req.Tokens)
	for _, toks := range req.More {
		prompt(toks)
	}
	return d
}

// podKV is what the requests on one pod, this replica's and its peers',
// hold of its KV cache at their longest: the prompt blocks they reference,
// each once however many share it, and their own blocks.
type podKV struct {
	refs map[uint64]int // prompt block key -> prompts holding it
	own  int
	n    int // requests
}

// blocks is the cache the pod's requests hold at their longest.
func (k *podKV) blocks() int { return len(k.refs) + k.own }

// adds is the blocks d would add: its own, and each prompt's from the
// first one no request holds, once however many of its prompts share it.
// Held keys are prefix-closed (a request holds every block before each it
// holds, and a key names its whole prefix), so the first unheld one is
// found by bisection.
func (k *podKV) adds(d *kvDemand) int {
	unheld := func(keys []uint64) []uint64 {
		return keys[sort.Search(len(keys), func(j int) bool { return k.refs[keys[j]] == 0 }):]
	}
	if len(d.chains) == 1 {
		return d.own + len(unheld(d.chains[0]))
	}
	n, counted := d.own, make(map[uint64]bool)
	for _, keys := range d.chains {
		for _, key := range unheld(keys) {
			if !counted[key] {
				counted[key] = true
				n++
			}
		}
	}
	return n
}

func (k *podKV) add(d *kvDemand, sign int) {
	for _, keys := range d.chains {
		for _, key := range keys {
			if k.refs[key] += sign; k.refs[key] <= 0 {
				delete(k.refs, key)
			}
		}
	}
	k.own += sign * d.own
	k.n += sign
}

// kvBound holds the classes below the highest to a share of each pod's KV
// cache, counting every request at its longest, so that the engine never
// runs short of blocks for the lower classes' growing outputs (it would
// preempt, and vLLM v1 starts no waiting request in a step that preempts:
// vllm/v1/core/sched/scheduler.py) and a higher class finds room at once.
// Class c of n may fill 1 - headroom*c/(n-1) of the cache; the highest is
// not held (the engine preempts the lower classes for it), and nor is a
// class the guard does not hold (classGuard), while the pod's engine has
// not preempted. Once it has (scoring.Load.Preempting: within the last
// minute), every class is held to the whole cache: more requests than
// their outputs have blocks for is a preemption storm, each preempted
// request recomputing its prompt, its blocks taking cached prefixes from
// the requests to come, and an overloaded pod serving fewer requests the
// more it is sent (BENCHMARKS.md, 2026-12-08); held in the router instead,
// they start as the running ones end. The peers' requests count as
// this replica's own, their prompt blocks shared with every other
// request's: each replica tells its peers of every demand it holds
// (KVSharer) until the request ends. A pod of unknown cache size, or
// holding no request, takes any request. A request that does not fit
// waits while smaller ones of its class that fit pass it.
type kvBound struct {
	headroom float64
	classes  int
	guard    *classGuard
	size     map[string]int  // pod -> cache size in tokens, as last scraped
	pressed  map[string]bool // pods whose engine preempted within the last minute
	pods     map[string]*podKV
	// shared is each held demand's ID at the peers (the guard's sharer
	// tells them), by demand and pod (a request holds a handed pod's demand
	// a moment after it took another's).
	shared map[sharedDemand]uint64
}

// sharedDemand names one demand held on one pod.
type sharedDemand struct {
	d   *kvDemand
	pod string
}

// KVSharer tells the peer router replicas of the KV demands this replica
// holds, so that their KV bounds count them, and of the classes that come
// to it, so that their guards hold for them. *peers.Exchange implements
// it.
type KVSharer interface {
	// KVHeld shares a demand on pod (prompt chains, which stay unchanged,
	// and own blocks) and returns its ID, 0 when it is not shared.
	KVHeld(pod string, chains [][]uint64, own int) uint64
	// KVEnded ends demand id.
	KVEnded(id uint64)
	// KVClassCame says a request of the named class came to this replica.
	KVClassCame(class string)
}

func newKVBound(headroom float64, classes int, guard *classGuard) *kvBound {
	return &kvBound{headroom: headroom, classes: classes, guard: guard,
		size: make(map[string]int), pressed: make(map[string]bool), pods: make(map[string]*podKV), shared: make(map[sharedDemand]uint64)}
}

// note records p's cache size and whether its engine preempts.
func (b *kvBound) note(p scoring.Pod) {
	setOrDelete(b.size, p.Name, p.Load.KVCacheTokens)
	if p.Load.Preempting {
		b.pressed[p.Name] = true
	} else {
		delete(b.pressed, p.Name)
	}
}

// fits says whether a request of class demanding d fits pod.
func (b *kvBound) fits(pod string, class int, d *kvDemand) bool {
	k := b.pods[pod]
	if d == nil || k == nil || b.size[pod] == 0 {
		return true
	}
	share := 1.0
	switch {
	case class > 0 && b.guard.guarded(class):
		share -= b.headroom * float64(class) / float64(max(b.classes-1, 1))
	case !b.pressed[pod]:
		return true
	}
	return float64(k.blocks()+k.adds(d)) <= float64(b.size[pod]/d.bs)*share
}

// hold counts this replica's d on pod (sign 1) or no more (-1), and tells
// the peers.
func (b *kvBound) hold(pod string, d *kvDemand, sign int) {
	if d == nil {
		return
	}
	b.count(pod, d, sign)
	sharer := b.guard.sharer
	if sharer == nil {
		return
	}
	at := sharedDemand{d, pod}
	if sign > 0 {
		if id := sharer.KVHeld(pod, d.chains, d.own); id != 0 {
			b.shared[at] = id
		}
	} else if id, ok := b.shared[at]; ok {
		delete(b.shared, at)
		sharer.KVEnded(id)
	}
}

// count counts d on pod (sign 1) or no more (-1).
func (b *kvBound) count(pod string, d *kvDemand, sign int) {
	k := b.pods[pod]
	if k == nil {
		k = &podKV{refs: make(map[uint64]int)}
		b.pods[pod] = k
	}
	k.add(d, sign)
	if k.n == 0 {
		delete(b.pods, pod)
	}
}
