package proxy

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// TestAdmissionHoldsTheCapUnderContention has 64 goroutines contend for
// two pods with a cap of 2 through the same sequence the proxy uses
// (underCap, acquire, wait): at no moment may a pod hold more than 2, and
// every request must get through as slots free up.
func TestAdmissionHoldsTheCapUnderContention(t *testing.T) {
	a := newAdmission(2, 64, 10*time.Second)
	var held [2]atomic.Int64
	var peak [2]atomic.Int64
	var served atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			deadline := time.Now().Add(10 * time.Second)
			for {
				cands, wake := a.underCap([]scoring.Pod{{Name: "a"}, {Name: "b"}})
				if len(cands) == 0 {
					if err := a.wait(context.Background(), wake, deadline); err != nil {
						t.Error(err)
						return
					}
					continue
				}
				pod := cands[len(cands)-1].Name
				if !a.acquire(pod) {
					continue
				}
				i := int(pod[0] - 'a')
				n := held[i].Add(1)
				for p := peak[i].Load(); n > p && !peak[i].CompareAndSwap(p, n); p = peak[i].Load() {
				}
				time.Sleep(time.Millisecond)
				held[i].Add(-1)
				a.release(pod)
				served.Add(1)
				return
			}
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

// TestAdmissionSheds checks both shedding reasons and that a queued
// request gives up when its client leaves.
func TestAdmissionSheds(t *testing.T) {
	a := newAdmission(1, 1, time.Second)
	if !a.acquire("a") || a.acquire("a") {
		t.Fatal("cap of 1 not enforced")
	}
	_, wake := a.underCap(nil)
	got := make(chan error, 1)
	go func() { got <- a.wait(context.Background(), wake, time.Now().Add(300*time.Millisecond)) }()
	for a.queued() != 1 {
		time.Sleep(time.Millisecond)
	}
	if err := a.wait(context.Background(), wake, time.Now().Add(time.Second)); !errors.Is(err, errQueueFull) {
		t.Errorf("second waiter: %v, want queue full", err)
	}
	if err := <-got; !errors.Is(err, errQueueTimeout) {
		t.Errorf("first waiter: %v, want timeout", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.wait(ctx, wake, time.Now().Add(time.Second)); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled waiter: %v", err)
	}
	a.release("a")
	if err := a.wait(context.Background(), wake, time.Now().Add(time.Second)); err != nil {
		t.Errorf("a release must wake a waiter holding the old channel: %v", err)
	}
}
