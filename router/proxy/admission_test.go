package proxy

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// TestAdmissionHoldsTheCapUnderContention has 64 goroutines contend for
// two pods with a cap of 2 through the sequence the proxy uses (withRoom,
// acquire, else wait for a handed-over slot; begin, release): at no moment may a pod hold
// more than 2, and every request must get through as slots free up.
func TestAdmissionHoldsTheCapUnderContention(t *testing.T) {
	a := newAdmission(admissionLimits{cap: 2, maxQueue: 64, share: 1}, testClasses, nil)
	var held [2]atomic.Int64
	var peak [2]atomic.Int64
	var served atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			deadline := time.Now().Add(10 * time.Second)
			pod, handed := "", false
			for pod == "" {
				cands := a.withRoom([]scoring.Pod{{Name: "a"}, {Name: "b"}}, 1, nil, nil)
				if len(cands) == 0 {
					p, err := a.wait(context.Background(), Flow{Class: 1}, nil, nil, "", nil, deadline.Add(-10*time.Second))
					if err != nil {
						t.Error(err)
						return
					}
					pod, handed = p, true
				} else if a.acquire(cands[len(cands)-1].Name, 1, nil, 1) {
					pod = cands[len(cands)-1].Name
				}
			}
			i := int(pod[0] - 'a')
			n := held[i].Add(1)
			for p := peak[i].Load(); n > p && !peak[i].CompareAndSwap(p, n); p = peak[i].Load() {
			}
			time.Sleep(time.Millisecond)
			held[i].Add(-1)
			finish(a, pod, handed)
			served.Add(1)
		})
	}
	wg.Wait()
	if served.Load() != 64 || peak[0].Load() > 2 || peak[1].Load() > 2 || peak[0].Load()+peak[1].Load() < 3 {
		t.Errorf("served %d, peaks %d and %d (cap 2)", served.Load(), peak[0].Load(), peak[1].Load())
	}
	if a.queued() != 0 || len(a.open) != 0 {
		t.Errorf("left %d queued, slots %v", a.queued(), a.open)
	}
}

// queue starts a waiter and returns once it is in the queue.
func queue(t *testing.T, a *admission, ctx context.Context, skip []string, d time.Duration) <-chan string {
	t.Helper()
	before := a.queued()
	got := make(chan string, 1)
	go func() {
		pod, err := a.wait(ctx, Flow{Class: 1}, nil, nil, "", skip, time.Now().Add(d-time.Minute))
		if err != nil {
			pod = "error: " + err.Error()
		}
		got <- pod
	}()
	for a.queued() == before {
		time.Sleep(time.Millisecond)
	}
	return got
}

// TestAdmissionFIFO checks that each release serves exactly one waiter,
// the oldest that may use the pod, and that the slot is its own: no other
// request can take it in between.
func TestAdmissionFIFO(t *testing.T) {
	a := newAdmission(admissionLimits{cap: 1, maxQueue: 8, share: 1}, testClasses, nil)
	a.acquire("a", 1, nil, 1)
	a.acquire("b", 1, nil, 1)
	first := queue(t, a, context.Background(), nil, time.Minute)
	second := queue(t, a, context.Background(), []string{"b"}, time.Minute) // tried b already
	third := queue(t, a, context.Background(), nil, time.Minute)

	a.release("b", nil) // first may use b; second may not
	if got := <-first; got != "b" {
		t.Fatalf("first waiter got %q, want b", got)
	}
	if a.acquire("b", 1, nil, 1) {
		t.Fatal("a newcomer took the slot handed to the first waiter")
	}
	finish(a, "b", true) // second skips b: third gets it
	if got := <-third; got != "b" {
		t.Fatalf("third waiter got %q, want b (second cannot use b)", got)
	}
	select {
	case got := <-second:
		t.Fatalf("second waiter woke with %q: a release must wake one waiter", got)
	default:
	}
	a.release("a", nil)
	if got := <-second; got != "a" {
		t.Fatalf("second waiter got %q, want a", got)
	}
	if a.queued() != 0 {
		t.Errorf("%d still queued", a.queued())
	}
}

// TestAdmissionSheds checks both shedding reasons, a client leaving the
// queue, and that a waiter leaving as its slot arrives passes it on.
func TestAdmissionSheds(t *testing.T) {
	a := newAdmission(admissionLimits{cap: 1, maxQueue: 1, share: 1}, testClasses, nil)
	if !a.acquire("a", 1, nil, 1) || a.acquire("a", 1, nil, 1) {
		t.Fatal("cap of 1 not enforced")
	}
	timed := queue(t, a, context.Background(), nil, 300*time.Millisecond)
	if _, err := a.wait(context.Background(), Flow{Class: 1, Tenant: "b"}, nil, nil, "", nil, time.Now()); DecisionStatus(err) != 503 {
		t.Errorf("second waiter: %v, want queue full", err)
	}
	if got := <-timed; !strings.Contains(got, "time-to-live") {
		t.Errorf("first waiter: %s, want timeout", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	left := queue(t, a, ctx, nil, time.Minute)
	cancel()
	if got := <-left; got != "error: "+context.Canceled.Error() {
		t.Errorf("cancelled waiter: %s", got)
	}
	a.release("a", nil)
	if len(a.open) != 0 || a.queued() != 0 {
		t.Errorf("after the last release: slots %v, %d queued", a.open, a.queued())
	}
}

// finish ends a request holding a slot on pod as the proxy does: placed
// (begin; handed says the slot was handed over in the queue), answered,
// released.
func finish(a *admission, pod string, handed bool) {
	a.begin(pod, handed, 1, 0)()
	a.release(pod, nil)
}

// testClasses are three classes with a minute's time-to-live.
var testClasses = []Class{{"high", time.Minute}, {"standard", time.Minute}, {"low", time.Minute}}
