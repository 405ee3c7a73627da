package vllmcontract

import (
	"net/http"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// promptBlocks is the test prompts' length in full blocks; the extra
// tokens keep vLLM from holding back the last block (it always computes at
// least one prompt token, vllm/v1/core/kv_cache_manager.py
// get_computed_blocks), so a held prompt reuses all of them.
const promptBlocks = 10

func testPrompt(seed uint64) []int { return tokenPrompt(seed, promptBlocks*64+10) }

// TestIndexHoldsWhatTheEngineHolds follows two real engines with a real
// router and, after each change to their caches, asks the engine itself
// (its prefix-cache counter on a re-send) how much of a prompt it holds,
// against what the router's index says: after stores, through evictions
// (a 256-block cache), a reset, a router restarted while the engines run
// (caught up by replay) and an engine restarted. Every event the engines
// emit must decode, with no unknown kind or field.
func TestIndexHoldsWhatTheEngineHolds(t *testing.T) {
	es := engines(t)
	f := testFleet()
	bs := f.VLLM.BlockSize
	cfg := routerConfig(t, f, es)
	routerURL, router := startRouter(t, cfg)
	a, b := es[0], es[1]
	seed := uint64(1000)
	next := func() []int { seed++; return testPrompt(seed) }

	// Stores: prompts sent straight to the engines (no speculation), each
	// held by its engine alone.
	onA, onB := [][]int{next(), next(), next()}, [][]int{next(), next(), next()}
	for i := range onA {
		complete(t, a.URL, onA[i], 1)
		complete(t, b.URL, onB[i], 1)
	}
	settle(t, routerURL)
	for _, p := range onA {
		if r := route(t, routerURL, p); r[b.Name].gpu != 0 {
			t.Errorf("stored: the index puts %d of %s's prompt's blocks on %s", r[b.Name].gpu, a.Name, b.Name)
		}
		if got := sameHolding(t, routerURL, a.Name, a.URL, p, bs); got != promptBlocks {
			t.Errorf("stored: the engine reused %d of a held prompt's %d blocks", got, promptBlocks)
		}
	}

	// Evictions: more distinct prompts than engine a's cache holds; the
	// oldest prompts lose blocks, and the index must lose the same ones.
	for i := 0; i < poolBlocks/promptBlocks+4; i++ {
		complete(t, a.URL, next(), 1)
	}
	evicted := 0
	for _, p := range onA {
		if sameHolding(t, routerURL, a.Name, a.URL, p, bs) < promptBlocks {
			evicted++
		}
	}
	if removed := series(t, routerURL, "llmd_router_kv_event_events_total", map[string]string{"kind": "removed"}); evicted == 0 || removed == 0 {
		t.Errorf("evictions: none of the oldest prompts lost blocks (%d BlockRemoved applied); the cache is not small enough to test eviction", int(removed))
	}

	// A reset (vLLM's dev-mode /reset_prefix_cache): AllBlocksCleared comes
	// with the engine's next step, which the next request makes.
	if status, out := post(t, b.URL+"/reset_prefix_cache", nil); status != http.StatusOK {
		t.Fatalf("reset: %d %s", status, out)
	}
	complete(t, b.URL, tokenPrompt(1, 8), 1)
	for _, p := range onB {
		if got := sameHolding(t, routerURL, b.Name, b.URL, p, bs); got != 0 {
			t.Errorf("reset: the engine still reused %d blocks of a prompt it held before", got)
		}
	}
	if series(t, routerURL, "llmd_router_kv_event_events_total", map[string]string{"kind": "cleared"}) == 0 {
		t.Error("reset: the router applied no AllBlocksCleared")
	}
	checkDecoded(t, routerURL)

	// A router restarted while the engines run catches up from each
	// engine's replay buffer (from sequence 0) and holds what they hold.
	router.Stop()
	routerURL, _ = startRouter(t, cfg)
	for _, p := range append(append([][]int{}, onA...), onB...) {
		sameHolding(t, routerURL, a.Name, a.URL, p, bs)
	}
	held := next()
	complete(t, b.URL, held, 1)
	sameHolding(t, routerURL, b.Name, b.URL, held, bs)

	// An engine restarted: a new process, sequence numbers from 0 and an
	// empty cache; the index must drop what the old process held.
	restarts := series(t, routerURL, "llmd_router_kv_event_restarts_total", nil)
	purges := series(t, routerURL, "llmd_router_kv_event_purges_total", nil)
	connections := series(t, routerURL, "llmd_router_kv_event_connections_total", nil)
	b.Restart(t)
	// The router's subscription reconnects on libzmq's backoff (up to 5 s
	// after a long outage); the contract holds from the new handshake on.
	for deadline := time.Now().Add(30 * time.Second); series(t, routerURL, "llmd_router_kv_event_connections_total", nil) <= connections; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("engine restart: the router did not reconnect to the new engine process in 30 s")
		}
	}
	complete(t, b.URL, tokenPrompt(2, 8), 1)
	if got := sameHolding(t, routerURL, b.Name, b.URL, held, bs); got != 0 {
		t.Errorf("engine restart: a new engine process reused %d blocks", got)
	}
	if series(t, routerURL, "llmd_router_kv_event_restarts_total", nil) == restarts &&
		series(t, routerURL, "llmd_router_kv_event_purges_total", nil) == purges {
		t.Error("engine restart: the router counted neither a restart nor a purge")
	}
	fresh := next()
	complete(t, b.URL, fresh, 1)
	if got := sameHolding(t, routerURL, b.Name, b.URL, fresh, bs); got != promptBlocks {
		t.Errorf("engine restart: the restarted engine reused %d of a held prompt's %d blocks", got, promptBlocks)
	}
	checkDecoded(t, routerURL)
}

// checkDecoded fails t unless every KV event the router received decoded,
// was of a known kind with only known fields, and applied.
func checkDecoded(t *testing.T, routerURL string) {
	t.Helper()
	if n := series(t, routerURL, "llmd_router_kv_event_decode_errors_total", nil); n != 0 {
		t.Errorf("%v KV-event messages from vLLM %s did not decode", n, testenv.VLLMVersion)
	}
	for _, kind := range []string{"unknown", "unknown_field", "apply_error"} {
		if n := series(t, routerURL, "llmd_router_kv_event_events_total", map[string]string{"kind": kind}); n != 0 {
			t.Errorf("%v KV events of kind %q from vLLM %s (see the router's log for the first)", n, kind, testenv.VLLMVersion)
		}
	}
}
