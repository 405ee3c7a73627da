package kvevents

import (
	"fmt"
	"math/rand/v2"
	"syscall"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/router/index"
)

// BenchmarkIngest decodes BlockStored batches from bytes and applies them to
// the index through the same stream code the live path uses: block size 64,
// 1 to 34 blocks per event (prefills of 34-block prompts cut at random
// points), one event per message, in both wire forms. With one publisher
// every prompt comes from it; with 256 (a fleet of 256 pods, BENCHMARKS.md
// issue 29) each prompt's events come from two publishers in turn, so
// every key has two holders, as prefixes shared across pods do. Run with
// -cpu 1; the goal is 2,000,000 blocks/s. Every pass over the prepared
// messages stores new keys (the index is purged between passes, outside
// the timer).
func BenchmarkIngest(b *testing.B) {
	for _, publishers := range []int{1, 256} {
		for _, form := range []Form{FormMap, FormArray} {
			b.Run(fmt.Sprintf("publishers=%d/%s", publishers, form), func(b *testing.B) { benchIngest(b, publishers, form) })
		}
	}
}

func benchIngest(b *testing.B, publishers int, form Form) {
	const bs, prompts = 64, 300
	type message struct {
		stream  int
		payload []byte
	}
	copies := min(publishers, 2)
	rng := rand.New(rand.NewPCG(1, 2))
	var msgs []message
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
			for c := range copies {
				msgs = append(msgs, message{stream: (p + c*publishers/2) % publishers, payload: payload})
			}
			blocks += copies * (to - from)
			from = to
		}
	}
	ix := index.New(index.Config{})
	c := &counters{}
	streams := make([]*stream, publishers)
	seqs := make([]uint64, publishers)
	for i := range streams {
		streams[i] = newStream(Endpoint{Pod: fmt.Sprint("bench-", i)}, nil, ix, c, 0, func(string, ...any) {})
	}
	applied := 0
	b.ReportAllocs()
	cpu0, purgeCPU := cpuSeconds(b), 0.0
	b.ResetTimer()
	for b.Loop() {
		for _, m := range msgs {
			streams[m.stream].onLive(Message{Seq: seqs[m.stream], Payload: m.payload})
			seqs[m.stream]++
		}
		applied += blocks
		b.StopTimer()
		t := cpuSeconds(b)
		for i := range streams {
			ix.Purge(index.Engine{Pod: fmt.Sprint("bench-", i)})
		}
		purgeCPU += cpuSeconds(b) - t
		b.StartTimer()
	}
	b.ReportMetric(float64(applied)/b.Elapsed().Seconds(), "blocks/s")
	// On a shared machine wall time includes other processes' turns;
	// the process's CPU time (GC included, purges excluded) does not.
	b.ReportMetric(float64(applied)/(cpuSeconds(b)-cpu0-purgeCPU), "blocks/cpu-s")
	if st := c.snapshot(); st.DecodeErrors != 0 || st.ApplyErrors != 0 || st.Gaps != 0 {
		b.Fatalf("ingest errors: %+v", st)
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
