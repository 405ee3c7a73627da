package proxy

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// none fails when ch already holds a result.
func none(t *testing.T, ch <-chan result, what string) {
	t.Helper()
	select {
	case r := <-ch:
		t.Fatalf("%s: got %+v, want still waiting", what, r)
	default:
	}
}

// TestPendingBoundShutsThePodUntilItAnswers: with a pending bound of 1 and
// no cap, a pod with one request yet to answer a byte has no room, for
// withRoom and for acquire; its first byte hands the room to the waiter,
// and only to one: the next waits for that one's first byte in turn.
func TestPendingBoundShutsThePodUntilItAnswers(t *testing.T) {
	a := newAdmission(admissionLimits{pending: 1, maxQueue: 8, share: 1}, testClasses, nil)
	if !a.acquire("p", 1, nil) {
		t.Fatal("an idle pod refused a request")
	}
	started := a.begin("p", false, 1, 0)
	if open := a.withRoom([]scoring.Pod{{Name: "p"}}, 1, nil); len(open) != 0 || a.acquire("p", 1, nil) {
		t.Fatalf("a pod with a request yet to answer is open: %v", open)
	}
	first := queueFor(t, a, Flow{Class: 1}, "p")
	second := queueFor(t, a, Flow{Class: 1}, "p")
	started() // the first byte
	if r := <-first; r.err != nil || r.pod != "p" {
		t.Fatalf("first waiter: %+v, want p", r)
	}
	none(t, second, "second waiter before the first placed its request")
	started2 := a.begin("p", true, 1, 0)
	none(t, second, "second waiter while the first is unanswered")
	a.release("p", nil) // the first request ends; the second still waits for an answer
	none(t, second, "second waiter while the first is unanswered and done")
	started2()
	if r := <-second; r.err != nil || r.pod != "p" {
		t.Fatalf("second waiter: %+v, want p", r)
	}
	finish(a, "p", true)
	a.release("p", nil)
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.open) != 0 || len(a.unans) != 0 || len(a.transit) != 0 || a.n != 0 {
		t.Errorf("left open %v, unanswered %v, in transit %v, %d queued", a.open, a.unans, a.transit, a.n)
	}
}

// TestPendingBoundByClassLetsAHigherClassPast: when the engines order by
// class, a pod whose pending bound the low class fills still takes a high
// request, and the high request's first byte hands room to a high waiter,
// never to a low one, while the low request is unanswered; a low waiter
// counts the high class's unanswered requests too. Without byClass the
// same pod is shut to every class.
func TestPendingBoundByClassLetsAHigherClassPast(t *testing.T) {
	const high, low = 0, 2
	pod := []scoring.Pod{{Name: "p"}}
	blind := newAdmission(admissionLimits{pending: 1, maxQueue: 8, share: 1}, testClasses, nil)
	blind.acquire("p", low, nil)
	blind.begin("p", false, low, 0)
	if open := blind.withRoom(slices.Clone(pod), high, nil); len(open) != 0 || blind.acquire("p", high, nil) {
		t.Fatalf("class-blind: a high request found room behind an unanswered low one: %v", open)
	}

	a := newAdmission(admissionLimits{pending: 1, maxQueue: 8, share: 1, byClass: true}, testClasses, nil)
	a.acquire("p", low, nil)
	lowStarted := a.begin("p", false, low, 0)
	if open := a.withRoom(slices.Clone(pod), low, nil); len(open) != 0 || a.acquire("p", low, nil) {
		t.Fatalf("a second low request found room behind an unanswered low one: %v", open)
	}
	if open := a.withRoom(slices.Clone(pod), high, nil); len(open) != 1 || !a.acquire("p", high, nil) {
		t.Fatalf("a high request found no room behind an unanswered low one: %v", open)
	}
	highStarted := a.begin("p", false, high, 0)
	if a.acquire("p", high, nil) {
		t.Fatal("a second high request found room behind an unanswered high one")
	}
	lowWaiter := queueFor(t, a, Flow{Class: low}, "p")
	highWaiter := queueFor(t, a, Flow{Class: high}, "p")
	highStarted()
	if r := <-highWaiter; r.err != nil || r.pod != "p" {
		t.Fatalf("high waiter after the high request's first byte: %+v, want p", r)
	}
	none(t, lowWaiter, "low waiter while a low request is unanswered")
	secondHighStarted := a.begin("p", true, high, 0)
	lowStarted()
	none(t, lowWaiter, "low waiter while a high request is unanswered")
	secondHighStarted()
	if r := <-lowWaiter; r.err != nil || r.pod != "p" {
		t.Fatalf("low waiter once nothing is unanswered: %+v, want p", r)
	}
	a.begin("p", true, low, 0)()
	for range 4 { // the two acquired, the two handed over
		a.release("p", nil)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.open) != 0 || len(a.unans) != 0 || len(a.transit) != 0 || a.n != 0 {
		t.Errorf("left open %v, unanswered %v, in transit %v, %d queued", a.open, a.unans, a.transit, a.n)
	}
}

// TestRoomGoesToTheWaiterWantingThePod: room on a pod goes to the highest
// class's waiter that wants it, before older waiters and higher classes
// wanting another pod; a waiter wanting a pod gone from the fleet takes
// any pod's room.
func TestRoomGoesToTheWaiterWantingThePod(t *testing.T) {
	fleet := []scoring.Pod{{Name: "a"}, {Name: "b"}}
	a := newAdmission(admissionLimits{cap: 1, maxQueue: 8, share: 1}, testClasses, func() []scoring.Pod { return fleet })
	a.acquire("a", 1, nil)
	a.acquire("b", 1, nil)
	forB := queueFor(t, a, Flow{Class: 0}, "b") // oldest, highest class
	lowForA := queueFor(t, a, Flow{Class: 2}, "a")
	stdForA := queueFor(t, a, Flow{Class: 1}, "a")
	finish(a, "a", false)
	if r := <-stdForA; r.pod != "a" {
		t.Fatalf("room on a went to %+v, want the standard waiter wanting a", r)
	}
	none(t, forB, "the waiter wanting b, when a freed")
	none(t, lowForA, "the low waiter wanting a, when a went to the standard one")
	finish(a, "a", true)
	if r := <-lowForA; r.pod != "a" {
		t.Fatalf("room on a went to %+v, want the low waiter wanting a", r)
	}
	none(t, forB, "the waiter wanting b, when a freed again")

	gone := queueFor(t, a, Flow{Class: 2}, "c") // c is not in the fleet
	finish(a, "a", true)
	if r := <-gone; r.pod != "a" {
		t.Fatalf("the waiter wanting a gone pod: %+v, want a's room", r)
	}
	finish(a, "b", false)
	if r := <-forB; r.pod != "b" {
		t.Fatalf("the waiter wanting b: %+v", r)
	}
}

// TestAFullPodHoldsTheRequestsForItsPrefix runs the server with a pending
// bound of 1 in front of two stand-in pods that send a stream's headers at
// once and its first event when the test opens their gate, as vLLM does
// after a queued request's prefill. A request with the prompt of one
// unanswered on pod X waits for X, although the other pod is idle, and goes
// to X once X answers: placed where its prefix is, not where room is.
func TestAFullPodHoldsTheRequestsForItsPrefix(t *testing.T) {
	gates := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
	urls := map[string]string{}
	for name, gate := range gates {
		urls[name] = gatedStreamPod(t, gate).URL
	}
	s, fleet := newServer(t, urls, Config{MaxPendingPerPod: 1})
	front := httptest.NewServer(s)
	t.Cleanup(front.Close)
	opened := map[string]bool{}
	open := func(name string) {
		if !opened[name] {
			opened[name] = true
			close(gates[name])
		}
	}
	t.Cleanup(func() { open("a"); open("b") }) // a failed test leaves no stream hanging
	waitUntil(t, "both pods scraped", func() bool {
		pods := fleet.Pods(nil)
		return len(pods) == 2 && pods[0].Load.Fresh && pods[1].Load.Fresh
	})

	body := `{"model":"m","stream":true,"prompt":"` + strings.Repeat("the lighthouse keeper counts the ships at night ", 40) + `"}`
	served := make(chan string, 2)
	send := func() {
		go func() {
			resp, err := http.Post(front.URL+"/v1/completions", "application/json", strings.NewReader(body))
			if err != nil {
				served <- "error: " + err.Error()
				return
			}
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, resp.Body)
			served <- resp.Header.Get(PodHeader)
		}()
	}
	inFlight := func() map[string]int {
		out := map[string]int{}
		for _, p := range fleet.Pods(nil) {
			out[p.Name] = p.Load.InFlight
		}
		return out
	}
	send()
	waitUntil(t, "the first request in flight", func() bool { n := inFlight(); return n["a"]+n["b"] == 1 })
	x := "a"
	if inFlight()["b"] == 1 {
		x = "b"
	}
	send()
	waitUntil(t, "the second request queued", func() bool { return s.adm.queued() == 1 })
	if n := inFlight(); n["a"]+n["b"] != 1 {
		t.Fatalf("in flight %v: the second request went to the idle pod", n)
	}
	open(x)
	for range 2 {
		if got := <-served; got != x {
			t.Errorf("a request went to %q, want %s, the pod holding its prefix", got, x)
		}
	}
}

// TestPrefillBoundHoldsTheLowerClassesBehindUnansweredPrefill: with a
// prefill bound of 2,048 tokens, once a high request came, a pod whose
// unanswered requests have that many uncached prompt tokens to compute is
// shut to the lower classes and open to the highest; requests whose
// prefix the pod holds (few tokens each) pass until their tokens reach
// the bound; a first byte hands the room to a lower-class waiter. Before
// any higher-class request, and a minute after the last, nothing is held.
func TestPrefillBoundHoldsTheLowerClassesBehindUnansweredPrefill(t *testing.T) {
	const high, mid, low = 0, 1, 2
	a := newAdmission(admissionLimits{prefill: 2048, maxQueue: 8, share: 1, byClass: true}, testClasses, nil)
	clock := time.Unix(1000, 0)
	a.guard.now = func() time.Time { return clock }
	pod := []scoring.Pod{{Name: "p"}}
	place := func(class, uncached int) (started func()) {
		t.Helper()
		if open := a.withRoom(slices.Clone(pod), class, nil); len(open) != 1 || !a.acquire("p", class, nil) {
			t.Fatalf("class %d with %d uncached tokens: no room, %d tokens unanswered", class, uncached, a.unansTk["p"])
		}
		return a.begin("p", false, class, uncached)
	}
	shut := func(class int) bool {
		t.Helper()
		open := a.withRoom(slices.Clone(pod), class, nil)
		if acquired := a.acquire("p", class, nil); acquired != (len(open) == 1) {
			t.Fatalf("class %d: withRoom offered %v, acquire took %v", class, open, acquired)
		} else if acquired {
			a.release("p", nil)
		}
		return len(open) == 0
	}

	coldLow := place(low, 2300) // no higher class yet: nothing held
	place(low, 2300)()
	if shut(low) {
		t.Fatal("the low class held behind 2,300 unanswered tokens before any higher-class request")
	}
	if shut(high) { // the high request comes
		t.Fatal("the highest class held by the prefill bound")
	}
	if !shut(low) || !shut(mid) {
		t.Fatal("a lower class not held behind 2,300 unanswered tokens after a high request")
	}
	waiter := queueFor(t, a, Flow{Class: low}, "p")
	none(t, waiter, "a low waiter while the cold prefill is unanswered")
	coldLow() // its first byte
	if r := <-waiter; r.err != nil || r.pod != "p" {
		t.Fatalf("the low waiter after the cold prefill's first byte: %+v, want p", r)
	}
	warm := []func(){a.begin("p", true, low, 500)}
	for range 3 { // 2,000 tokens in all
		warm = append(warm, place(low, 500))
	}
	if shut(low) {
		t.Fatal("the low class held behind 2,000 unanswered tokens, under the bound")
	}
	warm = append(warm, place(mid, 100))
	if !shut(low) {
		t.Fatal("the low class passed 2,100 unanswered tokens")
	}
	warm[0]()
	if shut(low) {
		t.Fatal("the low class held once a warm request answered (1,600 tokens)")
	}
	place(low, 600)
	clock = clock.Add(guardFor + time.Second)
	if shut(low) {
		t.Fatal("the low class held a minute after the last high request")
	}
}

// TestPrefillBoundCountsThePeersPrefill: the peers' unanswered prompt
// tokens on a pod, as the pod's load carries them from the exchange, count
// with this replica's under the prefill bound, so two replicas do not put
// twice the bound ahead of a high request; once the peers' requests start,
// the next refill hands the pod to a lower-class waiter.
func TestPrefillBoundCountsThePeersPrefill(t *testing.T) {
	const high, low = 0, 2
	var peerTokens atomic.Int64
	fleet := func() []scoring.Pod {
		return []scoring.Pod{{Name: "p", Load: scoring.Load{PeerPendingTokens: int(peerTokens.Load())}}}
	}
	a := newAdmission(admissionLimits{prefill: 2048, maxQueue: 8, share: 1, byClass: true}, testClasses, fleet)
	open := func(class int) bool {
		t.Helper()
		return len(a.withRoom(fleet(), class, nil)) == 1
	}

	peerTokens.Store(1500)
	if !open(high) { // the high request comes
		t.Fatal("the highest class held by the prefill bound")
	}
	if !open(low) || !a.acquire("p", low, nil) {
		t.Fatal("the low class held behind the peers' 1,500 tokens, under the bound")
	}
	started := a.begin("p", false, low, 600)
	if open(low) {
		t.Fatal("the low class passed 600 of this replica's and 1,500 of the peers' unanswered tokens")
	}
	peerTokens.Store(1400)
	if !open(low) {
		t.Fatal("the low class held behind 2,000 unanswered tokens, under the bound")
	}

	peerTokens.Store(1500)
	waiter := queueFor(t, a, Flow{Class: low}, "p")
	time.Sleep(3 * refillEvery) // refills that find the pod still shut
	none(t, waiter, "a low waiter while the peers' prefill is unanswered")
	peerTokens.Store(0) // the peers' requests answer their first bytes
	select {
	case r := <-waiter:
		if r.err != nil || r.pod != "p" {
			t.Fatalf("the low waiter: %+v, want p", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no refill handed the pod to the low waiter after the peers' prefill started")
	}
	started()
}

// TestPrefillReserveKeepsPodsOpenToTheHigherClasses: with a reserve of a
// quarter of eight pods, once a high request came, the low class's cold
// prompts take pods until only two are open under the prefill bound; the
// high class still takes any pod, and a low waiter gets a pod only once a
// first byte leaves three open. Without the reserve the low class takes
// every open pod.
func TestPrefillReserveKeepsPodsOpenToTheHigherClasses(t *testing.T) {
	const high, low = 0, 2
	pods := make([]scoring.Pod, 8)
	for i := range pods {
		pods[i].Name = fmt.Sprintf("p%d", i)
	}
	fleet := func() []scoring.Pod { return slices.Clone(pods) }
	for _, reserve := range []float64{0, 0.25} {
		a := newAdmission(admissionLimits{prefill: 2048, reserve: reserve, maxQueue: 8, share: 1, byClass: true}, testClasses, fleet)
		open := func(class int) []scoring.Pod {
			t.Helper()
			return a.withRoom(fleet(), class, nil)
		}
		if len(open(high)) != 8 { // the high request comes
			t.Fatal("the highest class held with every pod open")
		}
		var startedLow []func()
		var lowPods []string
		for {
			o := open(low)
			if len(o) == 0 {
				break
			}
			if !a.acquire(o[0].Name, low, nil) {
				t.Fatalf("reserve %v: withRoom offered %s to the low class, acquire refused it", reserve, o[0].Name)
			}
			startedLow = append(startedLow, a.begin(o[0].Name, false, low, 2300))
			lowPods = append(lowPods, o[0].Name)
		}
		if want := 8 - int(reserve*8); len(startedLow) != want {
			t.Fatalf("reserve %v: the low class's cold prompts took %d pods, want %d", reserve, len(startedLow), want)
		}
		if reserve == 0 {
			continue
		}
		if o := open(high); len(o) != 8 {
			t.Fatalf("the high class offered %v, want every pod", o)
		}
		var reserved []string
		for _, p := range pods {
			if !slices.Contains(lowPods, p.Name) {
				reserved = append(reserved, p.Name)
			}
		}
		waiter := queueFor(t, a, Flow{Class: low}, "")
		highStarted := a.begin(reserved[0], false, high, 2048) // one reserved pod takes a cold high prompt
		startedLow[0]()                                        // a low prompt's first byte: two pods open
		none(t, waiter, "a low waiter with two of eight pods open")
		startedLow[1]() // three open
		select {
		case r := <-waiter:
			if mayGo := []string{lowPods[0], lowPods[1], reserved[1]}; r.err != nil || !slices.Contains(mayGo, r.pod) {
				t.Fatalf("the low waiter: %+v, want one of the open pods %v", r, mayGo)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the low waiter got no pod with three of eight open")
		}
		highStarted()
	}
}

// TestNewRefusesAPrefillReserveItCannotKeep: a reserve outside [0, 1), or
// one without the prefill bound it keeps pods open under, is refused
// naming the field.
func TestNewRefusesAPrefillReserveItCannotKeep(t *testing.T) {
	s, _ := newServer(t, map[string]string{"a": okPod(t).URL}, Config{})
	for _, tc := range []struct {
		reserve float64
		prefill int
		want    string
	}{{1, 2048, "PrefillReserve 1:"}, {-0.25, 2048, "PrefillReserve -0.25:"}, {0.25, 0, "MaxPendingPrefillPerPod 0 turns off"}} {
		cfg := s.cfg
		cfg.PrefillReserve, cfg.MaxPendingPrefillPerPod = tc.reserve, tc.prefill
		if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("reserve %v with a prefill bound of %d: %v, want an error naming %q", tc.reserve, tc.prefill, err, tc.want)
		}
	}
	cfg := s.cfg
	cfg.PrefillReserve, cfg.MaxPendingPrefillPerPod = 0.25, 2048
	if _, err := New(cfg); err != nil {
		t.Errorf("reserve 0.25 under a prefill bound of 2048: %v", err)
	}
}

// BenchmarkLowClassPlacement is admission's cost of placing one guarded
// low-class request on a fleet of 256 pods: withRoom over every pod, the
// slot, the begin and the first byte (which recount the open pods under a
// reserve), with and without the prefill reserve (BENCHMARKS.md, 2026-12-07
// twelfth session).
func BenchmarkLowClassPlacement(b *testing.B) {
	const high, low = 0, 2
	pods := make([]scoring.Pod, 256)
	for i := range pods {
		pods[i].Name = fmt.Sprintf("pod-%d", i)
	}
	for _, reserve := range []float64{0, 0.25} {
		b.Run(fmt.Sprintf("reserve=%v", reserve), func(b *testing.B) {
			a := newAdmission(admissionLimits{prefill: 2048, reserve: reserve, maxQueue: 8, share: 1, byClass: true}, testClasses, nil)
			a.withRoom(slices.Clone(pods), high, nil) // the guard holds the low class
			cands := make([]scoring.Pod, len(pods))
			for i := 0; b.Loop(); i++ {
				open := a.withRoom(append(cands[:0], pods...), low, nil)
				if len(open) == 0 {
					b.Fatal("no pod open to the low class")
				}
				pod := open[i%len(open)].Name
				if !a.acquire(pod, low, nil) {
					b.Fatal("acquire refused a pod withRoom offered")
				}
				a.begin(pod, false, low, 1500)()
				a.release(pod, nil)
			}
		})
	}
}
