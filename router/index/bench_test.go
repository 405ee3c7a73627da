package index

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
)

// fill stores chains of 34 blocks of 64 tokens until the index holds n keys,
// each chain on `copies` engines of 8, and returns the last chain's keys.
func fill(tb testing.TB, ix *Index, n, copies int) []uint64 {
	return fillOn(tb, ix, n, 8, func(*rand.Rand) int { return copies })
}

// fillOn is fill over `engines` engines, each chain on copies() of them:
// consecutive ones from a random first (the first 8 in turn on 8 engines).
func fillOn(tb testing.TB, ix *Index, n, engines int, copies func(*rand.Rand) int) []uint64 {
	const bs, blocks = 64, 34
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	tokens := make([]uint32, blocks*bs)
	hashes := make([]uint64, blocks)
	var keys []uint64
	for c := 0; int(ix.Stats().Keys) < n; c++ {
		for i := range tokens {
			tokens[i] = uint32(rng.IntN(150000))
		}
		for i := range hashes {
			hashes[i] = rng.Uint64()
		}
		m := min(blocks, n-int(ix.Stats().Keys))
		first := c
		if engines > 8 {
			first = rng.IntN(engines)
		}
		for j := range copies(rng) {
			e := Engine{Pod: fmt.Sprint("pod-", (first+j*engines/8)%engines)}
			if err := ix.Store(e, &Stored{Hashes: hashes[:m], Tokens: tokens[:m*bs], BlockSize: bs}); err != nil {
				tb.Fatal(err)
			}
		}
		keys = Keys(keys[:0], tokens, bs, "", nil)
	}
	return keys
}

// BenchmarkLookup measures a longest-prefix lookup of a 34-block prompt that
// all 8 engines hold (the longest walk), in an index of 34 keys and of
// 1,000,000 keys. Prompt keys are computed once, as the router computes them
// once per request; BenchmarkKeys measures that step.
func BenchmarkLookup(b *testing.B) {
	for _, n := range []int{34, 1_000_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			ix := New(Config{})
			fill(b, ix, n-34, 1)
			prompt := fill(b, ix, n, 8)
			dst := make([]Match, 0, 8)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				dst = ix.Lookup(prompt, dst)
			}
			if len(dst) != 8 || dst[0].Blocks != 34 {
				b.Fatalf("lookup found %+v", dst)
			}
		})
	}
}

// BenchmarkLookupTokens is a whole routing query from token ids: keys of a
// 34-block prompt, then the lookup, against 1,000,000 keys over 8 engines.
func BenchmarkLookupTokens(b *testing.B) {
	ix := New(Config{})
	fill(b, ix, 1_000_000-34, 1)
	rng := rand.New(rand.NewPCG(1, 1_000_000))
	tokens := make([]uint32, 34*64)
	for i := range tokens {
		tokens[i] = uint32(rng.IntN(150000))
	}
	hashes := make([]uint64, 34)
	for i := range hashes {
		hashes[i] = rng.Uint64()
	}
	for e := 0; e < 8; e++ {
		if err := ix.Store(Engine{Pod: fmt.Sprint("pod-", e)}, &Stored{Hashes: hashes, Tokens: tokens, BlockSize: 64}); err != nil {
			b.Fatal(err)
		}
	}
	dst := make([]Match, 0, 8)
	b.ReportAllocs()
	for b.Loop() {
		dst = ix.LookupTokens(tokens, "", nil, dst)
	}
	if len(dst) != 8 || dst[0].Blocks != 34 {
		b.Fatalf("lookup found %+v", dst)
	}
}

// BenchmarkKeys measures chaining the keys of a 34-block prompt of 64-token blocks.
func BenchmarkKeys(b *testing.B) {
	tokens := make([]uint32, 34*64)
	for i := range tokens {
		tokens[i] = uint32(i * 7919 % 150000)
	}
	dst := make([]uint64, 0, 34)
	b.ReportAllocs()
	for b.Loop() {
		dst = Keys(dst[:0], tokens, 64, "", nil)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*34), "ns/block")
}

// BenchmarkMemory reports the HeapInuse growth, after GC, of an index holding
// 1,000,000 keys each on one engine of 8 (B/key equals B/(key,engine)
// there), of 125,000 keys each on all 8 engines, and of 1,000,000 keys over
// 256 engines with the holders per key measured on the seed workload scaled
// to 256 pods (TestScaledSeedHolders in internal/bench, BENCHMARKS.md issue
// 29) under the default mix and under round robin, a chain's holders 32
// slots apart so that they span groups (5 to 8 holders drawn as 5). Run it
// with -benchtime=1x.
func BenchmarkMemory(b *testing.B) {
	fixed := func(n int) func(*rand.Rand) int { return func(*rand.Rand) int { return n } }
	for _, tc := range []struct {
		name          string
		keys, engines int
		copies        func(*rand.Rand) int
	}{
		{"keys=1000000/engines=1", 1_000_000, 8, fixed(1)},
		{"keys=125000/engines=8", 125_000, 8, fixed(8)},
		{"keys=1000000/engines=256/seed-default", 1_000_000, 256, drawHolders(99.4, 0.6)},
		{"keys=1000000/engines=256/seed-rr", 1_000_000, 256, drawHolders(47.2, 25.9, 16.1, 7.3, 3.6)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				before := heapInuse()
				ix := New(Config{})
				fillOn(b, ix, tc.keys, tc.engines, tc.copies)
				after := heapInuse()
				s := ix.Stats()
				b.ReportMetric(float64(after-before)/float64(s.Keys), "B/key")
				b.ReportMetric(float64(after-before)/float64(s.Pairs), "B/pair")
				runtime.KeepAlive(ix)
			}
		})
	}
}

// drawHolders draws a count of holders: 1 with weight w[0], 2 with w[1]...
func drawHolders(w ...float64) func(*rand.Rand) int {
	var total float64
	for _, x := range w {
		total += x
	}
	return func(rng *rand.Rand) int {
		x := rng.Float64() * total
		for i, wi := range w {
			if x < wi {
				return i + 1
			}
			x -= wi
		}
		return len(w)
	}
}

func heapInuse() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// BenchmarkSpeculate measures the speculative entries of one routed request
// and their settling at its first byte, on an index of 1,000,000 keys: a
// warm 220 KB chat request (800 blocks, the chosen engine already holding
// the first 700 on GPU), a cold one (700 blocks, none held) and a new
// 34-block prompt of the seed workload. The
// clock advances 1 ms each time the index reads it, so entries expire as
// under a steady load.
func BenchmarkSpeculate(b *testing.B) {
	ix := New(Config{Now: benchClock()})
	fill(b, ix, 1_000_000, 1)
	rng := rand.New(rand.NewPCG(9, 9))
	for _, tc := range []struct{ blocks, held int }{{800, 700}, {700, 0}, {34, 0}} {
		b.Run(fmt.Sprintf("blocks=%d/held=%d", tc.blocks, tc.held), func(b *testing.B) {
			const bs = 64
			e := Engine{Pod: "pod-0"}
			tokens := make([]uint32, tc.blocks*bs)
			for i := range tokens {
				tokens[i] = uint32(rng.IntN(150000))
			}
			if tc.held > 0 {
				hashes := make([]uint64, tc.held)
				for i := range hashes {
					hashes[i] = rng.Uint64()
				}
				if err := ix.Store(e, &Stored{Hashes: hashes, Tokens: tokens[:tc.held*bs], BlockSize: bs}); err != nil {
					b.Fatal(err)
				}
			}
			keys := Keys(nil, tokens, bs, "", nil)
			b.ReportAllocs()
			for b.Loop() {
				// A new tail for every request, as a conversation grows.
				for i := tc.held; i < len(keys); i++ {
					keys[i] = rng.Uint64()
				}
				h, err := ix.Speculate(e, keys)
				if err != nil {
					b.Fatal(err)
				}
				h.Settle()
			}
		})
	}
}

// benchClock is a clock that advances 1 ms every time it is read.
func benchClock() func() time.Time {
	now := time.Unix(1000, 0)
	return func() time.Time {
		now = now.Add(time.Millisecond)
		return now
	}
}
