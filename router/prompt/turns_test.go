package prompt

import (
	"testing"
	"time"
)

func TestTurnsAdmitAsManyAsTheProcessHasCores(t *testing.T) {
	tu := newTurns(2)
	first, second := tu.take(), tu.take()
	third := make(chan func(), 1)
	go func() { third <- tu.take() }()
	select {
	case <-third:
		t.Fatal("a third request took a turn of two")
	case <-time.After(20 * time.Millisecond):
	}
	first()
	first() // a second release of the same turn frees nothing more
	release := <-third
	if len(tu) != 2 {
		t.Errorf("%d turns held, want 2 (second and third)", len(tu))
	}
	second()
	release()
	if len(tu) != 0 {
		t.Errorf("%d turns held after every release, want 0", len(tu))
	}
	if cap(newTurns(0)) != 1 {
		t.Error("turns for 0 cores must still admit one request at a time")
	}
	var none turns
	none.take()() // no limit, no block
}
