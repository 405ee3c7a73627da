package proxy

import (
	"context"
	"errors"
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
// hold exactly. Waiters are woken by closing a channel that every release
// replaces, so a release between a waiter's check and its wait is never lost.
type admission struct {
	cap      int
	maxQueue int
	timeout  time.Duration

	mu      sync.Mutex
	open    map[string]int
	waiting int
	wake    chan struct{}
}

func newAdmission(cap, maxQueue int, timeout time.Duration) *admission {
	return &admission{cap: cap, maxQueue: maxQueue, timeout: timeout, open: make(map[string]int), wake: make(chan struct{})}
}

// underCap keeps the pods of cands that can take one more request, in
// place, and returns the channel a release will close.
func (a *admission) underCap(cands []scoring.Pod) ([]scoring.Pod, <-chan struct{}) {
	if a.cap == 0 {
		return cands, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	out := cands[:0]
	for _, p := range cands {
		if a.open[p.Name] < a.cap {
			out = append(out, p)
		}
	}
	return out, a.wake
}

// acquire takes a slot on pod; false when another request took the last one
// since underCap.
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

// release gives the slot back and wakes the waiters.
func (a *admission) release(pod string) {
	if a.cap == 0 {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.open[pod]--; a.open[pod] <= 0 {
		delete(a.open, pod)
	}
	close(a.wake)
	a.wake = make(chan struct{})
}

// wait queues the caller until wake closes, the deadline passes (shed) or
// ctx ends. A full queue sheds at once.
func (a *admission) wait(ctx context.Context, wake <-chan struct{}, deadline time.Time) error {
	a.mu.Lock()
	if a.waiting >= a.maxQueue {
		a.mu.Unlock()
		return errQueueFull
	}
	a.waiting++
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.waiting--
		a.mu.Unlock()
	}()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-wake:
		return nil
	case <-t.C:
		return errQueueTimeout
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// queued is the number of waiting requests, for metrics.
func (a *admission) queued() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.waiting
}
