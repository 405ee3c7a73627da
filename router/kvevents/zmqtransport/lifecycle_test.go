package zmqtransport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/index"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
)

// eventually polls cond (which describes what is still wrong, or returns "")
// for up to 15s. Meanwhile pubs send a heartbeat every 200ms, as serving
// engines keep stepping: only a later message reveals that the last one was
// lost, and a publisher that connects to the router's socket loses what it
// sends before the connection is up.
func eventually(t *testing.T, what string, pubs []*simEngine, cond func() string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for tick := 0; ; tick++ {
		if tick%20 == 0 {
			for _, e := range pubs {
				e.send(t, heartbeat)
			}
		}
		msg := cond()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %s", what, msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func blocksOf(ix *index.Index, keys []uint64) map[index.Engine]int {
	out := map[index.Engine]int{}
	for _, m := range ix.Lookup(keys, nil) {
		out[m.Engine] = m.Blocks
	}
	return out
}

func newEngines(t *testing.T, chains, blocks int, opts ...pubOptions) []*simEngine {
	t.Helper()
	var out []*simEngine
	for i, o := range opts {
		e := &simEngine{id: index.Engine{Pod: "pod-" + string(rune('a'+i))}, salt: uint64(i + 1), held: make([][]bool, chains)}
		for c := range e.held {
			e.held[c] = make([]bool, blocks)
		}
		if i == 1 {
			e.pub = newPyPub(t, o)
		} else {
			e.pub = newGoPub(t, o)
		}
		out = append(out, e)
	}
	return out
}

// TestRouterRestart starts a fresh router after the engines cached their
// prefixes. Replay from 0 returns only the last 20 messages: the prefix
// stored inside that window is known at once, the blocks whose parents fell
// out of it are orphans, not chained from the root, and they link when the
// engine stores their chain again.
func TestRouterRestart(t *testing.T) {
	const long, short, window = 40, 5, 20
	// The window keeps messages 21-40: blocks 21-39 of the long chain and the
	// short chain; blocks 0-20 are missing.
	const kept, missing = window - 1, long - (window - 1)
	rng := rand.New(rand.NewPCG(3, 3))
	tokens := randomTokens(rng, 2, long)
	engines := newEngines(t, 2, long,
		pubOptions{form: kvevents.FormArray, rank: 0, buffer: window},
		pubOptions{form: kvevents.FormMap, rank: 0, buffer: window})
	for _, e := range engines {
		for i := 1; i <= long; i++ { // one block per engine step: 40 messages
			ev, _ := e.store(tokens, 0, i)
			e.send(t, []simEvent{ev})
		}
		ev, _ := e.store(tokens, 1, short)
		e.send(t, []simEvent{ev})
	}
	keysLong := index.Keys(nil, tokens[0], bs, "", nil)
	keysShort := index.Keys(nil, tokens[1][:short*bs], bs, "", nil)

	ix := index.New(index.Config{})
	in := startIngestor(t, ix, engines)
	// No engine publishes now: what the router learns comes from the replay.
	eventually(t, "after replay", nil, func() string {
		if ix.Stats().Orphans != 2*kept || len(blocksOf(ix, keysShort)) != 2 {
			return fmt.Sprintf("short prefix %v, index %+v, ingest %+v", blocksOf(ix, keysShort), ix.Stats(), in.Stats())
		}
		return ""
	})
	for _, e := range engines {
		if got := blocksOf(ix, keysShort)[e.id]; got != short {
			t.Fatalf("%s holds %d blocks of the prefix inside the replay window, want %d", e.id, got, short)
		}
	}
	if got := blocksOf(ix, keysLong); len(got) != 0 {
		t.Fatalf("blocks beyond the replay window were matched from the root: %v", got)
	}
	if got := blocksOf(ix, keysLong[missing:]); len(got) != 0 {
		t.Fatalf("orphans were chained from the root: %v", got)
	}

	// The engines evict and recompute the blocks the router never saw.
	for _, e := range engines {
		ev, _ := e.remove(0, 0, missing)
		e.send(t, []simEvent{ev})
		ev, _ = e.store(tokens, 0, missing)
		e.send(t, []simEvent{ev})
	}
	eventually(t, "orphans linking", engines, func() string {
		got := blocksOf(ix, keysLong)
		for _, e := range engines {
			if got[e.id] != long {
				return "long prefix matches " + fmtMap(got)
			}
		}
		return ""
	})
	is, st := ix.Stats(), in.Stats()
	if is.Orphans != 0 || is.OrphansLinked != 2*kept || st.Purges != 0 {
		t.Fatalf("index %+v ingest %+v", is, st)
	}
}

func fmtMap(m map[index.Engine]int) string { return fmt.Sprint(m) }

// chainKeys are the request-side keys of each chain.
func chainKeys(tokens [][]uint32) [][]uint64 {
	keys := make([][]uint64, len(tokens))
	for c := range tokens {
		keys[c] = index.Keys(nil, tokens[c], bs, "", nil)
	}
	return keys
}

// TestRestartHiddenInAGap loses the end of one process's stream and the start
// of its successor's, so that the first message the router sees of the new
// process is ahead of the seq it expects: it looks like a plain gap, and the
// replay after it looks continuous. Only the message the router applied last
// tells: the new process does not hold it.
func TestRestartHiddenInAGap(t *testing.T) {
	const chains, blocks = 4, 3
	tokens := randomTokens(rand.New(rand.NewPCG(6, 6)), chains, blocks)
	keys := chainKeys(tokens)
	engines := newEngines(t, chains, blocks, pubOptions{form: kvevents.FormMap, rank: 0, buffer: 100})
	e := engines[0]
	ix := index.New(index.Config{BlockSize: bs})
	in := startIngestor(t, ix, engines)
	ev, _ := e.store(tokens, 0, blocks)
	e.send(t, []simEvent{ev}) // old seq 0; no heartbeats, so the router expects seq 1 next
	eventually(t, "old process", nil, func() string { return mismatch(ix, engines, keys) })
	before := in.Stats()

	e.dropNext = true // the old process's seq 1 is lost
	e.send(t, heartbeat)
	e.pub.restart(t)
	e.epoch++
	e.forget()
	for c := 1; c < chains; c++ { // the new process's seq 0 and 1 are lost, seq 2 arrives
		e.dropNext = c < chains-1
		ev, _ := e.store(tokens, c, blocks)
		e.send(t, []simEvent{ev})
	}
	waitConverged(t, in, ix, engines, keys, "after the restart")
	if st := in.Stats(); st.Restarts != before.Restarts+1 || st.Gaps != before.Gaps+1 {
		t.Fatalf("want one gap revealed as one restart: before %+v, after %+v", before, st)
	}
}

// TestRestartCaughtOnReconnect restarts a publisher on its address and loses
// the new process's seq 0 before the router reconnects, so its first live
// message has exactly the seq the router expects next. The reconnection
// itself makes the router check, by replay, that the publisher still holds
// the message it applied last.
func TestRestartCaughtOnReconnect(t *testing.T) {
	const chains, blocks = 3, 4
	tokens := randomTokens(rand.New(rand.NewPCG(7, 7)), chains, blocks)
	keys := chainKeys(tokens)
	pub := newGoPub(t, pubOptions{form: kvevents.FormArray, rank: 0, buffer: 100})
	e := &simEngine{id: index.Engine{Pod: "pod-a"}, pub: pub, salt: 1, held: make([][]bool, chains)}
	for c := range e.held {
		e.held[c] = make([]bool, blocks)
	}
	engines := []*simEngine{e}
	ix := index.New(index.Config{BlockSize: bs})
	// A slow reconnect leaves the new process time to publish unheard.
	in, err := kvevents.New(kvevents.Config{Index: ix, ReplayWait: 5 * time.Second, Poll: 20 * time.Millisecond, Logf: t.Logf,
		Transport: &Transport{ReconnectMin: 500 * time.Millisecond, ReconnectMax: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	ep := pub.endpoint()
	ep.Pod = e.id.Pod
	if err := in.Add(ep); err != nil {
		t.Fatal(err)
	}
	ev, _ := e.store(tokens, 0, blocks)
	e.send(t, []simEvent{ev}) // old seq 0
	eventually(t, "old process", nil, func() string { return mismatch(ix, engines, keys) })
	if st := in.Stats(); st.Connections != 1 {
		t.Fatalf("connections %d before the restart, want 1", st.Connections)
	}

	pub.reopen(t)
	e.epoch++
	e.forget()
	ev, _ = e.store(tokens, 1, blocks)
	e.send(t, []simEvent{ev}) // new seq 0, published before the router reconnects
	eventually(t, "reconnect", nil, func() string {
		if st := in.Stats(); st.Connections != 2 {
			return fmt.Sprintf("connections %d, want 2", st.Connections)
		}
		return ""
	})
	ev, _ = e.store(tokens, 2, blocks)
	e.send(t, []simEvent{ev}) // new seq 1: the seq the router expects next
	eventually(t, "after the restart", nil, func() string { return mismatch(ix, engines, keys) })
	if st := in.Stats(); st.Restarts != 1 || st.Purges != 1 {
		t.Fatalf("want the restart found and the old process purged once: %+v", st)
	}
}

// TestRemoveAndReaddPod removes a pod (its engines leave the index and its
// later messages are ignored), then adds it again: first contact replays
// from 0 and rebuilds it.
func TestRemoveAndReaddPod(t *testing.T) {
	const blocks = 6
	tokens := randomTokens(rand.New(rand.NewPCG(4, 4)), 1, blocks)
	engines := newEngines(t, 1, blocks,
		pubOptions{form: kvevents.FormMap, rank: 0, buffer: 1000},
		pubOptions{form: kvevents.FormArray, rank: 0, buffer: 1000})
	for _, e := range engines {
		ev, _ := e.store(tokens, 0, blocks)
		e.send(t, []simEvent{ev})
	}
	keys := index.Keys(nil, tokens[0], bs, "", nil)
	ix := index.New(index.Config{})
	in := startIngestor(t, ix, engines)
	eventually(t, "initial replay", nil, func() string {
		if len(blocksOf(ix, keys)) != 2 {
			return fmtMap(blocksOf(ix, keys))
		}
		return ""
	})
	gone := engines[0]
	in.Remove(gone.id.Pod)
	if got := blocksOf(ix, keys); len(got) != 1 || got[engines[1].id] != blocks {
		t.Fatalf("after removing %s: %s", gone.id, fmtMap(got))
	}
	for i := 0; i < 5; i++ {
		gone.send(t, heartbeat)
		gone.pub.publish(t, []simEvent{{Type: "AllBlocksCleared"}}, false)
		time.Sleep(50 * time.Millisecond)
	}
	for _, e := range ix.Engines() {
		if e.Pod == gone.id.Pod {
			t.Fatalf("removed pod %s came back into the index", e)
		}
	}
	if st := in.Stats(); st.Pods != 1 {
		t.Fatalf("pods gauge %d after removal", st.Pods)
	}
	// The removed pod's engine cleared its cache meanwhile; re-adding it
	// replays from 0: the stored chain, then the clears.
	eps := []kvevents.Endpoint{}
	for _, e := range engines {
		ep := e.pub.endpoint()
		ep.Pod = e.id.Pod
		eps = append(eps, ep)
	}
	if err := in.Sync(eps); err != nil {
		t.Fatal(err)
	}
	gone.forget() // the clears
	ev, _ := gone.store(tokens, 0, 2)
	gone.send(t, []simEvent{ev})
	eventually(t, "re-added pod", []*simEngine{gone}, func() string {
		got := blocksOf(ix, keys)
		if got[gone.id] != 2 || got[engines[1].id] != blocks {
			return fmtMap(got)
		}
		return ""
	})
}

// TestMalformedMessagePurges sends an undecodable payload: the pod's engine
// is purged (a lost BlockRemoved must not leave stale blocks) and the next
// good message starts a new baseline without replaying the bad one again.
func TestMalformedMessagePurges(t *testing.T) {
	const blocks = 4
	tokens := randomTokens(rand.New(rand.NewPCG(5, 5)), 2, blocks)
	engines := newEngines(t, 2, blocks, pubOptions{form: kvevents.FormMap, rank: 0, buffer: 1000})
	e := engines[0]
	ev, _ := e.store(tokens, 0, blocks)
	e.send(t, []simEvent{ev})
	ix := index.New(index.Config{})
	in := startIngestor(t, ix, engines)
	keys0 := index.Keys(nil, tokens[0], bs, "", nil)
	keys1 := index.Keys(nil, tokens[1], bs, "", nil)
	eventually(t, "initial replay", engines, func() string {
		if blocksOf(ix, keys0)[e.id] != blocks {
			return fmtMap(blocksOf(ix, keys0))
		}
		return ""
	})
	e.pub.(*goPub).publishRaw(t, []byte{0x92, 0xcb, 1, 2})
	eventually(t, "purge after a malformed message", nil, func() string {
		if in.Stats().DecodeErrors == 0 || len(blocksOf(ix, keys0)) != 0 {
			return fmtMap(blocksOf(ix, keys0))
		}
		return ""
	})
	ev, _ = e.store(tokens, 1, blocks)
	e.send(t, []simEvent{ev})
	eventually(t, "new baseline", nil, func() string {
		if blocksOf(ix, keys1)[e.id] != blocks {
			return fmtMap(blocksOf(ix, keys1))
		}
		return ""
	})
	if got := blocksOf(ix, keys0); len(got) != 0 {
		t.Fatalf("the history before the malformed message was replayed again: %s", fmtMap(got))
	}
}

// TestOpenRetriesWithBackoff starts following a bind-mode endpoint whose
// address another process still holds (a previous router, say): opening
// fails and is retried until the address frees, then events flow.
func TestOpenRetriesWithBackoff(t *testing.T) {
	const blocks = 3
	tokens := randomTokens(rand.New(rand.NewPCG(6, 6)), 1, blocks)
	engines := newEngines(t, 1, blocks, pubOptions{form: kvevents.FormMap, rank: 0, buffer: 100, bind: true})
	e := engines[0]
	holder, err := net.Listen("tcp", strings.TrimPrefix(e.pub.endpoint().Addr, "tcp://"))
	if err != nil {
		t.Fatal(err)
	}
	ix := index.New(index.Config{})
	in := startIngestor(t, ix, engines)
	eventually(t, "failed opens", nil, func() string {
		if n := in.Stats().TransportErrors; n < 2 {
			return fmt.Sprintf("%d transport errors", n)
		}
		return ""
	})
	holder.Close()
	ev, _ := e.store(tokens, 0, blocks)
	e.send(t, []simEvent{ev})
	keys := index.Keys(nil, tokens[0], bs, "", nil)
	eventually(t, "events after the address freed", engines, func() string {
		if got := blocksOf(ix, keys); got[e.id] != blocks {
			return fmtMap(got)
		}
		return ""
	})
}
