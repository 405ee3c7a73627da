//go:build linux

package prompt_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/index"
	"github.com/llmd-dev/terraform-provider-llmd/router/prompt"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// Benchmark of one routing decision as the proxy will make it:
//
//	go test -run '^$' -bench Decision -benchtime 2000x -cpu 1 ./router/scoring/
//
// A /v1/chat/completions body whose Qwen3 chat template renders to 2,176
// tokens (a system prompt of real text shared by every request, then a
// user question ending in a per-request number, so the last blocks differ)
// goes through package chat (parse, template, BPE), then the picker (block
// keys, index lookup over 8, 64 and 256 pods and ~1M keys, scorers,
// speculative entries): pods=8 against pods=256 is how a decision grows
// with the fleet (BENCHMARKS.md, issue 29).

const benchTokens = 2176

// benchPods are the fleet sizes a decision is measured at.
var benchPods = []int{8, 64, 256}

// systemText is real English prose from Debian's license texts.
func systemText(b *testing.B) string {
	b.Helper()
	data, err := os.ReadFile("/usr/share/common-licenses/GPL-3")
	if err != nil {
		b.Fatalf("reading the benchmark's prose: %v", err)
	}
	return string(data)
}

func chatBody(b *testing.B, system string, n int) []byte {
	b.Helper()
	body, err := json.Marshal(map[string]any{"model": "qwen", "messages": []map[string]string{
		{"role": "system", "content": system},
		{"role": "user", "content": fmt.Sprintf("Summarise the section above for case %06d.", n)},
	}})
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// sizedSystem cuts text so that the whole templated prompt is exactly
// benchTokens tokens: bisect on the length, then trim a rune at a time.
func sizedSystem(b *testing.B, p scoring.Prompter, text string) string {
	b.Helper()
	count := func(s string) int {
		r, err := p.Prompt(chat.PathChatCompletions, chatBody(b, s, 0))
		if err != nil {
			b.Fatal(err)
		}
		return len(r.Tokens)
	}
	lo, hi := 0, len(text)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if count(text[:mid]) <= benchTokens {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	for s := text[:lo]; s != ""; s = s[:len(s)-1] {
		if count(s) == benchTokens {
			return s
		}
	}
	b.Fatalf("no cut of the text renders to %d tokens", benchTokens)
	return ""
}

// benchIndex holds about a million keys over n pods (random chains of 64
// blocks) plus the shared system prompt's blocks on pods 2 and 5.
func benchIndex(b *testing.B, prompt []uint32, n int) *index.Index {
	b.Helper()
	ix := index.New(index.Config{BlockSize: 16})
	rng := rand.New(rand.NewPCG(1, 2))
	tokens := make([]uint32, 64*16)
	hashes := make([]uint64, 64)
	next := uint64(1)
	for chain := range 1_000_000 / 64 {
		for i := range tokens {
			tokens[i] = uint32(rng.IntN(151643))
		}
		for i := range hashes {
			hashes[i] = next
			next++
		}
		e := index.Engine{Pod: fmt.Sprintf("pod-%d", chain%n)}
		if err := ix.Store(e, &index.Stored{Hashes: hashes, Tokens: tokens, BlockSize: 16}); err != nil {
			b.Fatal(err)
		}
	}
	shared := len(prompt) / 16 * 16 * 9 / 10 // the system prompt's share
	for _, pod := range []string{"pod-2", "pod-5"} {
		n := shared / 16
		hs := make([]uint64, n)
		for i := range hs {
			hs[i] = next
			next++
		}
		if err := ix.Store(index.Engine{Pod: pod}, &index.Stored{Hashes: hs, Tokens: prompt[:n*16], BlockSize: 16}); err != nil {
			b.Fatal(err)
		}
	}
	return ix
}

// threadCPU is the calling thread's CPU time, in nanoseconds
// (CLOCK_THREAD_CPUTIME_ID; getrusage's thread times tick in 4 ms steps here).
func threadCPU(b *testing.B) time.Duration {
	const clockThreadCPUTimeID = 3
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		b.Fatalf("clock_gettime: %v", errno)
	}
	return time.Duration(ts.Nano())
}

func BenchmarkDecision(b *testing.B) {
	prompter := &prompt.Chat{Catalog: qwenCatalog(b)}
	system := sizedSystem(b, prompter, systemText(b))
	for _, n := range benchPods {
		benchDecision(b, prompter, system, n)
	}
}

// benchDecision runs BenchmarkDecision's policies on n pods.
func benchDecision(b *testing.B, prompter scoring.Prompter, system string, n int) {
	first, err := prompter.Prompt(chat.PathChatCompletions, chatBody(b, system, 0))
	if err != nil {
		b.Fatal(err)
	}
	ix := benchIndex(b, first.Tokens, n)
	pods := make([]scoring.Pod, n)
	for i := range pods {
		pods[i] = scoring.Pod{Name: fmt.Sprintf("pod-%d", i), Load: scoring.Load{Running: 20 + i%8, Waiting: i % 3,
			KVUsage: 0.5 + 0.05*float64(i%8), Fresh: true, InFlight: 20 + i%8}}
	}
	for _, policy := range []struct {
		name    string
		scorers []config.Scorer
	}{
		{"llmd", config.DefaultScorers()},
		{"all", []config.Scorer{{Type: scoring.PrefixType, Weight: 3}, {Type: scoring.KVUsageType, Weight: 1},
			{Type: scoring.QueueType, Weight: 1}, {Type: scoring.InFlightType, Weight: 1}, {Type: scoring.SpreadType, Weight: 1},
			{Type: scoring.CostType, Weight: 2}, {Type: scoring.HistoryType, Weight: 1}}},
	} {
		b.Run(fmt.Sprintf("pods=%d/%s", n, policy.name), func(b *testing.B) {
			ws, err := scoring.FromConfig(config.Scoring{Scorers: policy.scorers})
			if err != nil {
				b.Fatal(err)
			}
			p := scoring.NewPicker(ix, ws)
			bodies := make([][]byte, 4096)
			for i := range bodies {
				bodies[i] = chatBody(b, system, i+1)
			}
			// Wall time on a shared 2-core machine includes waiting for a
			// core; the thread's CPU time (the goroutine stays on its
			// thread) is the decision's own cost.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var total, prompt, cpu []time.Duration
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				c0 := threadCPU(b)
				t0 := time.Now()
				r, err := prompter.Prompt(chat.PathChatCompletions, bodies[i%len(bodies)])
				t1 := time.Now()
				if err != nil || len(r.Tokens) != benchTokens {
					b.Fatalf("request %d: %d tokens, %v", i, len(r.Tokens), err)
				}
				d, err := p.Pick(r, pods)
				t2 := time.Now()
				cpu = append(cpu, threadCPU(b)-c0)
				d.Hold.Settle() // as the proxy does at the pod's first byte
				if err != nil || (d.Pod != "pod-2" && d.Pod != "pod-5") {
					b.Fatalf("picked %s: %v", d.Pod, err)
				}
				total = append(total, t2.Sub(t0))
				prompt = append(prompt, t1.Sub(t0))
				i++
			}
			slices.Sort(total)
			slices.Sort(prompt)
			slices.Sort(cpu)
			pct := func(s []time.Duration, q float64) float64 {
				return float64(s[min(len(s)-1, int(q*float64(len(s))))].Nanoseconds()) / 1e3
			}
			b.ReportMetric(pct(total, 0.5), "p50-µs")
			b.ReportMetric(pct(total, 0.99), "p99-µs")
			b.ReportMetric(pct(prompt, 0.5), "template+bpe-p50-µs")
			b.ReportMetric(pct(total, 0.5)-pct(prompt, 0.5), "pick-p50-µs")
			b.ReportMetric(pct(cpu, 0.5), "cpu-p50-µs")
			b.ReportMetric(pct(cpu, 0.99), "cpu-p99-µs")
		})
	}
}
