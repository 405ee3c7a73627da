package discovery_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// Each prompt here is a 512-token prefix (32 blocks) plus a 16-token suffix.
const (
	prefixLen    = 512
	prefixBlocks = prefixLen / blockSize
)

// TestRoutesToTrueCache is case (a): a prefix cached on sim-1 by a request
// sent straight to it, which the router never routed, draws the router's
// next request with that prefix to sim-1, and the engine confirms the hit.
func TestRoutesToTrueCache(t *testing.T) {
	f := startSim(t, 3, 20)
	r := startRouter(t, f, config.DefaultScorers()...)
	p := prompts(1, 3, prefixLen)
	suffix := prompts(2, 2, 16)
	complete(t, infoOf(f, "sim-1").HTTP, body(t, with(p[0], suffix[0]), 2))
	r.waitHold(t, p[0], "sim-1", prefixBlocks)

	d, hit := r.serve(t, with(p[0], suffix[1]), 2)
	if d.Pod != "sim-1" || hit < prefixLen {
		t.Fatalf("picked %s with %d cached prompt tokens, want sim-1 with %d\n%v", d.Pod, hit, prefixLen, d)
	}
	if h := d.Scores[1].Hit; h.GPUBlocks != prefixBlocks || h.Speculative != 0 {
		t.Errorf("sim-1's hold %+v, want %d GPU blocks known from events", h, prefixBlocks)
	}
}

// TestStopsPreferringEvictedOrClearedPod is case (b). sim-0 holds the whole
// prefix and sim-1 half of it. Evictions on sim-0 (caused by requests sent
// straight to it) move the router to sim-1 as soon as the index says
// sim-0 holds less; re-cached on sim-0, the prefix draws the router back;
// then sim-0's cache is reset, and the single AllBlocksCleared event that
// follows is enough for the router to stop preferring sim-0.
func TestStopsPreferringEvictedOrClearedPod(t *testing.T) {
	f := startSim(t, 2, 20)
	r := startRouter(t, f, config.DefaultScorers()...)
	p := prompts(3, 1, prefixLen)[0]
	sfx := prompts(4, 1, 16)[0]
	a, b := infoOf(f, "sim-0").HTTP, infoOf(f, "sim-1").HTTP
	complete(t, a, body(t, with(p, sfx), 2))
	complete(t, b, body(t, with(p[:prefixLen/2], sfx), 2))
	r.waitHold(t, p, "sim-0", prefixBlocks)
	r.waitHold(t, p, "sim-1", prefixBlocks/2)
	req := body(t, with(p, sfx), 2)
	if d := r.decide(t, req, false); d.Pod != "sim-0" {
		t.Fatalf("before eviction: %v", d)
	}

	// Evict: sim-0's 256 blocks fill with 1,024-token prompts; the freed
	// prefix blocks are handed out again in LRU order.
	floods := prompts(5, 12, 1024)
	evicted := false
	for i, fl := range floods {
		complete(t, a, body(t, fl, 2))
		time.Sleep(50 * time.Millisecond) // let the step's events arrive
		held := r.hold(p, "sim-0")
		d := r.decide(t, req, false)
		t.Logf("after flood %d: sim-0 holds %d blocks, router picks %s", i, held, d.Pod)
		if held < prefixBlocks/2 {
			if d.Pod != "sim-1" {
				t.Fatalf("sim-0 holds %d blocks, sim-1 %d, yet the router picks %s\n%v", held, prefixBlocks/2, d.Pod, d)
			}
			evicted = true
			break
		}
	}
	if !evicted {
		t.Fatal("the floods never evicted the prefix from sim-0")
	}

	complete(t, a, body(t, with(p, sfx), 2))
	r.waitHold(t, p, "sim-0", prefixBlocks)
	if d := r.decide(t, req, false); d.Pod != "sim-0" {
		t.Fatalf("after re-caching on sim-0: %v", d)
	}
	cleared := r.in.Stats().Cleared
	// vLLM refuses a reset while requests hold blocks; the replica's last
	// request may still be finishing, so ask until the event comes.
	deadline := time.Now().Add(10 * time.Second)
	for r.in.Stats().Cleared == cleared {
		if time.Now().After(deadline) {
			t.Fatal("no AllBlocksCleared event from sim-0")
		}
		resp, err := http.Post(a+"/reset_prefix_cache", "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		time.Sleep(20 * time.Millisecond)
	}
	if got := r.in.Stats().Cleared - cleared; got != 1 {
		t.Fatalf("%d AllBlocksCleared events, want exactly 1", got)
	}
	if d := r.decide(t, req, false); d.Pod != "sim-1" || d.Scores[0].Hit.Blocks != 0 {
		t.Fatalf("after one AllBlocksCleared from sim-0: %v", d)
	}
}

// TestRestartedRouterRecovers is case (c): prefixes cached through a first
// router stay cached on the replicas; a second router started afterwards
// (empty index, same replicas) must hit them again within 20 requests per
// prefix. With replay it learns them on first contact (replay from seq 0:
// a prefix that stays cached never emits BlockStored again) and must hit
// from the first request; without replay it learns a prefix only when a
// request stores it somewhere again.
func TestRestartedRouterRecovers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		noReplay bool
		within   int // request by which every prefix must hit for good
	}{{"replay", false, 1}, {"no replay", true, 20}} {
		// With replay, the test waits until the replays have been applied and
		// then requires a hit from the first request; without replay nothing
		// tells the router anything until it routes, and the Done-when bound
		// of 20 requests per prefix applies.
		t.Run(tc.name, func(t *testing.T) {
			f := startSimWith(t, 3, 20, tc.noReplay)
			const nPrefixes, perPrefix = 6, 20
			ps := prompts(6, nPrefixes, prefixLen)
			sfx := prompts(7, nPrefixes*(3+perPrefix), 16)
			first := startRouter(t, f, config.DefaultScorers()...)
			for round := range 3 {
				for i, p := range ps {
					first.serve(t, with(p, sfx[round*nPrefixes+i]), 2)
				}
			}
			first.stop()

			// The second router meets the prefixes in another order than the
			// first, so spreading new prefixes over the pods in turn does
			// not by itself land each one where it is cached.
			second := startRouter(t, f, config.DefaultScorers()...)
			if !tc.noReplay {
				// Routing before the first replay has been applied would race
				// it; the serve command's readiness is the proxy's to define.
				deadline := time.Now().Add(10 * time.Second)
				for i := 0; i < len(ps); {
					if second.holders(ps[i]) > 0 {
						i++
						continue
					}
					if time.Now().After(deadline) {
						t.Fatalf("replay never told the second router where prefix %d is", i)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			recovered := make([]int, nPrefixes) // 1-based request from which every later one hit
			hits := 0
			for round := range perPrefix {
				for j := range ps {
					i := (j + 1) % nPrefixes
					d, hit := second.serve(t, with(ps[i], sfx[(3+round)*nPrefixes+i]), 2)
					if hit >= prefixLen {
						hits++
						if recovered[i] == 0 {
							recovered[i] = round + 1
						}
					} else {
						recovered[i] = 0
						t.Logf("prefix %d request %d missed on %s\n%v", i, round+1, d.Pod, d)
					}
				}
			}
			t.Logf("restarted router: %d of %d requests hit; recovered at request %v per prefix", hits, nPrefixes*perPrefix, recovered)
			for i, at := range recovered {
				if at == 0 || at > tc.within {
					t.Errorf("prefix %d: hits for good from request %d, want by request %d", i, at, tc.within)
				}
			}
		})
	}
}

// TestHotPrefixSpills is case (d). A hot prefix sits on sim-0; requests sent
// straight to sim-0 (outside the router's in-flight counts) build a queue of
// more than N=4 waiting there. With the load-aware cost scorer (prefix 1 :
// cost 3), the router must send one of the next K=3 hot requests elsewhere,
// and afterwards at least two pods must hold the whole prefix.
func TestHotPrefixSpills(t *testing.T) {
	const n, k = 4, 3
	f := startSim(t, 3, 5)
	r := startRouter(t, f, config.Scorer{Type: scoring.PrefixType, Weight: 1}, config.Scorer{Type: scoring.CostType, Weight: 3})
	llmd := scoring.NewPicker(r.ix, mustScorers(t, config.DefaultScorers()))
	hot := prompts(8, 1, prefixLen)[0]
	sfx := prompts(9, 1+k, 16)
	a := infoOf(f, "sim-0").HTTP
	complete(t, a, body(t, with(hot, sfx[0]), 2))
	r.waitHold(t, hot, "sim-0", prefixBlocks)
	if d := r.decide(t, body(t, with(hot, sfx[1]), 2), false); d.Pod != "sim-0" {
		t.Fatalf("an idle fleet should serve the hot prefix where it is cached: %v", d)
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	send := func(base string, b []byte, end func()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if end != nil {
				defer end()
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", strings.NewReader(string(b)))
			req.Header.Set("Content-Type", "application/json")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	for _, fl := range prompts(10, 2+n+2, 256) {
		send(a, body(t, fl, 400), nil)
	}
	deadline := time.Now().Add(10 * time.Second)
	for waiting(r, "sim-0") <= n {
		if time.Now().After(deadline) {
			t.Fatalf("sim-0 never had more than %d waiting: %+v", n, r.fleet.Pods(nil))
		}
		time.Sleep(10 * time.Millisecond)
	}

	spilled, at := "", 0
	for i := 1; i <= k && spilled == ""; i++ {
		b := body(t, with(hot, sfx[i]), 2)
		d := r.decide(t, b, true)
		t.Logf("hot request %d with %d waiting on sim-0: %s (llm-d 3:2:2 would pick %s)", i, waiting(r, "sim-0"),
			d.Pod, explain(t, llmd, r, b).Pod)
		target, _ := r.fleet.Target(d.Pod)
		_, end := r.fleet.Begin(d.Pod, d.UncachedTokens, false)
		send(target.HTTP, b, end)
		if d.Pod != "sim-0" {
			spilled, at = d.Pod, i
		}
	}
	if spilled == "" {
		t.Fatalf("the hot prefix did not spill within %d requests", k)
	}
	r.waitHold(t, hot, spilled, prefixBlocks)
	holders := r.holders(hot)
	t.Logf("spilled to %s at hot request %d; %d pods hold the prefix", spilled, at, holders)
	if holders < 2 {
		t.Errorf("%d pods hold the hot prefix, want at least 2", holders)
	}
}

func waiting(r *router, pod string) int {
	for _, p := range r.fleet.Pods(nil) {
		if p.Name == pod {
			return p.Load.Waiting
		}
	}
	return -1
}

func mustScorers(t *testing.T, s []config.Scorer) []scoring.Weighted {
	t.Helper()
	ws, err := scoring.FromConfig(config.Scoring{Scorers: s})
	if err != nil {
		t.Fatal(err)
	}
	return ws
}

func explain(t *testing.T, p *scoring.Picker, r *router, b []byte) scoring.Decision {
	t.Helper()
	req, err := r.prompter.Prompt(chat.PathCompletions, b)
	if err != nil {
		t.Fatal(err)
	}
	d, err := p.Explain(req, r.fleet.Pods(nil))
	if err != nil {
		t.Fatal(err)
	}
	return d
}
