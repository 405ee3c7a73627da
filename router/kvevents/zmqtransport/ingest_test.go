package zmqtransport

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/index"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
)

const bs = 16

// simEngine is the truth of one engine: which blocks of which chain it holds
// under which engine hashes. Hashes change with the process (epoch), as
// vLLM's do with a random hash seed.
type simEngine struct {
	id        index.Engine
	pub       publisher
	salt      uint64
	epoch     uint64
	held      [][]bool
	published int // messages since the last restart
	dropNext  bool
}

func (e *simEngine) hash(chain, block int) uint64 {
	x := e.salt<<48 ^ e.epoch<<40 ^ uint64(chain)<<16 ^ uint64(block) + 1
	x ^= x >> 31 // splitmix64 finaliser: distinct inputs stay distinct
	x *= 0x9e3779b97f4a7c15
	return x ^ x>>29
}

func (e *simEngine) send(t testing.TB, evs []simEvent) {
	e.pub.publish(t, evs, e.dropNext)
	e.dropNext = false
	e.published++
}

// store emits the prefill of chain c up to block `to`, from the first block
// the engine lacks, as vLLM's prefix cache does.
func (e *simEngine) store(tokens [][]uint32, c, to int) (simEvent, bool) {
	from := 0
	for from < to && e.held[c][from] {
		from++
	}
	if from == to {
		return simEvent{}, false
	}
	ev := simEvent{Type: "BlockStored", TokenIDs: tokens[c][from*bs : to*bs], BlockSize: bs, Medium: "GPU"}
	if from > 0 {
		p := e.hash(c, from-1)
		ev.Parent = &p
	}
	for i := from; i < to; i++ {
		ev.BlockHashes = append(ev.BlockHashes, e.hash(c, i))
		e.held[c][i] = true
	}
	return ev, true
}

func (e *simEngine) remove(c, from, to int) (simEvent, bool) {
	ev := simEvent{Type: "BlockRemoved", Medium: "GPU"}
	for i := from; i < to; i++ {
		if e.held[c][i] {
			ev.BlockHashes = append(ev.BlockHashes, e.hash(c, i))
			e.held[c][i] = false
		}
	}
	return ev, len(ev.BlockHashes) > 0
}

func (e *simEngine) forget() {
	for c := range e.held {
		e.held[c] = make([]bool, len(e.held[c]))
	}
}

func (e *simEngine) leading(c int) int {
	n := 0
	for n < len(e.held[c]) && e.held[c][n] {
		n++
	}
	return n
}

func randomTokens(rng *rand.Rand, chains, blocks int) [][]uint32 {
	out := make([][]uint32, chains)
	for c := range out {
		for i := 0; i < blocks*bs; i++ {
			out[c] = append(out[c], uint32(rng.IntN(151643)))
		}
	}
	return out
}

func startIngestor(t *testing.T, ix *index.Index, engines []*simEngine) *kvevents.Ingestor {
	t.Helper()
	in, err := kvevents.New(kvevents.Config{Index: ix, ReplayWait: 5 * time.Second, Poll: 20 * time.Millisecond, Logf: t.Logf,
		Transport: &Transport{ReconnectMin: 20 * time.Millisecond, ReconnectMax: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(in.Close)
	for _, e := range engines {
		ep := e.pub.endpoint()
		ep.Pod = e.id.Pod
		if err := in.Add(ep); err != nil {
			t.Fatal(err)
		}
	}
	return in
}

// mismatch compares every engine's match of every chain with the truth.
func mismatch(ix *index.Index, engines []*simEngine, keys [][]uint64) string {
	var diffs []string
	for c, k := range keys {
		got := map[index.Engine]index.Match{}
		for _, m := range ix.Lookup(k, nil) {
			got[m.Engine] = m
		}
		for _, e := range engines {
			want := e.leading(c)
			if m := got[e.id]; m.Blocks != want || m.GPUBlocks != want {
				diffs = append(diffs, fmt.Sprintf("%s chain %d: index %d/%d GPU blocks, truth %d", e.id, c, m.Blocks, m.GPUBlocks, want))
			}
		}
	}
	return strings.Join(diffs, "\n")
}

// waitConverged waits until the index equals the truth.
func waitConverged(t *testing.T, in *kvevents.Ingestor, ix *index.Index, engines []*simEngine, keys [][]uint64, what string) {
	t.Helper()
	eventually(t, what, engines, func() string {
		if d := mismatch(ix, engines, keys); d != "" {
			return fmt.Sprintf("index differs from the publishers' truth:\n%s\ningest %+v\nindex %+v", d, in.Stats(), ix.Stats())
		}
		return ""
	})
}

// TestIngestMatchesPublishersTruth is the model-based test: thousands of
// random stores, evictions, clears, engine restarts and dropped messages over
// 8 engines publishing through real ZeroMQ sockets, in both wire forms, two
// of them from Python (pyzmq + python3-msgpack), two connecting to the
// router's bound socket, one replaying with topic frames, one a DP rank 1,
// one sending legacy rank-less batches. After every quiet point the index must equal the truth.
func TestIngestMatchesPublishersTruth(t *testing.T) {
	const chains, blocks, steps, quiet = 16, 12, 3000, 60
	// A fixed seed keeps CI reproducible; KVEVENTS_MODEL_SEED=random explores
	// new ones and a number replays one. Seeds 1795951558006680533 and
	// 20261129 once failed: a publisher connecting to the router's bound
	// socket lost messages before its connection completed, across a restart,
	// and the router took the new process for the old one (see
	// TestRestartHiddenInAGap).
	seed := uint64(20261129)
	switch s := os.Getenv("KVEVENTS_MODEL_SEED"); s {
	case "":
	case "random":
		seed = uint64(time.Now().UnixNano())
	default:
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("seed %d (rerun with KVEVENTS_MODEL_SEED)", seed)
	rng := rand.New(rand.NewPCG(seed, 42))
	tokens := randomTokens(rng, chains, blocks)
	keys := make([][]uint64, chains)
	for c := range keys {
		keys[c] = index.Keys(nil, tokens[c], bs, "", nil)
	}
	opts := []pubOptions{
		{form: kvevents.FormMap, rank: 0},
		{form: kvevents.FormArray, rank: 0, bind: true, replayTopic: true},
		{form: kvevents.FormMap, rank: 0},
		{form: kvevents.FormArray, rank: 0},
		{form: kvevents.FormMap, rank: 0, bind: true},
		{form: kvevents.FormArray, rank: -1},
		{form: kvevents.FormMap, rank: 1},
		{form: kvevents.FormArray, rank: 0},
	}
	var engines []*simEngine
	for i, o := range opts {
		o.buffer = 100000
		e := &simEngine{id: index.Engine{Pod: fmt.Sprint("pod-", i)}, salt: uint64(i + 1), held: make([][]bool, chains)}
		if o.rank > 0 {
			e.id.Rank = o.rank
		}
		if i < 2 {
			e.pub = newPyPub(t, o)
		} else {
			e.pub = newGoPub(t, o)
		}
		engines = append(engines, e)
	}
	for _, e := range engines {
		for c := range e.held {
			e.held[c] = make([]bool, blocks)
		}
	}
	ix := index.New(index.Config{BlockSize: bs})
	in := startIngestor(t, ix, engines)

	for step := 1; step <= steps; step++ {
		e := engines[rng.IntN(len(engines))]
		c := rng.IntN(chains)
		switch op := rng.IntN(100); {
		case op < 45:
			if ev, ok := e.store(tokens, c, 1+rng.IntN(blocks)); ok {
				e.send(t, []simEvent{ev})
			}
		case op < 65: // LRU evicts a chain's tail
			if ev, ok := e.remove(c, rng.IntN(blocks), blocks); ok {
				e.send(t, []simEvent{ev})
			}
		case op < 72: // a single block anywhere
			i := rng.IntN(blocks)
			if ev, ok := e.remove(c, i, i+1); ok {
				e.send(t, []simEvent{ev})
			}
		case op < 80: // one engine step with several events
			var evs []simEvent
			if ev, ok := e.store(tokens, c, blocks); ok {
				evs = append(evs, ev)
			}
			if ev, ok := e.remove(rng.IntN(chains), rng.IntN(blocks), blocks); ok {
				evs = append(evs, ev)
			}
			if len(evs) > 0 {
				e.send(t, evs)
			}
		case op < 92: // the next message is lost on the wire, kept for replay
			e.dropNext = true
		case op < 95:
			e.send(t, []simEvent{{Type: "AllBlocksCleared"}})
			e.forget()
		default:
			// A process that published only once cannot be told from its
			// successor by seq alone (see the package doc), so restart a
			// process that has some history.
			if e.published < 3 {
				continue
			}
			e.pub.restart(t)
			e.epoch++
			e.published = 0
			e.dropNext = false
			e.forget()
		}
		if step%quiet == 0 {
			waitConverged(t, in, ix, engines, keys, fmt.Sprintf("step %d", step))
		}
	}
	st, is := in.Stats(), ix.Stats()
	t.Logf("ingest %+v", st)
	t.Logf("index %+v", is)
	if st.Gaps == 0 || st.Replays <= int64(len(engines)) || st.Restarts == 0 || st.Cleared == 0 {
		t.Fatalf("the random run did not exercise gaps, replays, restarts and clears: %+v", st)
	}
	if st.DecodeErrors != 0 || st.ApplyErrors != 0 || is.Orphans != 0 || is.BlockSizeMismatches != 0 {
		t.Fatalf("errors or orphans in a run without any cause for them: %+v %+v", st, is)
	}
}
