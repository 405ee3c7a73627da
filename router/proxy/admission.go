package proxy

import (
	"container/list"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// Reasons a request is shed.
var (
	errQueueFull    = errors.New("every pod is at its in-flight cap and the queue is full")
	errQueueTimeout = errors.New("every pod stayed at its in-flight cap for the whole queue timeout")
)

// admission enforces the per-pod in-flight cap and the bounded queue of
// requests waiting for a pod under it. The fleet's own in-flight counts
// cannot do it: checking them and then beginning is racy, and the cap must
// hold exactly.
//
// Waiters are served first in, first out, one per freed slot: a release
// hands its slot straight to the oldest waiter that may use that pod (one
// that has not already tried it), so a burst of releases wakes as many
// waiters as there are slots, never the whole queue, and a request
// arriving later cannot take the slot first.
type admission struct {
	cap      int
	maxQueue int

	mu    sync.Mutex
	open  map[string]int
	queue list.List // of *waiter, oldest first
}

// waiter is one queued request.
type waiter struct {
	skip []string    // pods it has tried: a slot there is no use to it
	got  chan string // the pod whose slot was handed over (buffered)
}

func newAdmission(cap, maxQueue int) *admission {
	return &admission{cap: cap, maxQueue: maxQueue, open: make(map[string]int)}
}

// underCap keeps the pods of cands that can take one more request, in
// place.
func (a *admission) underCap(cands []scoring.Pod) []scoring.Pod {
	if a.cap == 0 {
		return cands
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.DeleteFunc(cands, func(p scoring.Pod) bool { return a.open[p.Name] >= a.cap })
}

// acquire takes a free slot on pod; false when another request took the
// last one since underCap.
func (a *admission) acquire(pod string) bool {
	if a.cap == 0 {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.open[pod] >= a.cap {
		return false
	}
	a.open[pod]++
	return true
}

// release gives a slot on pod back: to the oldest waiter that may use it,
// or to the pool.
func (a *admission) release(pod string) {
	if a.cap == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for e := a.queue.Front(); e != nil; e = e.Next() {
		if w := e.Value.(*waiter); !slices.Contains(w.skip, pod) {
			a.queue.Remove(e)
			w.got <- pod // the slot stays taken, now the waiter's
			return
		}
	}
	if a.open[pod]--; a.open[pod] <= 0 {
		delete(a.open, pod)
	}
}

// wait queues the caller until a slot is handed to it, returning the pod
// it is on; or until the deadline passes (shed) or ctx ends. A full queue
// sheds at once. skip lists pods whose slots the caller cannot use.
func (a *admission) wait(ctx context.Context, skip []string, deadline time.Time) (string, error) {
	a.mu.Lock()
	if a.queue.Len() >= a.maxQueue {
		a.mu.Unlock()
		return "", errQueueFull
	}
	w := &waiter{skip: skip, got: make(chan string, 1)}
	e := a.queue.PushBack(w)
	a.mu.Unlock()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	var err error
	select {
	case pod := <-w.got:
		return pod, nil
	case <-t.C:
		err = errQueueTimeout
	case <-ctx.Done():
		err = context.Cause(ctx)
	}
	// Leave the queue; releases hand slots over under the lock, so after
	// this none can arrive, but one may have as the wait ended: pass it on.
	a.mu.Lock()
	a.queue.Remove(e) // a no-op when a release took w out already
	a.mu.Unlock()
	select {
	case pod := <-w.got:
		a.release(pod)
	default:
	}
	return "", err
}

// queued is the number of waiting requests, for metrics.
func (a *admission) queued() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.queue.Len()
}
