package proxy

import (
	"slices"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

func podNames(pods []scoring.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

// TestBreakerStates walks one pod's breaker through its states on a
// stepped clock: failures below the threshold keep it closed, the
// threshold opens it, the open period ends in half-open with a single
// probe, a failed probe doubles the open period (up to the cap), a good
// probe closes it; a refused connection opens it at once; a fleet all open
// is offered whole.
func TestBreakerStates(t *testing.T) {
	now := time.Unix(1000, 0)
	b := newBreakers(config.Breaker{Failures: 3, OpenFor: ms(1000), MaxOpenFor: ms(3000)})
	b.now = func() time.Time { return now }
	fleet := func() []scoring.Pod { return []scoring.Pod{{Name: "a"}, {Name: "b"}} }
	offered := func() []string { return podNames(b.filter(fleet())) }
	state := func(pod string) BreakerState { st, _ := b.states(); return st[pod] }
	fail := func(pod string) { b.begin(pod)(attemptFailed) }

	fail("a")
	fail("a")
	b.begin("a")(attemptOK) // a success resets the count
	fail("a")
	fail("a")
	if got := offered(); !slices.Equal(got, []string{"a", "b"}) || state("a") != BreakerClosed {
		t.Fatalf("below the threshold: offered %v, state %v", got, state("a"))
	}
	fail("a")
	if got := offered(); !slices.Equal(got, []string{"b"}) || state("a") != BreakerOpen {
		t.Fatalf("at the threshold: offered %v, state %v", got, state("a"))
	}
	b.begin("a")(attemptFailed) // a late attempt from before the opening changes nothing
	now = now.Add(time.Second)
	if got := offered(); !slices.Equal(got, []string{"a", "b"}) || state("a") != BreakerHalfOpen {
		t.Fatalf("open period over: offered %v, state %v", got, state("a"))
	}
	probe := b.begin("a")
	if got := offered(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("probe in flight: offered %v", got)
	}
	probe(attemptNeutral) // the client left: someone else may probe
	if got := offered(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after a neutral probe: offered %v", got)
	}
	for i, wait := range []time.Duration{2 * time.Second, 3 * time.Second, 3 * time.Second} {
		b.begin("a")(attemptFailed)
		now = now.Add(wait - time.Millisecond)
		if state("a") != BreakerOpen {
			t.Fatalf("failed probe %d: state %v, want open for %s", i, state("a"), wait)
		}
		now = now.Add(time.Millisecond)
		if offered(); state("a") != BreakerHalfOpen {
			t.Fatalf("failed probe %d: not half-open after %s", i, wait)
		}
	}
	b.begin("a")(attemptOK)
	if state("a") != BreakerClosed {
		t.Fatalf("good probe: state %v", state("a"))
	}

	b.begin("b")(attemptRefused)
	if got := offered(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("refused connection: offered %v", got)
	}
	b.begin("a")(attemptRefused)
	if got := offered(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("all open: offered %v, want every pod", got)
	}
	if _, opened := b.states(); opened != 6 {
		t.Errorf("openings counted %d, want 6", opened)
	}

	off := newBreakers(config.Breaker{Failures: -1})
	off.begin("a")(attemptRefused)
	if got := podNames(off.filter(fleet())); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("disabled breaker filtered: %v", got)
	}
}
