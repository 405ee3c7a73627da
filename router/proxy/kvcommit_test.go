package proxy

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// demandOf is the KV demand of a prompt of prefix's tokens then n more of
// its own (seed tells requests apart), in blocks of 4 tokens, reserving
// out output tokens.
func demandOf(prefix, n, seed, out int) *kvDemand {
	toks := make([]uint32, 0, prefix+n)
	for i := range prefix {
		toks = append(toks, uint32(i))
	}
	for i := range n {
		toks = append(toks, uint32(1_000_000*seed+i))
	}
	return newKVDemand(&scoring.Request{Tokens: toks}, 4, out)
}

// TestKVDemandCountsThePromptAndTheOutput: full prompt blocks by key, the
// rest (the partial block, the output up to its bound or the reserve) as
// its own.
func TestKVDemandCountsThePromptAndTheOutput(t *testing.T) {
	d := newKVDemand(&scoring.Request{Tokens: make([]uint32, 42), MaxOutputTokens: 8}, 4, 1000)
	if len(d.chains) != 1 || len(d.chains[0]) != 10 || d.own != 3 { // 42 tokens: 10 full blocks; 42 + 8 = 50 tokens, 13 blocks
		t.Errorf("chains %d, keys %d, own %d; want 1, 10, 3", len(d.chains), len(d.chains[0]), d.own)
	}
	if d := newKVDemand(&scoring.Request{Tokens: make([]uint32, 8)}, 4, 12); d.own != 3 {
		t.Errorf("no bound: own %d, want the reserve's 3", d.own)
	}
	if d := newKVDemand(&scoring.Request{Tokens: make([]uint32, 8), MaxOutputTokens: 400}, 4, 12); d.own != 3 {
		t.Errorf("a bound past the reserve: own %d, want the reserve's 3", d.own)
	}
	if newKVDemand(&scoring.Request{}, 4, 12) != nil || newKVDemand(&scoring.Request{Tokens: make([]uint32, 8)}, 0, 12) != nil {
		t.Error("a demand without token ids or a block size")
	}
}

// TestKVDemandCountsEveryPromptOfABatch: a completion batch holds a
// sequence per prompt on its one engine: blocks its prompts share count
// once, each prompt's own blocks and output count apart, and the pod gives
// every block back when the batch ends.
func TestKVDemandCountsEveryPromptOfABatch(t *testing.T) {
	shared := make([]uint32, 8) // 2 blocks of 4
	prompt := func(seed uint32) []uint32 {
		return append(slices.Clone(shared), seed, seed, seed, seed, seed, seed) // 1 full block and 2 tokens more
	}
	batch := &scoring.Request{Tokens: prompt(1), More: [][]uint32{prompt(2), prompt(3)}, MaxOutputTokens: 6}
	d := newKVDemand(batch, 4, 1000)
	if len(d.chains) != 3 {
		t.Fatalf("%d chains, want one per prompt: 3", len(d.chains))
	}
	// Each prompt: 14 tokens and 6 of output = 5 blocks, 3 of them full prompt blocks: 2 own.
	if d.own != 6 {
		t.Errorf("own %d, want 2 per prompt: 6", d.own)
	}
	var k podKV
	k.refs = map[uint64]int{}
	// The shared 2 blocks once, 1 more full block per prompt, 6 own.
	if got := k.adds(d); got != 2+3+6 {
		t.Errorf("an empty pod: adds %d, want 11", got)
	}
	k.add(d, 1)
	if k.blocks() != 11 {
		t.Errorf("held %d blocks, want 11", k.blocks())
	}
	// The same batch again: its prompts' blocks are held; only its own add.
	if got := k.adds(d); got != 6 {
		t.Errorf("a held batch: adds %d, want its own 6", got)
	}
	// A single request on the shared prefix with a prompt of its own.
	one := newKVDemand(&scoring.Request{Tokens: prompt(4), MaxOutputTokens: 6}, 4, 1000)
	if got := k.adds(one); got != 1+2 {
		t.Errorf("a request on the batch's prefix: adds %d, want 3", got)
	}
	k.add(d, -1)
	if k.blocks() != 0 || len(k.refs) != 0 || k.n != 0 {
		t.Errorf("after the batch ended: %d blocks, %d keys, %d requests held", k.blocks(), len(k.refs), k.n)
	}
}

// TestKVBoundHoldsTheLowerClassesToTheirShare: on a pod with a cache of
// 100 blocks and a headroom of 0.2 over three classes, once a high request
// came, the lowest class fills 80 blocks, the middle one 90 and the
// highest any; requests on one prefix hold its blocks once, a new prefix
// counts its own; released requests give their blocks back. A minute
// after the last request of a higher class, a class is no longer held.
func TestKVBoundHoldsTheLowerClassesToTheirShare(t *testing.T) {
	a := newAdmission(admissionLimits{maxQueue: 8, share: 1, kv: true, kvHeadroom: 0.2}, testClasses, nil)
	clock := time.Unix(1000, 0)
	a.guard.now = func() time.Time { return clock }
	pod := []scoring.Pod{{Name: "p", Load: scoring.Load{KVCacheTokens: 400}}}
	const high, mid, low = 0, 1, 2
	a.withRoom(slices.Clone(pod), high, nil, nil) // a high request comes
	var held []*kvDemand
	take := func(class int, d *kvDemand) bool {
		t.Helper()
		if open := a.withRoom(slices.Clone(pod), class, d, nil); len(open) == 0 {
			if a.acquire("p", class, d, 1) {
				t.Fatal("acquire took what withRoom refused")
			}
			return false
		}
		if !a.acquire("p", class, d, 1) {
			t.Fatal("acquire refused what withRoom offered")
		}
		held = append(held, d)
		return true
	}
	// A 200-token prefix (50 blocks) and 40 tokens of each request's own
	// with no output: 50 + 10 blocks, then 10 for each more.
	for i := range 3 {
		if !take(low, demandOf(200, 40, i, 0)) {
			t.Fatalf("low request %d (%d blocks) refused", i, 60+10*i)
		}
	}
	if take(low, demandOf(200, 40, 3, 0)) {
		t.Fatal("a low request past 80 of 100 blocks admitted")
	}
	if !take(mid, demandOf(200, 40, 3, 0)) {
		t.Fatal("a middle-class request within 90 of 100 blocks refused")
	}
	if take(mid, demandOf(0, 4, 4, 0)) { // one block, a new prefix
		t.Fatal("a middle-class request past 90 blocks admitted")
	}
	for i := range 3 { // 30 blocks past the cache: the engine preempts the lower classes for these
		if !take(high, demandOf(200, 40, 5+i, 0)) {
			t.Fatal("the highest class refused")
		}
	}
	for _, d := range held {
		a.release("p", d)
	}
	if len(a.kv.pods) != 0 {
		t.Fatalf("released requests still hold %+v", a.kv.pods["p"])
	}
	// A second prefix counts its own blocks.
	take(low, demandOf(200, 40, 0, 0))
	if take(low, demandOf(100, 0, 0, 0)) == false {
		t.Fatal("a prefix the pod's request holds, no new blocks, refused")
	}
	if take(low, demandOf(0, 100, 9, 0)) { // 25 blocks of its own: 85
		t.Fatal("a new prefix past the share admitted")
	}
	// The peers' requests count as this replica's own: one on the held
	// prefix adds its own 15 blocks only (75 of 100), one on a new prefix
	// its 20 (95), past the low class's share until it ends.
	same, fresh := demandOf(200, 60, 7, 0), demandOf(0, 80, 8, 0)
	a.peerKV("p", same.chains, same.own, 1)
	if !take(low, demandOf(100, 0, 0, 0)) {
		t.Fatal("a peer's request on the held prefix counted its prefix again")
	}
	a.peerKV("p", fresh.chains, fresh.own, 1)
	if take(low, demandOf(100, 0, 0, 0)) {
		t.Fatal("a peer's request on a new prefix not counted")
	}
	a.peerKV("p", fresh.chains, fresh.own, -1)
	if !take(low, demandOf(100, 0, 0, 0)) {
		t.Fatal("a peer's ended request still counted")
	}
	a.peerKV("p", same.chains, same.own, -1)
	clock = clock.Add(guardFor - time.Second)
	if take(low, demandOf(0, 100, 9, 0)) {
		t.Fatal("the low class not held 59 s after the high request")
	}
	clock = clock.Add(2 * time.Second)
	if !take(low, demandOf(0, 100, 9, 0)) {
		t.Fatal("the low class held a minute after the last higher-class request")
	}
}

// TestKVBoundHoldsEveryClassOnAPreemptingPod: with no higher class to
// guard for, a pod takes requests past its cache until its engine
// preempts; from then on every class, the highest too, starts there only
// within the whole cache, and once the engine has not preempted for a
// minute (the scrape says so) the bound lets them past again.
func TestKVBoundHoldsEveryClassOnAPreemptingPod(t *testing.T) {
	a := newAdmission(admissionLimits{maxQueue: 8, share: 1, kv: true, kvHeadroom: 0.2}, testClasses, nil)
	calm := []scoring.Pod{{Name: "p", Load: scoring.Load{KVCacheTokens: 400}}}
	pressed := []scoring.Pod{{Name: "p", Load: scoring.Load{KVCacheTokens: 400, Preempting: true}}}
	const high, low = 0, 2
	take := func(pods []scoring.Pod, class int, d *kvDemand) bool {
		t.Helper()
		if open := a.withRoom(slices.Clone(pods), class, d, nil); len(open) == 0 {
			return false
		}
		if !a.acquire("p", class, d, 1) {
			t.Fatal("acquire refused what withRoom offered")
		}
		return true
	}
	// 50 prefix blocks and 10 of each request's own: 60, 70, ..., 110
	// blocks of a 100-block cache, all taken while the engine has not
	// preempted (nothing guards: no higher class has come).
	var held []*kvDemand
	for i := range 6 {
		d := demandOf(200, 40, i, 0)
		if !take(calm, low, d) {
			t.Fatalf("low request %d refused on a pod that has not preempted", i)
		}
		held = append(held, d)
	}
	for _, class := range []int{low, high} {
		if take(pressed, class, demandOf(200, 40, 10+class, 0)) {
			t.Fatalf("class %d admitted past the cache of a pod whose engine preempts", class)
		}
	}
	a.release("p", held[0]) // 100 blocks
	a.release("p", held[1]) // 90
	if !take(pressed, high, demandOf(200, 40, 30, 0)) {
		t.Fatal("a request that fills the cache to its last block refused")
	}
	if take(pressed, high, demandOf(200, 4, 31, 0)) {
		t.Fatal("one block past the cache admitted")
	}
	// The high requests that came guard the lower classes for a minute,
	// which hold them to their share; the highest goes past the cache again.
	if !take(calm, high, demandOf(200, 40, 20, 0)) {
		t.Fatal("the highest class refused once the engine stopped preempting")
	}
	if take(calm, low, demandOf(200, 40, 21, 0)) {
		t.Fatal("the low class let past its share while a higher class came within the minute")
	}
}

// TestKVBoundHandsFreedCacheToTheHigherClass: a waiter is handed a pod
// only when its demand fits what the releases freed; the cache freed goes
// to the higher class first, and a handed slot not used gives it back.
func TestKVBoundHandsFreedCacheToTheHigherClass(t *testing.T) {
	a := newAdmission(admissionLimits{maxQueue: 8, share: 1, kv: true, kvHeadroom: 0.2}, testClasses, nil)
	a.withRoom([]scoring.Pod{{Name: "p", Load: scoring.Load{KVCacheTokens: 400}}}, 0, nil, nil) // a high request comes
	const mid, low = 1, 2
	big, small := demandOf(0, 280, 1, 0), demandOf(0, 20, 2, 0) // 70 and 5 blocks
	if !a.acquire("p", low, big, 1) || !a.acquire("p", low, small, 1) {
		t.Fatal("room refused on a pod holding 75 of 100 blocks")
	}
	lowWaiter := queueForKV(t, a, Flow{Class: low}, demandOf(0, 40, 3, 0)) // 10 blocks: 85 > 80
	midWaiter := queueForKV(t, a, Flow{Class: mid}, demandOf(0, 40, 4, 0)) // 85 <= 90
	none(t, midWaiter, "a middle-class waiter before any release")
	a.release("p", small) // 70 held: both fit; the middle class goes first
	r := <-midWaiter
	if r.err != nil || r.pod != "p" {
		t.Fatalf("middle-class waiter: %+v", r)
	}
	none(t, lowWaiter, "the low waiter, with the middle one's 10 blocks held (80 + 10 > 80)")
	a.unhand("p", demandOf(0, 40, 4, 0)) // the middle one went elsewhere
	if r := <-lowWaiter; r.err != nil || r.pod != "p" {
		t.Fatalf("low waiter after the handed room came back: %+v", r)
	}
}

// kvLedger is an in-process fake of the peer exchange's sending side
// (KVSharer), named as such: it numbers the demands it is told of and
// records which are live. The exchange itself is tested in router/peers.
type kvLedger struct {
	next uint64
	live map[uint64]string // id -> pod
	told []string          // classes the peers were told of
}

func (l *kvLedger) KVClassCame(class string) { l.told = append(l.told, class) }

func (l *kvLedger) KVHeld(pod string, _ [][]uint64, _ int) uint64 {
	l.next++
	l.live[l.next] = pod
	return l.next
}

func (l *kvLedger) KVEnded(id uint64) {
	if _, ok := l.live[id]; !ok {
		panic(fmt.Sprintf("demand %d ended twice or never held", id))
	}
	delete(l.live, id)
}

// TestKVBoundTellsThePeersOfItsDemands: every demand this replica holds on
// a pod is shared until it is released there, a request holding a handed
// pod and the one it took instead each once, and room a peer's ended
// request frees goes to a waiter at once.
func TestKVBoundTellsThePeersOfItsDemands(t *testing.T) {
	a := newAdmission(admissionLimits{maxQueue: 8, share: 1, kv: true, kvHeadroom: 0.2}, testClasses, nil)
	ledger := &kvLedger{live: make(map[uint64]string)}
	a.shareKV(ledger)
	const low = 2
	d := demandOf(0, 40, 1, 0)
	if !a.acquire("p", low, d, 1) || !a.acquire("q", low, d, 1) {
		t.Fatal("room refused on empty pods")
	}
	if len(ledger.live) != 2 {
		t.Fatalf("live shared demands %v, want one on p and one on q", ledger.live)
	}
	a.unhand("p", d)
	if len(ledger.live) != 1 || ledger.live[2] != "q" {
		t.Fatalf("live shared demands %v after p's release, want q's only", ledger.live)
	}
	a.release("q", d)
	if len(ledger.live) != 0 || len(a.kv.shared) != 0 {
		t.Fatalf("after every release: shared %v, kept %v", ledger.live, a.kv.shared)
	}

	// A peer's request fills p past the low class's share (a high request
	// came): a low waiter gets p when it ends.
	a.withRoom([]scoring.Pod{{Name: "p", Load: scoring.Load{KVCacheTokens: 400}}}, 0, nil, nil)
	peer := demandOf(0, 300, 2, 0) // 75 blocks
	a.peerKV("p", peer.chains, peer.own, 1)
	w := queueForKV(t, a, Flow{Class: low}, demandOf(0, 40, 3, 0)) // 75 + 10 > 80
	none(t, w, "a low waiter while the peer's request fills the pod")
	a.peerKV("p", peer.chains, peer.own, -1)
	if r := <-w; r.err != nil || r.pod != "p" {
		t.Fatalf("low waiter after the peer's request ended: %+v", r)
	}
}

// TestKVBoundGuardsForThePeersHigherClasses: a high request coming to a
// peer holds this replica's lower classes to their shares as one coming
// here does (a client's connections may all reach one replica), and this
// replica tells its peers of its own classes' requests at most once a
// second each.
func TestKVBoundGuardsForThePeersHigherClasses(t *testing.T) {
	a := newAdmission(admissionLimits{maxQueue: 8, share: 1, kv: true, kvHeadroom: 0.2}, testClasses, nil)
	clock := time.Unix(1000, 0)
	a.guard.now = func() time.Time { return clock }
	ledger := &kvLedger{live: make(map[uint64]string)}
	a.shareKV(ledger)
	const low = 2
	pod := []scoring.Pod{{Name: "p", Load: scoring.Load{KVCacheTokens: 400}}}
	if !a.acquire("p", low, demandOf(0, 300, 1, 0), 1) { // 75 of 100 blocks
		t.Fatal("room refused on an empty pod")
	}
	more := demandOf(0, 40, 2, 0) // 10 blocks: past the low class's 80
	if len(a.withRoom(slices.Clone(pod), low, more, nil)) != 1 {
		t.Fatal("the low class held with no higher class's request anywhere")
	}
	a.peerClassCame("no-such-class")
	if len(a.withRoom(slices.Clone(pod), low, more, nil)) != 1 {
		t.Fatal("a class this replica does not know held the low class")
	}
	a.peerClassCame("high")
	if len(a.withRoom(slices.Clone(pod), low, more, nil)) != 0 {
		t.Fatal("a peer's high request did not hold the low class to its share")
	}
	if !slices.Equal(ledger.told, []string{"low"}) {
		t.Fatalf("peers told of %v, want [low] (once a second)", ledger.told)
	}
	clock = clock.Add(tellEvery)
	for range 2 {
		a.withRoom(slices.Clone(pod), low, more, nil)
		a.withRoom(slices.Clone(pod), 0, nil, nil)
	}
	if !slices.Equal(ledger.told, []string{"low", "low", "high"}) {
		t.Fatalf("peers told of %v, want low again a second later, then high once", ledger.told)
	}
}

// queueForKV is queueFor with a KV demand.
func queueForKV(t *testing.T, a *admission, flow Flow, d *kvDemand) <-chan result {
	t.Helper()
	return queueWith(t, a, flow, "", d, nil)
}

// TestKVBoundThroughTheServer runs the server with the KV bound in front of
// one stand-in pod stating a cache of 64 blocks of 16 tokens and holding
// every stream open until the test opens its gate. A short high request (2
// blocks) comes first. Low requests of 400 prompt tokens and 240 output
// tokens hold 40 blocks each: the first is sent, a second with another
// prompt waits (82 blocks, past the low class's 57.6), a low one on the
// first's prompt, adding 2 blocks, is sent past it, and so is a high one;
// once the pod answers, the waiter is sent.
func TestKVBoundThroughTheServer(t *testing.T) {
	gate := make(chan struct{})
	pod := gatedStreamPodScraped(t, gate, func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/metrics" {
			return false
		}
		_, _ = io.WriteString(w, "vllm:num_requests_running 0\nvllm:num_requests_waiting 0\nvllm:kv_cache_usage_perc 0\n"+
			`vllm:cache_config_info{block_size="16",num_gpu_blocks="64"} 1`+"\n")
		return true
	})
	s, fleet := newServer(t, map[string]string{"p": pod.URL}, Config{KVOutputReserve: 4096})
	front := httptest.NewServer(s)
	t.Cleanup(front.Close)
	opened := false
	t.Cleanup(func() { // first: a failed test leaves no stream hanging
		if !opened {
			close(gate)
		}
	})
	waitUntil(t, "the pod's cache scraped", func() bool {
		pods := fleet.Pods(nil)
		return len(pods) == 1 && pods[0].Load.KVCacheTokens == 1024
	})
	prompt := func(from, n int) string {
		ids := make([]string, n)
		for i := range ids {
			ids[i] = strconv.Itoa(from + i)
		}
		return "[" + strings.Join(ids, ",") + "]"
	}
	statuses := make(chan int, 5)
	send := func(class, prompt string, maxTokens int) {
		body := fmt.Sprintf(`{"model":"m","stream":true,"max_tokens":%d,"prompt":%s}`, maxTokens, prompt)
		go func() {
			req, _ := http.NewRequest(http.MethodPost, front.URL+"/v1/completions", strings.NewReader(body))
			req.Header.Set(PriorityHeader, class)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				statuses <- 0
				return
			}
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, resp.Body)
			statuses <- resp.StatusCode
		}()
	}
	inFlight := func() int { return fleet.Pods(nil)[0].Load.InFlight }
	send("high", prompt(7000, 16), 16)
	waitUntil(t, "the short high request sent", func() bool { return inFlight() == 1 })
	send("low", prompt(1, 400), 240)
	waitUntil(t, "the first low request sent", func() bool { return inFlight() == 2 })
	send("low", prompt(5000, 400), 240)
	waitUntil(t, "the second low request queued", func() bool { return s.adm.queued() == 1 })
	send("low", prompt(1, 416), 16) // the first's prompt and one block more: 2 blocks added
	waitUntil(t, "the low request on a held prefix sent", func() bool { return inFlight() == 3 })
	send("high", prompt(9000, 400), 240) // 84 + 40 blocks: past the cache, the engine preempts for it
	waitUntil(t, "the high request sent", func() bool { return inFlight() == 4 })
	if q := s.adm.queued(); q != 1 {
		t.Fatalf("%d queued, want the second low request alone", q)
	}
	opened = true
	close(gate)
	for range 5 {
		if code := <-statuses; code != http.StatusOK {
			t.Errorf("a request answered %d", code)
		}
	}
}
