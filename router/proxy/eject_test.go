package proxy

import (
	"slices"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

func podNames(pods []scoring.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// TestEjector checks that an ejected pod is left out until its time
// passes, and that a fleet ejected entirely is still offered whole.
func TestEjector(t *testing.T) {
	now := time.Unix(1000, 0)
	e := newEjector(2 * time.Second)
	e.now = func() time.Time { return now }
	fleet := func() []scoring.Pod { return []scoring.Pod{{Name: "a"}, {Name: "b"}} }

	e.eject("a")
	if got := podNames(e.filter(fleet())); !slices.Equal(got, []string{"b"}) {
		t.Errorf("after ejecting a: %v", got)
	}
	e.eject("b")
	if got := podNames(e.filter(fleet())); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("all ejected: %v, want every pod offered", got)
	}
	now = now.Add(2100 * time.Millisecond)
	if got := podNames(e.filter(fleet())); !slices.Equal(got, []string{"a", "b"}) || len(e.until) != 0 {
		t.Errorf("after the ejection passed: %v (still ejected %v)", got, e.until)
	}
	off := newEjector(-1)
	off.eject("a")
	if got := podNames(off.filter(fleet())); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("disabled ejector filtered: %v", got)
	}
}
