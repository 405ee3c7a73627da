package index

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/config"
)

var (
	podA = Engine{Pod: "a"}
	podB = Engine{Pod: "b"}
)

// chain is a test prompt: its tokens, and engine hashes the way a vLLM engine
// would name its blocks (any injective naming will do).
type chain struct {
	tokens []uint32
	hashes []uint64
}

func newChain(rng *rand.Rand, blocks, bs int, salt uint64) chain {
	c := chain{tokens: make([]uint32, blocks*bs)}
	for i := range c.tokens {
		c.tokens[i] = uint32(rng.IntN(150000))
	}
	for i := 0; i < blocks; i++ {
		c.hashes = append(c.hashes, salt<<32|uint64(i)+1)
	}
	return c
}

// stored returns the BlockStored of blocks [from, to) of c.
func (c chain) stored(from, to, bs int, t Tier) *Stored {
	s := &Stored{Hashes: c.hashes[from:to], Tokens: c.tokens[from*bs : to*bs], BlockSize: bs, Tier: t}
	if from > 0 {
		s.Parent, s.HasParent = c.hashes[from-1], true
	}
	return s
}

func lookup(ix *Index, keys []uint64) map[Engine]Match {
	out := map[Engine]Match{}
	for _, m := range ix.Lookup(keys, nil) {
		out[m.Engine] = m
	}
	return out
}

func mustStore(t *testing.T, ix *Index, e Engine, s *Stored) {
	t.Helper()
	if err := ix.Store(e, s); err != nil {
		t.Fatal(err)
	}
}

func TestLookupCountsLeadingBlocksPerEngineAndTier(t *testing.T) {
	const bs = 4
	ix := New(Config{})
	c := newChain(rand.New(rand.NewPCG(1, 2)), 5, bs, 1)
	mustStore(t, ix, podA, c.stored(0, 3, bs, TierGPU))
	mustStore(t, ix, podA, c.stored(3, 5, bs, TierGPU))
	mustStore(t, ix, podB, c.stored(0, 2, bs, TierGPU))
	// B also has blocks 2-3 offloaded to CPU, reported without tokens after
	// its GPU copies were keyed.
	mustStore(t, ix, podB, c.stored(2, 4, bs, TierGPU))
	mustStore(t, ix, podB, &Stored{Hashes: c.hashes[2:4], BlockSize: bs, Tier: TierCPU})
	ix.Remove(podB, c.hashes[2:4], TierGPU)

	keys := Keys(nil, c.tokens, bs, "", nil)
	got := lookup(ix, keys)
	want := map[Engine]Match{
		podA: {Engine: podA, Blocks: 5, GPUBlocks: 5},
		podB: {Engine: podB, Blocks: 4, GPUBlocks: 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("lookup = %+v, want %+v", got, want)
	}
	if m := ix.LookupTokens(c.tokens[:3*bs+1], "", nil, nil); len(m) != 2 || m[0].Blocks != 3 || m[1].Blocks != 3 {
		t.Fatalf("LookupTokens of 3.25 blocks = %+v", m)
	}
	if s := ix.Stats(); s.Keys != 5 || s.Pairs != 9 || ix.BlockSize() != bs {
		t.Fatalf("stats %+v, block size %d", s, ix.BlockSize())
	}
	// A trailing partial block is not a key.
	if n := len(Keys(nil, c.tokens[:bs*2+3], bs, "", nil)); n != 2 {
		t.Fatalf("Keys of 2.75 blocks gave %d keys", n)
	}
}

func TestRemoveBreaksThePrefixAndFreesKeys(t *testing.T) {
	const bs = 2
	ix := New(Config{})
	c := newChain(rand.New(rand.NewPCG(3, 4)), 4, bs, 1)
	mustStore(t, ix, podA, c.stored(0, 4, bs, TierGPU))
	ix.Remove(podA, c.hashes[1:2], TierGPU)
	keys := Keys(nil, c.tokens, bs, "", nil)
	if m := lookup(ix, keys)[podA]; m.Blocks != 1 {
		t.Fatalf("after removing block 1, A matches %d blocks, want 1", m.Blocks)
	}
	ix.Remove(podA, c.hashes, TierGPU) // includes an already removed hash
	if s := ix.Stats(); s.Keys != 0 || s.Pairs != 0 || s.BlocksRemoved != 4 {
		t.Fatalf("stats after removing all: %+v", s)
	}
	if got := ix.Lookup(keys, nil); len(got) != 0 {
		t.Fatalf("empty index matched %+v", got)
	}
}

func TestOrphansWaitForTheirChainAndNeverStartAtRoot(t *testing.T) {
	const bs = 4
	ix := New(Config{})
	c := newChain(rand.New(rand.NewPCG(5, 6)), 6, bs, 7)
	keys := Keys(nil, c.tokens, bs, "", nil)
	// The router missed blocks 0-2 and sees 3-5 (two events).
	mustStore(t, ix, podA, c.stored(3, 4, bs, TierGPU))
	mustStore(t, ix, podA, c.stored(4, 6, bs, TierGPU))
	if s := ix.Stats(); s.Orphans != 3 || s.Keys != 0 {
		t.Fatalf("stats with orphans: %+v", s)
	}
	// Chained from the root, block 3's tokens would form these keys: they must not exist.
	if got := ix.Lookup(Keys(nil, c.tokens[3*bs:], bs, "", nil), nil); len(got) != 0 {
		t.Fatalf("orphans were chained from the root: %+v", got)
	}
	// An evicted orphan leaves; its children keep waiting on its hash.
	ix.Remove(podA, c.hashes[5:6], TierGPU)
	mustStore(t, ix, podA, c.stored(0, 3, bs, TierGPU))
	if m := lookup(ix, keys)[podA]; m.Blocks != 5 {
		t.Fatalf("after the chain appeared A matches %d blocks, want 5", m.Blocks)
	}
	if s := ix.Stats(); s.Orphans != 0 || s.OrphansLinked != 2 || s.Keys != 5 {
		t.Fatalf("stats after linking: %+v", s)
	}
}

func TestOrphanBoundAndBlockSizeLearning(t *testing.T) {
	ix := New(Config{MaxOrphansPerEngine: 2})
	c := newChain(rand.New(rand.NewPCG(7, 8)), 5, 4, 1)
	mustStore(t, ix, podA, c.stored(1, 5, 4, TierGPU))
	if s := ix.Stats(); s.Orphans != 2 || s.OrphansDropped != 2 {
		t.Fatalf("orphan bound: %+v", s)
	}
	if ix.BlockSize() != 4 {
		t.Fatalf("learned block size %d, want 4", ix.BlockSize())
	}
	d := newChain(rand.New(rand.NewPCG(9, 9)), 1, 8, 2)
	mustStore(t, ix, podB, d.stored(0, 1, 8, TierGPU))
	if bs, err := ix.EngineBlockSize(podB); err != nil || bs != 8 {
		t.Fatalf("B's block size %d, %v", bs, err)
	}
	if s := ix.Stats(); s.BlockSizeMismatches != 1 {
		t.Fatalf("mismatches %d, want 1", s.BlockSizeMismatches)
	}
	if err := ix.Store(podA, &Stored{Hashes: []uint64{1, 2}, Tokens: []uint32{1, 2, 3}, BlockSize: 2}); err == nil {
		t.Fatal("inconsistent token count accepted")
	}
}

func TestPurgeAndDrop(t *testing.T) {
	const bs = 4
	ix := New(Config{})
	c := newChain(rand.New(rand.NewPCG(1, 1)), 3, bs, 1)
	mustStore(t, ix, podA, c.stored(0, 3, bs, TierGPU))
	mustStore(t, ix, podB, c.stored(0, 3, bs, TierGPU))
	mustStore(t, ix, podB, &Stored{Hashes: []uint64{99}, Parent: 98, HasParent: true, Tokens: make([]uint32, bs), BlockSize: bs})
	keys := Keys(nil, c.tokens, bs, "", nil)
	ix.Purge(podB)
	got := lookup(ix, keys)
	if _, ok := got[podB]; ok || got[podA].Blocks != 3 {
		t.Fatalf("after purging B: %+v", got)
	}
	if s := ix.Stats(); s.Orphans != 0 || s.Keys != 3 || s.Pairs != 3 || s.Purges != 1 {
		t.Fatalf("stats after purge: %+v", s)
	}
	ix.Drop(podA)
	if s := ix.Stats(); s.Keys != 0 || len(ix.Engines()) != 1 {
		t.Fatalf("after drop: %+v engines %v", s, ix.Engines())
	}
	// The freed slot is reused by a new engine without inheriting anything.
	c2 := Engine{Pod: "c", Rank: 1}
	mustStore(t, ix, c2, c.stored(0, 1, bs, TierGPU))
	if got := lookup(ix, keys); len(got) != 1 || got[c2].Blocks != 1 {
		t.Fatalf("new engine after drop: %+v", got)
	}
}

func TestLoRAAndExtraKeysSeparateBlocks(t *testing.T) {
	const bs = 2
	ix := New(Config{})
	c := newChain(rand.New(rand.NewPCG(2, 2)), 2, bs, 1)
	s := c.stored(0, 2, bs, TierGPU)
	s.LoRA = "sql"
	s.Extra = [][]byte{{0x91, 0xa4, 's', 'a', 'l', 't'}, nil}
	mustStore(t, ix, podA, s)
	for name, keys := range map[string][]uint64{
		"base model":      Keys(nil, c.tokens, bs, "", s.Extra),
		"no salt":         Keys(nil, c.tokens, bs, "sql", nil),
		"other adapter":   Keys(nil, c.tokens, bs, "chat", s.Extra),
		"salt on block 2": Keys(nil, c.tokens, bs, "sql", [][]byte{nil, s.Extra[0]}),
	} {
		if got := ix.Lookup(keys, nil); len(got) != 0 {
			t.Errorf("%s matched %+v", name, got)
		}
	}
	if m := lookup(ix, Keys(nil, c.tokens, bs, "sql", s.Extra))[podA]; m.Blocks != 2 {
		t.Fatalf("same adapter and salt matched %d blocks, want 2", m.Blocks)
	}
}

// fakeClock is a settable clock for speculation TTLs.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func mustSpeculate(t *testing.T, ix *Index, e Engine, keys []uint64) *Hold {
	t.Helper()
	h, err := ix.Speculate(e, keys)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestSpeculationBridgesUntilConfirmedOrExpired(t *testing.T) {
	const bs = 4
	clock := &fakeClock{now: time.Unix(1000, 0)}
	ix := New(Config{SpeculationTTL: time.Second, Now: clock.Now})
	c := newChain(rand.New(rand.NewPCG(4, 4)), 4, bs, 1)
	keys := Keys(nil, c.tokens, bs, "", nil)
	mustStore(t, ix, podA, c.stored(0, 2, bs, TierGPU))
	holdA := mustSpeculate(t, ix, podA, keys)
	holdB := mustSpeculate(t, ix, podB, keys[:3])
	got := lookup(ix, keys)
	if a := got[podA]; a.Blocks != 4 || a.GPUBlocks != 4 || a.Speculative != 2 {
		t.Fatalf("A with speculation: %+v", a)
	}
	if b := got[podB]; b.Blocks != 3 || b.Speculative != 3 {
		t.Fatalf("B with speculation: %+v", b)
	}
	// Until the requests start, their entries outlive any TTL.
	clock.Advance(time.Hour)
	ix.sweepSpec()
	if got := lookup(ix, keys); got[podA].Blocks != 4 || got[podB].Blocks != 3 {
		t.Fatalf("held entries expired before their requests started: %+v", got)
	}
	// The requests start; the event confirms A's block 2, the rest expires.
	holdA.Settle()
	holdB.Settle()
	mustStore(t, ix, podA, c.stored(2, 3, bs, TierGPU))
	clock.Advance(500 * time.Millisecond)
	holdB2 := mustSpeculate(t, ix, podB, keys[:1]) // a new request holds B's first block again
	clock.Advance(600 * time.Millisecond)
	holdB.Settle()         // a second call changes nothing
	got = lookup(ix, keys) // expired entries are invisible even before a sweep
	if a := got[podA]; a.Blocks != 3 || a.Speculative != 0 {
		t.Fatalf("A after expiry: %+v", a)
	}
	if b := got[podB]; b.Blocks != 1 || b.Speculative != 1 {
		t.Fatalf("B after expiry: %+v", b)
	}
	ix.sweepSpec()
	if s := ix.Stats(); s.SpecConfirmed != 1 || s.Speculative != 1 || s.SpecExpired != 3 {
		t.Fatalf("speculation stats: %+v", s)
	}
	holdB2.Settle()
	clock.Advance(time.Second)
	ix.sweepSpec()
	if s := ix.Stats(); s.Speculative != 0 || s.SpecExpired != 4 {
		t.Fatalf("after the last request started: %+v", s)
	}
}

// TestSpeculationOnThreeEngines holds one key on three engines, each with
// its own clock: confirming, expiring and dropping one holder leaves the
// others' entries and expiries as they were.
func TestSpeculationOnThreeEngines(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	ix := New(Config{BlockSize: 4, SpeculationTTL: time.Second, Now: clock.Now})
	podC := Engine{Pod: "c"}
	c := newChain(rand.New(rand.NewPCG(5, 5)), 1, 4, 1)
	key := Keys(nil, c.tokens, 4, "", nil)
	holders := func() (got []string) {
		for e := range lookup(ix, key) {
			got = append(got, e.Pod)
		}
		slices.Sort(got)
		return got
	}
	hA := mustSpeculate(t, ix, podA, key)
	hB := mustSpeculate(t, ix, podB, key)
	hC := mustSpeculate(t, ix, podC, key)
	hC.Settle() // C's TTL runs from now; A's and B's entries are held
	clock.Advance(600 * time.Millisecond)
	hB.Settle() // B's from 600 ms
	mustStore(t, ix, podA, c.stored(0, 1, 4, TierGPU))
	if got := holders(); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("A confirmed, B and C speculative: %v", got)
	}
	clock.Advance(500 * time.Millisecond) // C expires, B does not
	ix.sweepSpec()
	if got := holders(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("after C's TTL: %v", got)
	}
	ix.DropPod(podA.Pod)
	clock.Advance(400 * time.Millisecond) // B's TTL has 100 ms left
	if got := holders(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("A gone, B's entry left: %v", got)
	}
	clock.Advance(200 * time.Millisecond)
	ix.sweepSpec()
	hA.Settle() // its engine left: nothing to start
	if got, s := holders(), ix.Stats(); len(got) != 0 || s.Speculative != 0 || s.SpecConfirmed != 1 || s.SpecExpired != 2 {
		t.Fatalf("after B's TTL: %v, %+v", got, s)
	}
	for i := range ix.shards {
		if sh := &ix.shards[i]; len(sh.spec) != 0 || len(sh.specMore) != 0 {
			t.Fatalf("shard %d keeps %d speculative entries and %d expiries", i, len(sh.spec), len(sh.specMore))
		}
	}
}

func TestSettleAfterThePodLeft(t *testing.T) {
	clock := &fakeClock{now: time.Unix(1000, 0)}
	ix := New(Config{BlockSize: 4, SpeculationTTL: time.Second, Now: clock.Now})
	old := mustSpeculate(t, ix, podA, []uint64{7, 8})
	ix.DropPod(podA.Pod)
	// The slot goes to a new engine whose request holds the same key.
	cur := mustSpeculate(t, ix, podB, []uint64{7})
	old.Settle() // must not start the TTL of the new engine's entry
	(*Hold)(nil).Settle()
	clock.Advance(time.Minute)
	if got := lookup(ix, []uint64{7}); got[podB].Blocks != 1 || got[podB].Speculative != 1 {
		t.Fatalf("the new engine's held entry: %+v", got)
	}
	cur.Settle()
	clock.Advance(time.Second)
	if got := lookup(ix, []uint64{7}); len(got) != 0 {
		t.Fatalf("after settling: %+v", got)
	}
}

func TestMemoryBoundEvicts(t *testing.T) {
	const bs = 2
	ix := New(Config{MaxKeys: 160})
	rng := rand.New(rand.NewPCG(6, 6))
	var chains []chain
	for i := 0; i < 40; i++ {
		c := newChain(rng, 8, bs, uint64(i))
		chains = append(chains, c)
		mustStore(t, ix, Engine{Pod: fmt.Sprint("p", i%3)}, c.stored(0, 8, bs, TierGPU))
	}
	s := ix.Stats()
	if s.Keys > 160 || s.Evicted == 0 || s.Keys != s.Pairs {
		t.Fatalf("bound not kept: %+v", s)
	}
	// Whatever survived is still exact: a lookup never claims more blocks than
	// the engine's chain has left in the index.
	total := int64(0)
	for _, c := range chains {
		for _, m := range ix.Lookup(Keys(nil, c.tokens, bs, "", nil), nil) {
			total += int64(m.Blocks)
		}
	}
	if total > s.Keys {
		t.Fatalf("lookups found %d blocks, more than the %d keys kept", total, s.Keys)
	}
}

// TestIndexMatchesModel applies thousands of random stores, removals,
// clears and speculation-free restarts to 8 and to 300 engines (holder
// sets spanning groups of engine slots) and after each step compares every
// engine's match of every chain with a plain model.
func TestIndexMatchesModel(t *testing.T) {
	for _, tc := range []struct{ engines, steps int }{{8, 4000}, {300, 3000}} {
		t.Run(fmt.Sprint("engines=", tc.engines), func(t *testing.T) { indexMatchesModel(t, tc.engines, tc.steps) })
	}
}

func indexMatchesModel(t *testing.T, engines, steps int) {
	const bs, chainsN, blocks = 4, 12, 10
	rng := rand.New(rand.NewPCG(11, uint64(engines)))
	ix := New(Config{})
	var chains []chain
	for i := 0; i < chainsN; i++ {
		chains = append(chains, newChain(rng, blocks, bs, uint64(i)))
	}
	keys := make([][]uint64, chainsN)
	for i, c := range chains {
		keys[i] = Keys(nil, c.tokens, bs, "", nil)
	}
	// model[e][chain] = which blocks engine e holds.
	model := make([][][blocks]bool, engines)
	for e := range model {
		model[e] = make([][blocks]bool, chainsN)
	}
	eng := func(e int) Engine { return Engine{Pod: fmt.Sprint("pod", e/2), Rank: e % 2} }
	for step := 0; step < steps; step++ {
		e, ci := rng.IntN(engines), rng.IntN(chainsN)
		c, held := chains[ci], &model[e][ci]
		switch op := rng.IntN(10); {
		case op < 6: // store the next run after the engine's held prefix, like a prefill
			from := 0
			for from < blocks && held[from] {
				from++
			}
			if from == blocks {
				continue
			}
			to := from + 1 + rng.IntN(blocks-from)
			mustStore(t, ix, eng(e), c.stored(from, to, bs, TierGPU))
			for i := from; i < to; i++ {
				held[i] = true
			}
		case op < 9: // evict a tail, as LRU does
			from := rng.IntN(blocks)
			ix.Remove(eng(e), c.hashes[from:], TierGPU)
			for i := from; i < blocks; i++ {
				held[i] = false
			}
		default:
			ix.Purge(eng(e))
			model[e] = make([][blocks]bool, chainsN)
		}
		for ci := range chains {
			got := lookup(ix, keys[ci])
			for e := 0; e < engines; e++ {
				want := 0
				for want < blocks && model[e][ci][want] {
					want++
				}
				if got[eng(e)].Blocks != want {
					t.Fatalf("step %d: %s matches %d blocks of chain %d, model says %d", step, eng(e), got[eng(e)].Blocks, ci, want)
				}
			}
		}
	}
	spilled := 0
	for i := range ix.shards {
		spilled += ix.shards[i].overflows
	}
	if engines > groupSize && spilled == 0 {
		t.Fatalf("%d engines, yet no key's holders span groups: the test misses the arena", engines)
	}
	// Every holder set that spilled to an arena went back when its
	// holders left.
	for e := range engines {
		ix.Purge(eng(e))
	}
	for i := range ix.shards {
		if sh := &ix.shards[i]; sh.overflows != 0 || len(sh.over) != len(sh.freeOver) {
			t.Fatalf("shard %d keeps %d arena bitmaps in use (%d made, %d free)", i, sh.overflows, len(sh.over), len(sh.freeOver))
		}
	}
	if s := ix.Stats(); s.Keys != 0 || s.Pairs != 0 || s.MemoryBytes != 0 {
		t.Fatalf("after purging every engine: %+v", s)
	}
}

// TestConcurrentReadsDuringWrites runs lookups while engines store and remove
// in parallel; run with -race it checks the locking, and the final state must
// equal what each engine's own sequence left behind.
func TestConcurrentReadsDuringWrites(t *testing.T) {
	const bs, blocks = 4, 16
	ix := New(Config{})
	c := newChain(rand.New(rand.NewPCG(13, 14)), blocks, bs, 1)
	keys := Keys(nil, c.tokens, bs, "", nil)
	var wg sync.WaitGroup
	var bad atomic.Value // the first impossible match a reader saw
	stop := make(chan struct{})
	for r := 0; r < 2; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var dst []Match
			for {
				select {
				case <-stop:
					return
				default:
				}
				for _, m := range ix.Lookup(keys, dst) {
					if m.Blocks > blocks || m.GPUBlocks > m.Blocks {
						bad.CompareAndSwap(nil, fmt.Sprintf("impossible match %+v", m))
					}
				}
			}
		}()
	}
	var writers sync.WaitGroup
	for e := 0; e < 8; e++ {
		writers.Add(1)
		go func() {
			defer writers.Done()
			en := Engine{Pod: fmt.Sprint("w", e)}
			for i := 0; i < 300; i++ {
				_ = ix.Store(en, c.stored(0, blocks, bs, TierGPU))
				ix.Remove(en, c.hashes[e:], TierGPU)
			}
		}()
	}
	writers.Wait()
	close(stop)
	wg.Wait()
	if msg := bad.Load(); msg != nil {
		t.Fatal(msg)
	}
	got := lookup(ix, keys)
	for e := 0; e < 8; e++ {
		en := Engine{Pod: fmt.Sprint("w", e)}
		if got[en].Blocks != e {
			t.Fatalf("%s ends with %d blocks, want %d", en, got[en].Blocks, e)
		}
	}
}

// TestMaxEnginesMatchesConfig holds the config package's restated limit,
// which validates discovery.static against it, equal to the index's own,
// and within what a holder set's group number can name.
func TestMaxEnginesMatchesConfig(t *testing.T) {
	if MaxEngines != config.MaxEngines {
		t.Errorf("index.MaxEngines %d, config.MaxEngines %d", MaxEngines, config.MaxEngines)
	}
	if groups := (MaxEngines + groupSize - 1) / groupSize; groups > maxGroups {
		t.Errorf("MaxEngines %d needs %d groups of %d slots; a holder set names %d", MaxEngines, groups, groupSize, maxGroups)
	}
}

// TestDropPodFreesSlots fills every engine slot with speculative entries
// (as requests to pods without KV events do), drops one pod with two
// ranks, and checks its two slots serve new engines.
func TestDropPodFreesSlots(t *testing.T) {
	ix := New(Config{BlockSize: 4})
	for i := range MaxEngines {
		if _, err := ix.Speculate(Engine{Pod: fmt.Sprintf("p%d", i/2), Rank: i % 2}, []uint64{uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ix.Speculate(Engine{Pod: "new"}, []uint64{1}); err == nil {
		t.Fatalf("engine %d got a slot", MaxEngines+1)
	}
	ix.DropPod("p3")
	for r := range 2 {
		if _, err := ix.Speculate(Engine{Pod: "new", Rank: r}, []uint64{1}); err != nil {
			t.Errorf("rank %d after dropping p3: %v", r, err)
		}
	}
}
