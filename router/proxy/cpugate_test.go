package proxy

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestCPUGateAdmitsAsManyAsItHasCores(t *testing.T) {
	g := newCPUGate(2)
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if err := g.enter(ctx); err != nil {
			t.Fatal(err)
		}
	}
	third := make(chan error, 1)
	go func() { third <- g.enter(ctx) }()
	select {
	case err := <-third:
		t.Fatalf("a third request entered a gate of two (err %v)", err)
	case <-time.After(20 * time.Millisecond):
	}
	g.leave()
	if err := <-third; err != nil {
		t.Fatalf("the third request after a turn ended: %v", err)
	}

	// A request whose client leaves while it waits gives up its place.
	gone, cancel := context.WithCancel(ctx)
	waiting := make(chan error, 1)
	go func() { waiting <- g.enter(gone) }()
	cancel()
	if err := <-waiting; !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled wait returned %v, want context.Canceled", err)
	}
	if len(g) != 2 {
		t.Errorf("%d turns taken after the cancelled wait, want the 2 still held", len(g))
	}
	if newCPUGate(0) == nil || cap(newCPUGate(0)) != 1 {
		t.Error("a gate for 0 cores must still admit one request at a time")
	}
}
