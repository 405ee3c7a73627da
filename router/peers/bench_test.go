package peers

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/index"
)

// BenchmarkDecisionSpeculation is a decision's speculative write, alone
// and shared with a subscribed peer over loopback gRPC, side by side, at
// one decision a millisecond (the rate BENCHMARKS.md models one router
// worker deciding at): the cost the exchange adds to a decision, its p99
// as p99-ns. The peer runs in this process, so its applying the entries
// competes for the same cores, which a peer pod does not. Keys are a
// 2,048-token prompt at block size 16.
func BenchmarkDecisionSpeculation(b *testing.B) {
	keys := make([]uint64, 128)
	for i := range keys {
		keys[i] = uint64(i+1) * 0x9e3779b97f4a7c15
	}
	for _, shared := range []bool{false, true} {
		name := "alone"
		if shared {
			name = "shared"
		}
		b.Run(name, func(b *testing.B) {
			a := newReplica(b, nil)
			if shared {
				peer := newReplica(b, nil)
				peer.x.Sync([]string{a.addr})
				for a.x.Stats().Sent == 0 { // subscribed: its first full batch is queued
					time.Sleep(time.Millisecond)
				}
			}
			took := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			next := time.Now()
			for i := range b.N {
				next = next.Add(time.Millisecond)
				time.Sleep(time.Until(next))
				start := time.Now()
				e := index.Engine{Pod: testPods[i%len(testPods)]}
				h, err := a.ix.Speculate(e, keys)
				if err != nil {
					b.Fatal(err)
				}
				if shared {
					a.x.Speculated(e, keys, h)
				}
				took = append(took, time.Since(start))
				h.Settle()
			}
			b.StopTimer()
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds()), "p99-ns")
		})
	}
}

// BenchmarkWarmStart256 is a starting replica taking a peer's index of 256
// engines of 7,000 blocks each (an A10G's KV cache of Qwen2.5-7B at block
// size 16, about 110k tokens), over loopback gRPC.
func BenchmarkWarmStart256(b *testing.B) {
	const pods, blocks = 256, 7000
	a := newReplica(b, nil)
	for p := range pods {
		a.fill(b, fmt.Sprintf("vllm-%03d", p), blocks, uint64(p+1))
	}
	b.ResetTimer()
	for range b.N {
		c := newReplica(b, nil)
		start := time.Now()
		ws, err := c.x.Warm(context.Background(), []string{a.addr})
		if err != nil || ws.Engines != pods {
			b.Fatalf("warm start %+v: %v", ws, err)
		}
		b.ReportMetric(time.Since(start).Seconds(), "s/warm-start")
		b.ReportMetric(float64(ws.Blocks), "blocks")
	}
}
