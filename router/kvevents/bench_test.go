package kvevents

import (
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/router/index"
)

// BenchmarkIngest decodes BlockStored batches from bytes and applies them to
// the index through the same stream code the live path uses: block size 64,
// 1 to 34 blocks per event (prefills of 34-block prompts cut at random
// points), one event per message, in both wire forms. Run with -cpu 1; the
// goal is 2,000,000 blocks/s. Every pass over the prepared messages stores
// new keys (the index is purged between passes, outside the timer).
func BenchmarkIngest(b *testing.B) {
	for _, form := range []Form{FormMap, FormArray} {
		b.Run(form.String(), func(b *testing.B) {
			const bs, prompts = 64, 300
			rng := rand.New(rand.NewPCG(1, 2))
			var payloads [][]byte
			blocks := 0
			for p := 0; p < prompts; p++ {
				tokens := make([]uint32, 34*bs)
				for i := range tokens {
					tokens[i] = uint32(rng.IntN(151643))
				}
				for from := 0; from < 34; {
					to := min(34, from+1+rng.IntN(34))
					ev := Event{Kind: BlockStored, TokenIDs: tokens[from*bs : to*bs], BlockSize: bs, Medium: "GPU"}
					for i := from; i < to; i++ {
						ev.BlockHashes = append(ev.BlockHashes, uint64(p)<<32|uint64(i)+1)
					}
					if from > 0 {
						ev.ParentHash, ev.HasParent = uint64(p)<<32|uint64(from), true
					}
					payload, err := EncodeBatch(form, &Batch{TS: 1.7e9, Events: []Event{ev}, HasDPRank: true})
					if err != nil {
						b.Fatal(err)
					}
					payloads = append(payloads, payload)
					blocks += to - from
					from = to
				}
			}
			ix := index.New(index.Config{})
			s := newStream(Endpoint{Pod: "bench"}, nil, ix, &counters{}, 0, func(string, ...any) {})
			applied, seq := 0, uint64(0)
			b.ReportAllocs()
			cpu0, purgeCPU := cpuSeconds(b), 0.0
			b.ResetTimer()
			for b.Loop() {
				for _, p := range payloads {
					s.onLive(Message{Seq: seq, Payload: p})
					seq++
				}
				applied += blocks
				b.StopTimer()
				c := cpuSeconds(b)
				ix.Purge(index.Engine{Pod: "bench"})
				purgeCPU += cpuSeconds(b) - c
				b.StartTimer()
			}
			b.ReportMetric(float64(applied)/b.Elapsed().Seconds(), "blocks/s")
			// On a shared machine wall time includes other processes' turns;
			// the process's CPU time (GC included, purges excluded) does not.
			b.ReportMetric(float64(applied)/(cpuSeconds(b)-cpu0-purgeCPU), "blocks/cpu-s")
			if st := s.c.snapshot(); st.DecodeErrors != 0 || st.ApplyErrors != 0 || st.Gaps != 0 {
				b.Fatalf("ingest errors: %+v", st)
			}
		})
	}
}

// cpuSeconds is the process's user+system CPU time.
func cpuSeconds(b *testing.B) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}
