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

// admission holds each pod to its capacity (the engine's batch limit)
// counting this replica's requests and the peers' (as last exchanged), and
// queues the requests that find every pod full.
//
// A freed slot goes to the highest class with a waiter that may use the
// pod; within a class, tenants take turns (round robin over the tenants
// that wait), and a tenant's own waiters go first in, first out. A release
// hands its slot straight to that waiter, so a burst of releases wakes as
// many waiters as there are slots, never the whole queue, and a newcomer
// cannot take the slot first.
type admission struct {
	cap      int // 0: no cap, no queue
	maxQueue int
	share    int // waiters one tenant may hold in one class
	classes  []Class
	pods     func() []scoring.Pod // the fleet, for refills; nil: none

	mu      sync.Mutex
	open    map[string]int // this replica's slots per pod
	peer    map[string]int // the peers' in-flight per pod
	bands   []band         // one per class
	n       int            // waiters in every band
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
	flow Flow
	skip []string    // pods it has tried: a slot there is no use to it
	got  chan result // the slot handed over or why it was shed (buffered)
	elem *list.Element
}

type result struct {
	pod string
	err error
}

func newAdmission(cap, maxQueue int, share float64, classes []Class, pods func() []scoring.Pod) *admission {
	a := &admission{cap: cap, maxQueue: maxQueue, share: max(1, int(share*float64(maxQueue))), classes: classes,
		pods: pods, open: make(map[string]int), peer: make(map[string]int), bands: make([]band, len(classes))}
	for i := range a.bands {
		a.bands[i].tenants = make(map[string]*list.List)
	}
	return a
}

// used is what pod has in flight from every replica; a.mu held.
func (a *admission) used(pod string) int { return a.open[pod] + a.peer[pod] }

// underCap keeps the pods of cands that can take one more request, in
// place, noting the peers' in-flight counts they carry.
func (a *admission) underCap(cands []scoring.Pod) []scoring.Pod {
	if a.cap == 0 {
		return cands
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, p := range cands {
		a.notePeer(p)
	}
	return slices.DeleteFunc(cands, func(p scoring.Pod) bool { return a.used(p.Name) >= a.cap })
}

// notePeer records p's in-flight from the peers; a.mu held.
func (a *admission) notePeer(p scoring.Pod) {
	if p.Load.PeerInFlight > 0 {
		a.peer[p.Name] = p.Load.PeerInFlight
	} else {
		delete(a.peer, p.Name)
	}
}

// acquire takes a free slot on pod; false when another request took the
// last one since underCap.
func (a *admission) acquire(pod string) bool {
	if a.cap == 0 {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.used(pod) >= a.cap {
		return false
	}
	a.open[pod]++
	return true
}

// release gives a slot on pod back: to the waiter next in turn that may
// use it, or to the pool (also when the peers filled the pod meanwhile).
func (a *admission) release(pod string) {
	if a.cap == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.used(pod) <= a.cap {
		if w := a.next(pod); w != nil {
			w.got <- result{pod: pod} // the slot stays taken, now the waiter's
			return
		}
	}
	if a.open[pod]--; a.open[pod] <= 0 {
		delete(a.open, pod)
	}
}

// next removes and returns the waiter that gets a slot on pod: highest
// class first, tenants in turn within it; nil when none may use pod. a.mu
// held.
func (a *admission) next(pod string) *waiter {
	for c := range a.bands {
		b := &a.bands[c]
		for i := range b.ring {
			t := (b.next + i) % len(b.ring)
			for e := b.tenants[b.ring[t]].Front(); e != nil; e = e.Next() {
				if w := e.Value.(*waiter); !slices.Contains(w.skip, pod) {
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

// pump hands the room no release announced (peers' requests ending, pods
// joining) to the waiters, every refillEvery while any waits.
func (a *admission) pump() {
	t := time.NewTicker(refillEvery)
	defer t.Stop()
	for range t.C {
		pods := a.pods()
		a.mu.Lock()
		for _, p := range pods {
			a.notePeer(p)
			for a.used(p.Name) < a.cap {
				w := a.next(p.Name)
				if w == nil {
					break
				}
				a.open[p.Name]++
				w.got <- result{pod: p.Name}
			}
		}
		if a.n == 0 {
			a.pumping = false
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
	}
}

// wait queues the caller until a slot is handed to it, returning the pod
// it is on; or until its class's TTL from since passes or it is shed (a
// *ShedError), or ctx ends. skip lists pods whose slots the caller cannot
// use.
func (a *admission) wait(ctx context.Context, flow Flow, skip []string, since time.Time) (string, error) {
	w := &waiter{flow: flow, skip: skip, got: make(chan result, 1)}
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
			"no pod freed a slot within class %s's time-to-live (%s)", class.Name, class.TTL)}
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	// Leave the queue; slots are handed over under the lock, so after this
	// none can arrive, but one may have as the wait ended: pass it on.
	a.mu.Lock()
	a.remove(w)
	a.mu.Unlock()
	select {
	case r := <-w.got:
		if r.err == nil {
			a.release(r.pod)
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
