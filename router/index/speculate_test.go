package index

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestSpeculationMatchesModel runs random speculations, settles, stored and
// evicted blocks, pods leaving, sweeps and clock steps against a model of
// what each engine holds for each key (on GPU, or speculatively until some
// time), and checks every lookup against it, which leading blocks each
// engine holds and how many of them only speculatively, and the count of
// held entries. With 150 engines a key's holders span groups of engine
// slots, so sets spill to their shard's arena and come back inline.
func TestSpeculationMatchesModel(t *testing.T) {
	for _, tc := range []struct{ engines, steps int }{{4, 5000}, {150, 3000}} {
		t.Run(fmt.Sprint("engines=", tc.engines), func(t *testing.T) { speculationMatchesModel(t, tc.engines, tc.steps) })
	}
}

func speculationMatchesModel(t *testing.T, engines, steps int) {
	const bs, chainsN, blocks, ttl = 4, 5, 6, time.Second
	rng := rand.New(rand.NewPCG(21, uint64(engines)))
	clock := &fakeClock{now: time.Unix(1000, 0)}
	ix := New(Config{SpeculationTTL: ttl, Now: clock.Now})
	var chains []chain
	var keys [][]uint64
	for i := range chainsN {
		c := newChain(rng, blocks, bs, uint64(i))
		chains, keys = append(chains, c), append(keys, Keys(nil, c.tokens, bs, "", nil))
	}
	eng := func(e int) Engine { return Engine{Pod: fmt.Sprint("pod", e)} }
	const held = int64(math.MaxInt64)
	type hold struct {
		h    *Hold
		e    int
		keys []uint64
		gen  int // the engine's life it was made in
		done bool
	}
	var (
		gpu   = make([]map[uint64]bool, engines)
		spec  = make([]map[uint64]int64, engines) // key -> expiry in clock nanoseconds
		gen   = make([]int, engines)
		holds []*hold
	)
	for e := range engines {
		gpu[e], spec[e] = map[uint64]bool{}, map[uint64]int64{}
	}
	heldPrefix := func(e, ci int) int {
		n := 0
		for n < blocks && gpu[e][keys[ci][n]] {
			n++
		}
		return n
	}
	for step := range steps {
		e, ci := rng.IntN(engines), rng.IntN(chainsN)
		var what string
		switch op := rng.IntN(20); {
		case op < 6:
			n := 1 + rng.IntN(blocks)
			what = fmt.Sprintf("speculate %d blocks of chain %d on %d", n, ci, e)
			h := &hold{h: mustSpeculate(t, ix, eng(e), keys[ci][:n]), e: e, gen: gen[e]}
			for _, k := range keys[ci][:n] {
				if !gpu[e][k] {
					spec[e][k] = held
					h.keys = append(h.keys, k)
				}
			}
			holds = append(holds, h)
		case op < 10 && len(holds) > 0:
			i := rng.IntN(len(holds))
			h := holds[i]
			what = fmt.Sprintf("settle hold %d of %d", i, h.e)
			h.h.Settle()
			if !h.done && h.gen == gen[h.e] {
				until := clock.Now().UnixNano() + int64(ttl)
				for _, k := range h.keys {
					if u, ok := spec[h.e][k]; ok && u == held {
						spec[h.e][k] = until
					}
				}
			}
			h.done = true
		case op < 14:
			from := heldPrefix(e, ci)
			if from == blocks {
				continue
			}
			to := from + 1 + rng.IntN(blocks-from)
			what = fmt.Sprintf("store blocks %d-%d of chain %d on %d", from, to, ci, e)
			mustStore(t, ix, eng(e), chains[ci].stored(from, to, bs, TierGPU))
			for _, k := range keys[ci][from:to] {
				gpu[e][k] = true
				delete(spec[e], k)
			}
		case op < 16:
			from := rng.IntN(blocks)
			what = fmt.Sprintf("evict chain %d from block %d on %d", ci, from, e)
			ix.Remove(eng(e), chains[ci].hashes[from:], TierGPU)
			for _, k := range keys[ci][from:] {
				delete(gpu[e], k)
			}
		case op < 17:
			what = fmt.Sprintf("pod %d leaves", e)
			ix.DropPod(eng(e).Pod)
			gpu[e], spec[e] = map[uint64]bool{}, map[uint64]int64{}
			gen[e]++
		default:
			d := time.Duration(rng.IntN(700)) * time.Millisecond
			what = fmt.Sprintf("clock +%v", d)
			clock.Advance(d)
			if rng.IntN(2) == 0 {
				ix.sweepSpec()
			}
		}
		now := clock.Now().UnixNano()
		var heldN int64
		for e := range engines {
			for _, u := range spec[e] {
				if u == held {
					heldN++
				}
			}
		}
		if st := ix.Stats(); st.SpeculativeHeld != heldN {
			t.Fatalf("step %d (%s): %d held entries, model %d", step, what, st.SpeculativeHeld, heldN)
		}
		for ci := range chains {
			got := lookup(ix, keys[ci])
			for e := range engines {
				var want Match
				for _, k := range keys[ci] {
					live := spec[e][k] > now
					if !gpu[e][k] && !live {
						break
					}
					want.Blocks++
					if !gpu[e][k] {
						want.Speculative++
					}
				}
				m := got[eng(e)]
				if m.Blocks != want.Blocks || m.GPUBlocks != want.Blocks || m.Speculative != want.Speculative {
					t.Fatalf("step %d (%s): engine %d on chain %d: got %d blocks (%d GPU, %d speculative), model %d (%d speculative)",
						step, what, e, ci, m.Blocks, m.GPUBlocks, m.Speculative, want.Blocks, want.Speculative)
				}
			}
		}
	}
	if st := ix.Stats(); st.SpecConfirmed == 0 || st.SpecExpired == 0 {
		t.Fatalf("the run never confirmed or expired an entry: %+v", st)
	}
}
