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

	"github.com/llmd-dev/terraform-provider-llmd/router/discovery"
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

// handedTo waits up to 10 s for the waiter on ch to be handed room on pod.
func handedTo(t *testing.T, ch <-chan result, pod, what string) {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil || r.pod != pod {
			t.Fatalf("%s: got %+v, want %s", what, r, pod)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no pod in 10 s, want %s", what, pod)
	}
}

// TestPendingBoundShutsThePodUntilItAnswers: with a pending bound of 1 and
// no cap, a pod with one request yet to answer a byte has no room, for
// withRoom and for acquire; its first byte hands the room to the waiter,
// and only to one: the next waits for that one's first byte in turn.
func TestPendingBoundShutsThePodUntilItAnswers(t *testing.T) {
	a := newAdmission(admissionLimits{pending: 1, maxQueue: 8, share: 1}, testClasses, nil)
	if !a.acquire("p", 1, nil, 1) {
		t.Fatal("an idle pod refused a request")
	}
	started := a.begin("p", false, 1, 0)
	if open := a.withRoom([]scoring.Pod{{Name: "p"}}, 1, nil, nil); len(open) != 0 || a.acquire("p", 1, nil, 1) {
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
	blind.acquire("p", low, nil, 1)
	blind.begin("p", false, low, 0)
	if open := blind.withRoom(slices.Clone(pod), high, nil, nil); len(open) != 0 || blind.acquire("p", high, nil, 1) {
		t.Fatalf("class-blind: a high request found room behind an unanswered low one: %v", open)
	}

	a := newAdmission(admissionLimits{pending: 1, maxQueue: 8, share: 1, byClass: true}, testClasses, nil)
	a.acquire("p", low, nil, 1)
	lowStarted := a.begin("p", false, low, 0)
	if open := a.withRoom(slices.Clone(pod), low, nil, nil); len(open) != 0 || a.acquire("p", low, nil, 1) {
		t.Fatalf("a second low request found room behind an unanswered low one: %v", open)
	}
	if open := a.withRoom(slices.Clone(pod), high, nil, nil); len(open) != 1 || !a.acquire("p", high, nil, 1) {
		t.Fatalf("a high request found no room behind an unanswered low one: %v", open)
	}
	highStarted := a.begin("p", false, high, 0)
	if a.acquire("p", high, nil, 1) {
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
	a.acquire("a", 1, nil, 1)
	a.acquire("b", 1, nil, 1)
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
	g := newGatedFront(t, Config{MaxPendingPerPod: 1})
	body := `{"model":"m","stream":true,"prompt":"` + strings.Repeat("the lighthouse keeper counts the ships at night ", 40) + `"}`
	g.send(body, "")
	waitUntil(t, "the first request in flight", func() bool { n := g.inFlight(); return n["a"]+n["b"] == 1 })
	x := "a"
	if g.inFlight()["b"] == 1 {
		x = "b"
	}
	g.send(body, "")
	waitUntil(t, "the second request queued", func() bool { return g.s.adm.queued() == 1 })
	if n := g.inFlight(); n["a"]+n["b"] != 1 {
		t.Fatalf("in flight %v: the second request went to the idle pod", n)
	}
	g.open(x)
	for range 2 {
		if got := <-g.served; got != x {
			t.Errorf("a request went to %q, want %s, the pod holding its prefix", got, x)
		}
	}
}

// gatedFront is a Server in front of two stand-in pods, a and b, that send
// a stream's headers at once and its first event when the test opens their
// gate (gatedStreamPod), as vLLM does after a queued request's prefill.
type gatedFront struct {
	t      *testing.T
	s      *Server
	fleet  *discovery.Fleet
	url    string
	gates  map[string]chan struct{}
	opened map[string]bool
	served chan string // the pod of each request that ended, or its error
}

// newGatedFront starts the server with cfg and waits until both pods are
// scraped; pods still gated when the test ends are opened.
func newGatedFront(t *testing.T, cfg Config) *gatedFront {
	g := &gatedFront{t: t, gates: map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})},
		opened: map[string]bool{}, served: make(chan string, 8)}
	urls := map[string]string{}
	for name, gate := range g.gates {
		urls[name] = gatedStreamPod(t, gate).URL
	}
	g.s, g.fleet = newServer(t, urls, cfg)
	front := httptest.NewServer(g.s)
	t.Cleanup(front.Close)
	g.url = front.URL
	t.Cleanup(func() { g.open("a"); g.open("b") }) // a failed test leaves no stream hanging
	waitUntil(t, "both pods scraped", func() bool {
		pods := g.fleet.Pods(nil)
		return len(pods) == 2 && pods[0].Load.Fresh && pods[1].Load.Fresh
	})
	return g
}

// open lets pod answer its streams.
func (g *gatedFront) open(pod string) {
	if !g.opened[pod] {
		g.opened[pod] = true
		close(g.gates[pod])
	}
}

// send posts a completion body, in class ("" the default), and reports the
// pod that served it on served once its stream ends.
func (g *gatedFront) send(body, class string) {
	req, err := http.NewRequest(http.MethodPost, g.url+"/v1/completions", strings.NewReader(body))
	if err != nil {
		g.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if class != "" {
		req.Header.Set(PriorityHeader, class)
	}
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			g.served <- "error: " + err.Error()
			return
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		g.served <- resp.Header.Get(PodHeader)
	}()
}

// inFlight is the router's requests in flight per pod.
func (g *gatedFront) inFlight() map[string]int {
	out := map[string]int{}
	for _, p := range g.fleet.Pods(nil) {
		out[p.Name] = p.Load.InFlight
	}
	return out
}

// TestPrefillBoundHoldsTheLowerClassesBehindUnansweredPrefill: with a
// prefill bound of 2,048 tokens, once a high request came, a pod whose
// unanswered requests have that many uncached prompt tokens to compute is
// shut to the lower classes and open to the highest (which only its own
// class's prompts hold, TestPrefillBoundLetsTheHighestClassStartAlone);
// requests whose prefix the pod holds (few tokens each) pass until their
// tokens reach the bound; a first byte hands the room to a lower-class
// waiter. Before any higher-class request, and a minute after the last,
// nothing is held.
func TestPrefillBoundHoldsTheLowerClassesBehindUnansweredPrefill(t *testing.T) {
	const high, mid, low = 0, 1, 2
	a := newAdmission(admissionLimits{prefill: 2048, maxQueue: 8, share: 1, byClass: true}, testClasses, nil)
	clock := time.Unix(1000, 0)
	a.guard.now = func() time.Time { return clock }
	pod := []scoring.Pod{{Name: "p"}}
	place := func(class, uncached int) (started func()) {
		t.Helper()
		if open := a.withRoom(slices.Clone(pod), class, nil, nil); len(open) != 1 || !a.acquire("p", class, nil, 1) {
			t.Fatalf("class %d with %d uncached tokens: no room, %d tokens unanswered", class, uncached, a.unansTk["p"])
		}
		return a.begin("p", false, class, uncached)
	}
	shut := func(class int) bool {
		t.Helper()
		open := a.withRoom(slices.Clone(pod), class, nil, nil)
		if acquired := a.acquire("p", class, nil, 1); acquired != (len(open) == 1) {
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
		t.Fatal("the highest class held behind the low class's 2,300 unanswered tokens")
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
		return len(a.withRoom(fleet(), class, nil, nil)) == 1
	}

	peerTokens.Store(1500)
	if !open(high) { // the high request comes
		t.Fatal("the highest class held behind the peers' prefill")
	}
	if !open(low) || !a.acquire("p", low, nil, 1) {
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
	handedTo(t, waiter, "p", "the low waiter after the peers' prefill started")
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
			return a.withRoom(fleet(), class, nil, nil)
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
			if !a.acquire(o[0].Name, low, nil, 1) {
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
		var reserved []string
		for _, p := range pods {
			if !slices.Contains(lowPods, p.Name) {
				reserved = append(reserved, p.Name)
			}
		}
		if o := open(high); len(o) != 8 {
			t.Fatalf("the high class offered %v, want every pod: the lower classes' prompts do not hold it", o)
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
			a.withRoom(slices.Clone(pods), high, nil, nil) // the guard holds the low class
			cands := make([]scoring.Pod, len(pods))
			for i := 0; b.Loop(); i++ {
				open := a.withRoom(append(cands[:0], pods...), low, nil, nil)
				if len(open) == 0 {
					b.Fatal("no pod open to the low class")
				}
				pod := open[i%len(open)].Name
				if !a.acquire(pod, low, nil, 1) {
					b.Fatal("acquire refused a pod withRoom offered")
				}
				a.begin(pod, false, low, 1500)()
				a.release(pod, nil)
			}
		})
	}
}

// TestPrefillBoundLetsTheHighestClassStartAlone: under the prefill bound,
// with classes below it, a request of the highest class starts on a pod
// only when none of this replica's high requests there has yet to answer a
// byte or its prefill fits the bound beside theirs (leadFits): a second
// cold prompt takes the other pod, a third waits for whichever pod's prompt
// answers first, a warm request (128 tokens) passes beside 1,900
// unanswered tokens but not beside a cold prompt; the lower classes' and
// the peers' prompts do not hold it. With one class nothing is held.
func TestPrefillBoundLetsTheHighestClassStartAlone(t *testing.T) {
	const high = 0
	var peerTokens atomic.Int64
	fleet := func() []scoring.Pod {
		return []scoring.Pod{{Name: "a"}, {Name: "b", Load: scoring.Load{PeerPendingTokens: int(peerTokens.Load())}}}
	}
	cold := func() *prefillDemand { return &prefillDemand{byPod: map[string]int{"a": 2176, "b": 2176}, whole: 2176} }
	warmOnA := &prefillDemand{byPod: map[string]int{"a": 128, "b": 2176}, whole: 2176}
	names := func(pods []scoring.Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Name)
		}
		return out
	}
	a := newAdmission(admissionLimits{prefill: 2048, maxQueue: 8, share: 1, byClass: true}, testClasses, fleet)
	if got := names(a.withRoom(fleet(), high, nil, cold())); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("a cold prompt with both pods idle offered %v, want both", got)
	}
	if !a.acquire("a", high, nil, 2176) {
		t.Fatal("a cold prompt refused an idle pod")
	}
	coldA := a.begin("a", false, high, 2176)
	if got := names(a.withRoom(fleet(), high, nil, cold())); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("a second cold prompt offered %v, want only b: a is computing 2,176 tokens", got)
	}
	if a.acquire("a", high, nil, 2176) {
		t.Fatal("acquire let a second cold prompt onto a pod computing one")
	}
	if got := names(a.withRoom(fleet(), high, nil, warmOnA)); !slices.Contains(got, "a") {
		t.Fatalf("a warm request (128 tokens on a) offered %v beside a's cold prompt, want a: its suffix adds a sixteenth of a step", got)
	}
	halfWarmOnA := &prefillDemand{byPod: map[string]int{"a": 1000, "b": 2176}, whole: 2176}
	if got := names(a.withRoom(fleet(), high, nil, halfWarmOnA)); slices.Contains(got, "a") {
		t.Fatalf("a request with 1,000 tokens to compute on a offered %v beside a's cold prompt, want a held", got)
	}
	peerTokens.Store(3000) // the peers' prompts computing on b
	lowOnB := a.begin("b", false, 2, 2176)
	if got := names(a.withRoom(fleet(), high, nil, cold())); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("a cold prompt offered %v with a low prompt and the peers' 3,000 tokens on b, want b", got)
	}
	lowOnB()
	if !a.acquire("b", high, nil, 2176) {
		t.Fatal("acquire refused b for the second cold prompt")
	}
	coldB := a.begin("b", false, high, 2176)
	waiter := queueWith(t, a, Flow{Class: high}, "", nil, cold())
	none(t, waiter, "a third cold prompt while both pods compute")
	coldB() // b's first byte: b computes nothing
	handedTo(t, waiter, "b", "the third cold prompt, after b's first byte (b's prefill answered first)")
	coldA()
	short := a.begin("a", false, high, 300)
	if slices.Contains(names(a.withRoom(fleet(), high, nil, &prefillDemand{byPod: map[string]int{"a": 300, "b": 2176}, whole: 2176})), "a") {
		t.Fatal("a request with 300 tokens to compute offered a beside another's 300: more than an eighth of the bound goes to a pod computing none")
	}
	short()

	one := newAdmission(admissionLimits{prefill: 2048, maxQueue: 8, share: 1}, testClasses[:1], fleet)
	one.begin("a", false, high, 2176)
	if got := names(one.withRoom(fleet(), high, nil, cold())); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("with one class a cold prompt was offered %v, want both pods", got)
	}
}

// TestPrefillBoundCountsThePeersHighestClass: the peer replicas' prompts of
// the highest class still computing on a pod (as they last reported them)
// hold this replica's cold prompt of that class from it like its own; a
// queued one takes the pod once the peers report it answered.
func TestPrefillBoundCountsThePeersHighestClass(t *testing.T) {
	const high = 0
	var peerTop atomic.Int64
	fleet := func() []scoring.Pod {
		top := int(peerTop.Load())
		return []scoring.Pod{{Name: "a", Load: scoring.Load{PeerPendingTokens: top, PeerTopPendingTokens: top}}}
	}
	cold := &prefillDemand{byPod: map[string]int{"a": 2176}, whole: 2176}
	warm := &prefillDemand{byPod: map[string]int{"a": 128}, whole: 2176}
	a := newAdmission(admissionLimits{prefill: 2048, maxQueue: 8, share: 1, byClass: true}, testClasses, fleet)
	peerTop.Store(2176) // a peer's cold prompt of the highest class computing on a
	if got := a.withRoom(fleet(), high, nil, cold); len(got) != 0 {
		t.Fatalf("a cold prompt offered %v beside a peer's, want none", got)
	}
	if got := a.withRoom(fleet(), high, nil, warm); len(got) != 1 {
		t.Fatalf("a warm prompt (128 tokens) offered %v beside a peer's cold one, want a: its suffix adds a sixteenth of a step", got)
	}
	waiter := queueWith(t, a, Flow{Class: high}, "", nil, cold)
	none(t, waiter, "a cold prompt while the peer's computes")
	peerTop.Store(0) // the peer's prompt answered
	handedTo(t, waiter, "a", "the cold prompt after the peer's answered")
}

// TestTheHighClassesColdPromptsStartOneAPod runs the server under the
// prefill bound in front of two stand-in pods that answer a stream's first
// event when the test opens their gate. Three high-class prompts of about
// 1,500 tokens that no pod holds: the first two take a pod each, the third
// waits for no pod in particular (it has no prefix to follow) and takes the
// first pod whose prompt answers; a prompt extending the first one's goes
// beside it at once, its few uncached tokens under an eighth of the bound.
func TestTheHighClassesColdPromptsStartOneAPod(t *testing.T) {
	g := newGatedFront(t, Config{MaxPendingPrefillPerPod: 2048})
	prompt := func(subject string) string {
		return `{"model":"m","stream":true,"max_tokens":8,"prompt":"` +
			strings.Repeat("the "+subject+" keeper counts the ships at night ", 170) + `"}`
	}
	g.send(prompt("lighthouse"), "high")
	waitUntil(t, "the first prompt on a pod", func() bool { n := g.inFlight(); return n["a"]+n["b"] == 1 })
	first, other := "a", "b"
	if g.inFlight()["b"] == 1 {
		first, other = "b", "a"
	}
	g.send(prompt("harbour"), "high")
	waitUntil(t, "the second prompt on the other pod", func() bool { n := g.inFlight(); return n["a"] == 1 && n["b"] == 1 })
	g.send(prompt("canal"), "high")
	waitUntil(t, "the third prompt queued", func() bool { return g.s.adm.queued() == 1 })
	g.s.adm.mu.Lock()
	var want []string
	for _, q := range g.s.adm.bands[0].tenants {
		for e := q.Front(); e != nil; e = e.Next() {
			want = append(want, e.Value.(*waiter).want)
		}
	}
	g.s.adm.mu.Unlock()
	if !slices.Equal(want, []string{""}) {
		t.Fatalf("the queued cold prompt wants %q, want no pod in particular", want)
	}
	g.send(strings.Replace(prompt("lighthouse"), `"}`, `and writes them down"}`, 1), "high")
	waitUntil(t, "the prompt extending the first beside it", func() bool { return g.inFlight()[first] == 2 })
	g.open(other)
	for _, what := range []string{"the second prompt", "the third prompt, after the pod's first answer"} {
		if got := <-g.served; got != other {
			t.Fatalf("%s ended with %q, want %s", what, got, other)
		}
	}
	g.open(first)
	for range 2 {
		if got := <-g.served; got != first {
			t.Fatalf("the first prompt or its extension ended with %q, want %s", got, first)
		}
	}
}
