package proxy

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// ShedError is why admission refused a request: the HTTP status it is
// answered with (429 for a client over its share, 503 for a fleet with no
// room in time) and the class it was in. Both carry Retry-After.
type ShedError struct {
	Code   int
	Class  string
	Reason string
}

func (e *ShedError) Error() string { return e.Reason }

// shedReason labels the llmd_router_shed_total series.
func (e *ShedError) shedReason() string {
	switch e.Code {
	case http.StatusTooManyRequests:
		return "over_share"
	}
	return "no_capacity"
}

// Class is one priority class of the flow control: its name and how long
// its requests may wait for a slot (the time-to-live) before 503.
type Class struct {
	Name string
	TTL  time.Duration
}

// Flow is who a request comes from: its class (an index into the
// admission's classes, 0 the highest) and its tenant.
type Flow struct {
	Class  int
	Tenant string
}

// refillEvery is how often queued requests look for room that no release
// of this replica announced: peers' requests ending, pods joining the
// fleet. A release on this replica hands its slot over at once.
const refillEvery = 50 * time.Millisecond

// admission holds each pod to its capacity and queues the requests that
// find no pod with room. A pod has room while it has a free slot (the
// engine's batch limit, counting this replica's requests and the peers' as
// last exchanged), while fewer than the pending bound of this replica's
// requests to it have yet to answer a byte, and while no room is on its way
// to a waiter; under the KV bound (kvBound), while a request of a class
// below the highest fits the share of the pod's KV cache its class may
// fill; under the prefill bound (prefillFits), while the unanswered
// requests there (this replica's and the peers' as last exchanged) leave a
// class below the highest little enough prefill ahead of a higher class's
// request, and, under the prefill reserve, while enough other pods of the
// fleet stay open to a higher class's request (prefillFits). The pending
// bound follows the engine: a request the engine
// cannot fit yet (its KV cache full, its batch at max_num_seqs) waits there
// unanswered, so the pod stays shut until the engine starts it, and the
// router, where requests can still be ordered and placed, holds the rest.
// When the engines order their waiting queues by the router's classes
// (byClass: Config.EnginePriority), a request counts only the unanswered
// requests of its own class and higher: the engine puts it ahead of the
// lower classes' anyway, so holding it behind them in the router would only
// delay it.
//
// A request queues for the pod its decision chose over every pod, room or
// not (its want), so a full fleet does not send it to whichever pod frees
// first, away from the pod holding its prefix. Room on a pod goes to the
// highest class with a waiter wanting that pod, else to the highest class
// with a waiter wanting no pod in particular or one that left the fleet.
// Within a class tenants take turns (round robin over the tenants that
// wait), and a tenant's own waiters go first in, first out. Room is handed
// to one waiter at a time per pod (the next once it has placed its
// request), so a burst of room wakes as many waiters as fit, never the
// whole queue, and a newcomer cannot take the slot first.
type admission struct {
	cap      int  // slots per pod, 0: no cap
	pending  int  // unanswered requests per pod that shut it, 0: no bound
	byClass  bool // the pending bound counts a request's class and higher only
	maxQueue int
	share    int // waiters one tenant may hold in one class
	classes  []Class
	pods     func() []scoring.Pod // the fleet, for refills; nil: none
	kv       *kvBound             // nil: no KV bound
	// prefill is the uncached prompt tokens of the unanswered requests on
	// a pod, this replica's and its peers', that shut it to the classes the
	// guard holds (0: no bound); guard is nil when neither it nor the KV
	// bound is on.
	prefill int
	guard   *classGuard
	// reserve is the share of the fleet's pods, rounded down, that the
	// prefill bound keeps open to the higher classes (0: none).
	reserve float64

	mu      sync.Mutex
	open    map[string]int   // this replica's slots per pod
	unans   map[string][]int // this replica's requests per pod and class yet to answer a byte
	unansTk map[string]int   // their uncached prompt tokens per pod
	leadTk  map[string]int   // those of the highest class's, for leadFits
	peer    map[string]int   // the peers' in-flight per pod
	peerTk  map[string]int   // the peers' unanswered prompt tokens per pod
	peerTop map[string]int   // those of the highest class's, for leadFits
	transit map[string]bool  // pods whose room is on its way to a waiter
	present map[string]bool  // the fleet as the last refill saw it
	// fleet is every pod a decision or a refill offered since the last
	// refill, for the prefill reserve; openN how many of them are open to
	// the guarded classes under the prefill bound, -1 until counted again.
	fleet   map[string]bool
	openN   int
	bands   []band // one per class
	n       int    // waiters in every band
	pumping bool
}

// band is one class's waiters, by tenant.
type band struct {
	tenants map[string]*list.List // of *waiter, oldest first
	ring    []string              // tenants with waiters, in turn order
	next    int                   // whose turn it is in ring
}

// waiter is one queued request.
type waiter struct {
	flow  Flow
	kv    *kvDemand      // what it holds of a pod's KV cache; nil: unknown
	pf    *prefillDemand // what it computes on each pod; nil: not counted
	want  string         // the pod its decision chose; "" any
	since time.Time      // when it queued: its patience runs from it
	skip  []string       // pods it has tried: a slot there is no use to it
	got   chan result    // the slot handed over or why it was shed (buffered)
	elem  *list.Element
}

type result struct {
	pod string
	err error
}

// admissionLimits are a pod's capacity and the queue's bounds; byClass
// says the engines order by class (the pending bound then counts a
// request's class and higher only).
type admissionLimits struct {
	cap, pending, maxQueue int
	share                  float64
	byClass                bool
	// kv turns the KV bound on, with kvHeadroom its headroom (kvBound).
	kv         bool
	kvHeadroom float64
	// prefill turns the prefill bound on (admission.prefill), reserve its
	// reserve (admission.reserve).
	prefill int
	reserve float64
}

func newAdmission(l admissionLimits, classes []Class, pods func() []scoring.Pod) *admission {
	a := &admission{cap: l.cap, pending: l.pending, byClass: l.byClass, maxQueue: l.maxQueue,
		share: max(1, int(l.share*float64(l.maxQueue))), classes: classes, pods: pods,
		prefill: l.prefill, reserve: l.reserve, fleet: make(map[string]bool), openN: -1, open: make(map[string]int), unans: make(map[string][]int), unansTk: make(map[string]int), leadTk: make(map[string]int), peer: make(map[string]int), peerTk: make(map[string]int), peerTop: make(map[string]int),
		transit: make(map[string]bool), present: make(map[string]bool), bands: make([]band, len(classes))}
	for i := range a.bands {
		a.bands[i].tenants = make(map[string]*list.List)
	}
	if l.kv || l.prefill > 0 {
		a.guard = newClassGuard(len(classes))
	}
	if l.kv {
		a.kv = newKVBound(l.kvHeadroom, len(classes), a.guard)
	}
	return a
}

// on says whether admission holds pods to anything; off, there is no queue.
func (a *admission) on() bool { return a.cap > 0 || a.pending > 0 || a.kv != nil || a.prefill > 0 }

// used is what pod has in flight from every replica; a.mu held.
func (a *admission) used(pod string) int { return a.open[pod] + a.peer[pod] }

// room says whether pod takes one more request of class, demanding d of
// its KV cache (nil: unknown, not held to the KV bound) and uncached prompt
// tokens of its compute (1 when not known: the least a request computes),
// now; a.mu held.
func (a *admission) room(pod string, class int, d *kvDemand, uncached int) bool {
	return !a.transit[pod] && (a.cap == 0 || a.used(pod) < a.cap) &&
		(a.pending == 0 || a.unanswered(pod, class) < a.pending) && a.kvFits(pod, class, d) && a.prefillFits(pod, class, uncached)
}

// prefillFits says whether pod's unanswered prefill lets a request of
// class, with uncached prompt tokens to compute there, through: the highest
// class as leadFits says, a class the guard does not hold always, the
// others while the unanswered requests there, this replica's and the
// peers' as they last reported them (so two replicas do not put twice the
// bound ahead of a high request), have fewer than a.prefill uncached prompt
// tokens to compute. vLLM schedules its running requests' prefill chunks
// before any waiting request (vllm/v1/core/sched/scheduler.py, the running
// loop before the waiting one, whatever the policy), so the lower classes'
// prefill sent ahead of a higher class's request delays it by up to that
// many tokens' steps; requests whose prefix the pod holds add few tokens
// and pass. a.mu held.
//
// Under the reserve a pod open to such a class takes it only while more
// than the reserve's share of the fleet's pods are open: in a burst of cold
// prompts the lower classes would otherwise start a step of prefill on
// every pod the moment it opens, and each higher-class request would find
// one ahead of it wherever it went; the reserved pods let it start at once.
func (a *admission) prefillFits(pod string, class, uncached int) bool {
	switch {
	case a.prefill == 0:
		return true
	case a.leads(class):
		return a.leadFits(pod, uncached)
	case class == 0 || !a.guard.guarded(class):
		return true
	}
	return a.openToGuarded(pod) && (a.reserve == 0 || a.openPods() > int(a.reserve*float64(len(a.fleet))))
}

// leads says whether requests of class are held to leadFits: the highest
// class, under the prefill bound, when there are classes below it. It
// reads settings only, so a.mu need not be held.
func (a *admission) leads(class int) bool {
	return a.prefill > 0 && class == 0 && len(a.classes) > 1
}

// leadFits says whether a request of the highest class, with uncached
// prompt tokens to compute, starts on pod now: when none of the requests of
// that class there, this replica's and the peers' as they last reported
// them, has yet to answer a byte, or when it computes no more than
// leadSlip's share of the prefill bound. vLLM fills each step's token
// budget with its running requests' prefill and then starts waiting
// requests in the room left (the same loops as prefillFits), so a request
// sent to a pod that is computing another's prompt takes the room left in
// the step that would have ended that prefill, and that step lasts as long
// as its tokens: a cold prompt beside it fills the step, and the earlier
// request's first token waits a whole step more (0.46 s on the A10G); in a
// burst of the high class's cold prompts most of them pay it. Held here,
// the request goes to a pod not computing one of them, or waits for the
// first whose prompt answers (room is handed over at the first byte). A
// request whose prefix the pod holds computes its suffix only (the demo
// workload's 128 tokens, a sixteenth of a 2,048-token step), which adds as
// much to that step and passes: holding it, or sending it to a pod without
// its prefix, would cost it and the fleet more. The lower classes' prefill
// is left to the cost scorer and the bound that holds them: a high request
// that waited for a pod computing nothing at all waited while their warm
// prompts kept every pod busy (BENCHMARKS.md, 2026-12-07, fourteenth
// session). a.mu held.
func (a *admission) leadFits(pod string, uncached int) bool {
	return a.leadTk[pod]+a.peerTop[pod] == 0 || uncached*leadSlip <= a.prefill
}

// leadSlip is the inverse of the share of the prefill bound a request of
// the highest class may compute beside that class's unanswered prompts on
// a pod (leadFits): an eighth, 256 tokens under the default 2,048.
const leadSlip = 8

// openToGuarded says whether pod's unanswered prefill, this replica's and
// the peers', is below the prefill bound; a.mu held.
func (a *admission) openToGuarded(pod string) bool { return a.unansTk[pod]+a.peerTk[pod] < a.prefill }

// openPods is how many of the fleet's pods are open to the guarded classes
// (openToGuarded), counted once per change of their prefill; a.mu held.
func (a *admission) openPods() int {
	if a.openN < 0 {
		a.openN = 0
		for pod := range a.fleet {
			if a.openToGuarded(pod) {
				a.openN++
			}
		}
	}
	return a.openN
}

// addPrefill counts d more unanswered prompt tokens of this replica's
// requests of class on pod; a.mu held.
func (a *admission) addPrefill(pod string, class, d int) {
	setOrDelete(a.unansTk, pod, a.unansTk[pod]+d)
	if class == 0 {
		setOrDelete(a.leadTk, pod, a.leadTk[pod]+d)
	}
	a.openN = -1
}

// kvFits says whether d fits the share of pod's KV cache class may fill;
// a.mu held.
func (a *admission) kvFits(pod string, class int, d *kvDemand) bool {
	return a.kv == nil || a.kv.fits(pod, class, d)
}

// unanswered is what the pending bound counts on pod for a request of
// class: this replica's unanswered requests there of every class, or of
// class and higher when the engines order by class; a.mu held.
func (a *admission) unanswered(pod string, class int) int {
	by := a.unans[pod]
	if !a.byClass {
		class = len(by) - 1
	}
	n := 0
	for _, k := range by[:min(class+1, len(by))] {
		n += k
	}
	return n
}

// addUnanswered counts d more unanswered requests of class on pod,
// forgetting a pod with none; a.mu held.
func (a *admission) addUnanswered(pod string, class, d int) {
	by := a.unans[pod]
	if by == nil {
		by = make([]int, len(a.classes))
		a.unans[pod] = by
	}
	by[class] += d
	if !slices.ContainsFunc(by, func(k int) bool { return k != 0 }) {
		delete(a.unans, pod)
	}
}

// lowestWithRoom is the lowest class (the highest index) pod takes one
// more request of now, the KV bound aside, -1 for none; a.mu held. Room
// only widens towards the higher classes, so every class above it has room
// too.
func (a *admission) lowestWithRoom(pod string) int {
	for c := len(a.classes) - 1; c >= 0; c-- {
		if a.room(pod, c, nil, 1) {
			return c
		}
		if !a.byClass {
			break // every class counts the same
		}
	}
	return -1
}

// withRoom keeps the pods of cands that take one more request of class
// demanding d and, on each pod, the prefill pf says (nil: not counted), in
// place, noting the request's class and the peers' counts and cache sizes
// the pods carry.
func (a *admission) withRoom(cands []scoring.Pod, class int, d *kvDemand, pf *prefillDemand) []scoring.Pod {
	if !a.on() {
		return cands
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range cands {
		a.note(p)
		if !a.fleet[p.Name] {
			a.fleet[p.Name] = true
			a.openN = -1
		}
	}
	if a.guard != nil {
		a.guard.came(class, a.classes[class].Name)
	}
	return slices.DeleteFunc(cands, func(p scoring.Pod) bool { return !a.room(p.Name, class, d, pf.on(p.Name)) })
}

// note records p's in-flight and unanswered prompt tokens from the peers
// and its KV cache's size; a.mu held.
func (a *admission) note(p scoring.Pod) {
	setOrDelete(a.peer, p.Name, p.Load.PeerInFlight)
	setOrDelete(a.peerTop, p.Name, p.Load.PeerTopPendingTokens)
	if a.peerTk[p.Name] != p.Load.PeerPendingTokens {
		setOrDelete(a.peerTk, p.Name, p.Load.PeerPendingTokens)
		a.openN = -1
	}
	if a.kv != nil {
		a.kv.note(p)
	}
}

// peerKV counts a peer's request on pod under the KV bound (sign 1) or no
// more (-1); its end may make room for a waiter.
func (a *admission) peerKV(pod string, chains [][]uint64, own, sign int) {
	if a.kv == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.kv.count(pod, &kvDemand{chains: chains, own: own}, sign)
	if sign < 0 {
		a.fill(pod)
	}
}

// peerClassCame notes that a request of the named class came to a peer;
// a class this replica does not know (a rollout renaming classes) is
// nothing.
func (a *admission) peerClassCame(name string) {
	if a.guard == nil {
		return
	}
	if i := slices.IndexFunc(a.classes, func(c Class) bool { return c.Name == name }); i >= 0 {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.guard.peerCame(i)
	}
}

// shareKV makes the guard tell s of the classes that come, and the KV
// bound, which shares the guard, of this replica's demands.
func (a *admission) shareKV(s KVSharer) {
	if a.guard == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.guard.sharer = s
}

// setOrDelete sets m[k] to n, deleting it at 0 or below.
func setOrDelete(m map[string]int, k string, n int) {
	if n > 0 {
		m[k] = n
	} else {
		delete(m, k)
	}
}

// acquire takes a slot on pod for a request of class demanding d, which
// it holds of the pod's KV cache until release, with uncached prompt tokens
// to compute there; false when it has no room (another request took it
// since withRoom).
func (a *admission) acquire(pod string, class int, d *kvDemand, uncached int) bool {
	if !a.on() {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !a.room(pod, class, d, uncached) {
		return false
	}
	a.take(pod, d)
	return true
}

// take counts a slot on pod and d on its KV cache; a.mu held.
func (a *admission) take(pod string, d *kvDemand) {
	a.open[pod]++
	if a.kv != nil {
		a.kv.hold(pod, d, 1)
	}
}

// begin places a request of class, with uncached prompt tokens to compute
// there, on pod, whose slot it holds (acquired, or handed over when handed
// is set), counting it unanswered until started, at the pod's first byte.
// started may be called more than once.
func (a *admission) begin(pod string, handed bool, class, uncached int) (started func()) {
	if !a.on() {
		return func() {}
	}
	a.mu.Lock()
	if handed {
		delete(a.transit, pod)
	}
	a.addPrefill(pod, class, uncached)
	a.addUnanswered(pod, class, 1)
	a.fill(pod)
	a.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			a.mu.Lock()
			defer a.mu.Unlock()
			a.addUnanswered(pod, class, -1)
			a.addPrefill(pod, class, -uncached)
			a.fill(pod)
		})
	}
}

// release gives a placed request's slot on pod back, and the KV cache d
// it held there (call its started first), handing the room to a waiter.
func (a *admission) release(pod string, d *kvDemand) { a.free(pod, false, d) }

// unhand gives back a slot handed over, with the KV cache d held for it,
// that its waiter did not use.
func (a *admission) unhand(pod string, d *kvDemand) { a.free(pod, true, d) }

// free gives a slot on pod and d of its KV cache back, a slot handed over
// and unused when handed is set.
func (a *admission) free(pod string, handed bool, d *kvDemand) {
	if !a.on() {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if handed {
		delete(a.transit, pod)
	}
	setOrDelete(a.open, pod, a.open[pod]-1)
	if a.kv != nil {
		a.kv.hold(pod, d, -1)
	}
	a.fill(pod)
}

// fill hands pod's room, if it has any, to the waiter next in turn for it
// of a class it has room for; a.mu held.
func (a *admission) fill(pod string) {
	lowest := a.lowestWithRoom(pod)
	if lowest < 0 {
		return
	}
	if w := a.next(pod, lowest); w != nil {
		a.take(pod, w.kv)
		a.transit[pod] = true
		w.got <- result{pod: pod}
	}
}

// next removes and returns the waiter of class lowest or higher that gets
// room on pod: the highest class's waiter wanting pod, else the highest
// class's waiter wanting no pod in particular or one gone from the fleet,
// tenants in turn within a class; nil when none may use pod. a.mu held.
func (a *admission) next(pod string, lowest int) *waiter {
	if w := a.first(pod, lowest, func(w *waiter) bool { return w.want == pod }); w != nil {
		return w
	}
	return a.first(pod, lowest, func(w *waiter) bool { return w.want == "" || a.gone(w.want) })
}

// gone says pod was not in the fleet at the last refill (none yet: not
// gone); a.mu held.
func (a *admission) gone(pod string) bool { return len(a.present) > 0 && !a.present[pod] }

// first removes and returns the first waiter of class lowest or higher, in
// class and turn order, that may use pod, fits its KV cache and its
// prefill bound and that ok accepts; a.mu held.
func (a *admission) first(pod string, lowest int, ok func(*waiter) bool) *waiter {
	for c := range a.bands[:lowest+1] {
		b := &a.bands[c]
		for i := range b.ring {
			t := (b.next + i) % len(b.ring)
			for e := b.tenants[b.ring[t]].Front(); e != nil; e = e.Next() {
				if w := e.Value.(*waiter); ok(w) && !slices.Contains(w.skip, pod) && a.kvFits(pod, c, w.kv) &&
					a.prefillFits(pod, c, w.pf.on(pod)) {
					b.next = t + 1 // the next tenant's turn (remove shifts ring when t's queue empties)
					a.remove(w)
					return w
				}
			}
		}
	}
	return nil
}

// remove takes w out of its band; a no-op when it is out already. a.mu
// held.
func (a *admission) remove(w *waiter) {
	if w.elem == nil {
		return
	}
	b := &a.bands[w.flow.Class]
	q := b.tenants[w.flow.Tenant]
	q.Remove(w.elem)
	w.elem = nil
	a.n--
	if q.Len() > 0 {
		return
	}
	delete(b.tenants, w.flow.Tenant)
	i := slices.Index(b.ring, w.flow.Tenant)
	b.ring = slices.Delete(b.ring, i, i+1)
	if i < b.next {
		b.next--
	}
	if len(b.ring) == 0 || b.next >= len(b.ring) {
		b.next = 0
	}
}

// push queues w, or says why it cannot wait: its tenant holds its share of
// the class already while another tenant waits in it (429; a tenant alone
// in its class may fill the queue, so fairness never idles room), or the
// queue is full of requests of its class or higher (503). A full queue
// makes room by shedding the newest waiter of the lowest class below w's,
// from its tenant with the most waiters.
// a.mu held.
func (a *admission) push(w *waiter) error {
	b := &a.bands[w.flow.Class]
	name := a.classes[w.flow.Class].Name
	q := b.tenants[w.flow.Tenant]
	if q != nil && q.Len() >= a.share && len(b.ring) > 1 {
		return &ShedError{Code: http.StatusTooManyRequests, Class: name, Reason: fmt.Sprintf(
			"tenant %q holds its share of class %s's queue (%d waiting)", w.flow.Tenant, name, q.Len())}
	}
	if a.n >= a.maxQueue {
		victim := a.lowest(w.flow.Class)
		if victim == nil {
			return &ShedError{Code: http.StatusServiceUnavailable, Class: name, Reason: fmt.Sprintf(
				"every pod is at capacity and the queue is full (%d waiting, none below class %s)", a.n, name)}
		}
		a.remove(victim)
		vname := a.classes[victim.flow.Class].Name
		victim.got <- result{err: &ShedError{Code: http.StatusServiceUnavailable, Class: vname, Reason: fmt.Sprintf(
			"every pod is at capacity: shed from class %s's queue for a request of class %s", vname, name)}}
	}
	if q == nil {
		q = list.New()
		b.tenants[w.flow.Tenant] = q
		b.ring = append(b.ring, w.flow.Tenant)
	}
	w.elem = q.PushBack(w)
	a.n++
	if a.n == 1 && a.pods != nil && !a.pumping {
		a.pumping = true
		go a.pump()
	}
	return nil
}

// lowest is the newest waiter of the lowest class below class, from its
// tenant with the most waiters; nil when no class below has any. a.mu held.
func (a *admission) lowest(class int) *waiter {
	for c := len(a.bands) - 1; c > class; c-- {
		var longest *list.List
		for _, q := range a.bands[c].tenants {
			if longest == nil || q.Len() > longest.Len() {
				longest = q
			}
		}
		if longest != nil {
			return longest.Back().Value.(*waiter)
		}
	}
	return nil
}

// pump hands the room no event of this replica announced (peers'
// requests ending, pods joining or leaving) to the waiters, at once and
// every refillEvery while any waits.
func (a *admission) pump() {
	t := time.NewTicker(refillEvery)
	defer t.Stop()
	for ; ; <-t.C {
		pods := a.pods()
		a.mu.Lock()
		clear(a.present)
		clear(a.fleet)
		a.openN = -1
		for _, p := range pods {
			a.present[p.Name] = true
			a.fleet[p.Name] = true
		}
		for _, p := range pods {
			a.note(p)
			a.fill(p.Name)
		}
		if a.n == 0 {
			a.pumping = false
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
	}
}

// wait queues the caller, demanding d of a pod's KV cache and pf of its
// compute, for want (the pod its decision chose; "" for any) until room is
// handed to it,
// returning the pod, whose slot and KV cache it then holds (begin with
// handed, or unhand); or until its class's TTL from since passes or it is
// shed (a *ShedError), or ctx ends. skip lists pods the caller cannot use.
func (a *admission) wait(ctx context.Context, flow Flow, d *kvDemand, pf *prefillDemand, want string, skip []string, since time.Time) (string, error) {
	w := &waiter{flow: flow, kv: d, pf: pf, want: want, skip: skip, got: make(chan result, 1)}
	a.mu.Lock()
	err := a.push(w)
	a.mu.Unlock()
	if err != nil {
		return "", err
	}
	class := a.classes[flow.Class]
	t := time.NewTimer(time.Until(since.Add(class.TTL)))
	defer t.Stop()
	select {
	case r := <-w.got:
		return r.pod, r.err
	case <-t.C:
		err = &ShedError{Code: http.StatusServiceUnavailable, Class: class.Name, Reason: fmt.Sprintf(
			"no pod had room within class %s's time-to-live (%s)", class.Name, class.TTL)}
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	// Leave the queue; room is handed over under the lock, so after this
	// none can arrive, but some may have as the wait ended: pass it on.
	a.mu.Lock()
	a.remove(w)
	a.mu.Unlock()
	select {
	case r := <-w.got:
		if r.err == nil {
			a.unhand(r.pod, d)
		}
	default:
	}
	return "", err
}

// depths is the number of waiting requests per class, for metrics.
func (a *admission) depths() []int {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]int, len(a.bands))
	for c, b := range a.bands {
		for _, q := range b.tenants {
			out[c] += q.Len()
		}
	}
	return out
}

// queued is the number of waiting requests.
func (a *admission) queued() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

// isShed reports whether err is admission's refusal.
func isShed(err error) bool {
	var se *ShedError
	return errors.As(err, &se)
}
