//go:build linux

package prompt_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/prompt"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// Benchmark of routing a 220 KB chat request whose first 200 KB repeat a
// recent request's (issue 18, item 5), beside a cold one and the uncached
// path, in one run:
//
//	go test -run '^$' -bench LongPrompt -benchtime 300x -benchmem ./router/prompt/
//
// Each decision is the proxy's: parse the body, render the Qwen3 template,
// tokenize, then pick (block keys, lookup in an index of ~1M keys over 8
// pods holding the shared prefix on two of them, scorers, speculation).
// Two shapes: "turns" is a conversation of 25 messages of 8 KB followed by
// a new 20 KB message (each message is its own segment between special
// tokens); "document" is one message whose first 200 KB are a shared
// document and whose last 20 KB differ (the segment is resumed mid-way).
// Cases: "warm" repeats the 200 KB of the previous request, "cold" changes
// every message, "uncached" is warm's sequence with tokenizer.cache_bytes 0.
// "floor" is this machine's own tail on fixed memory-bound work.

// longCorpus is ~260 KB of real prose, Debian's license texts.
func longCorpus(b *testing.B) string {
	b.Helper()
	files, err := filepath.Glob("/usr/share/common-licenses/*")
	if err != nil || len(files) == 0 {
		b.Fatalf("no license texts: %v", err)
	}
	slices.Sort(files)
	var sb strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		sb.Write(data)
	}
	return sb.String()
}

// longRequest builds request i of a shape: its shared part is the same for
// every request with the same tag, its last 20 KB are new for every i.
func longRequest(b *testing.B, corpus, shape string, tag, i int) []byte {
	b.Helper()
	const shared, fresh = 200_000, 20_000
	at := func(off, n int) string { // n bytes of the corpus from off, wrapping
		off %= len(corpus)
		s := corpus[off:min(len(corpus), off+n)]
		for len(s) < n {
			s += corpus[:min(len(corpus), n-len(s))]
		}
		return strings.ToValidUTF8(s, " ")
	}
	last := fmt.Sprintf("Question %06d: ", i) + at(shared+i*7919, fresh)
	var msgs []map[string]string
	switch shape {
	case "turns":
		const turns = 25
		for k := range turns {
			role := []string{"user", "assistant"}[k%2]
			msgs = append(msgs, map[string]string{"role": role,
				"content": fmt.Sprintf("[%d.%d] ", tag, k) + at(tag*104729+k*shared/turns, shared/turns)})
		}
		msgs = append(msgs, map[string]string{"role": "user", "content": last})
	case "document":
		msgs = append(msgs, map[string]string{"role": "user",
			"content": fmt.Sprintf("Document %d\n", tag) + at(tag*104729, shared) + "\n\n" + last})
	}
	body, err := json.Marshal(map[string]any{"model": "qwen", "messages": msgs})
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// longPromptPods is the fleet the 220 KB requests are routed over.
const longPromptPods = 8

func BenchmarkLongPrompt(b *testing.B) {
	corpus := longCorpus(b)
	files := testenv.Tokenizer(b, "qwen3")
	prompter := func(cacheBytes int64) *prompt.Chat {
		p, err := prompt.ChatFromConfig(&config.Config{Model: "qwen",
			Tokenizer: config.Tokenizer{JSON: files.TokenizerJSON, Config: files.TokenizerConfig, CacheBytes: &cacheBytes}})
		if err != nil {
			b.Fatal(err)
		}
		return p
	}
	pods := make([]scoring.Pod, longPromptPods)
	for i := range pods {
		pods[i] = scoring.Pod{Name: fmt.Sprintf("pod-%d", i), Load: scoring.Load{Running: 20 + i, Waiting: i % 3,
			KVUsage: 0.5 + 0.05*float64(i), Fresh: true, InFlight: 20 + i}}
	}
	for _, shape := range []string{"turns", "document"} {
		// The index holds the warm requests' shared prefix on pods 2 and 5.
		first, err := prompter(0).Prompt(chat.PathChatCompletions, longRequest(b, corpus, shape, 0, 0))
		if err != nil {
			b.Fatal(err)
		}
		ws, err := scoring.FromConfig(config.Scoring{Scorers: config.DefaultScorers()})
		if err != nil {
			b.Fatal(err)
		}
		for _, mode := range []string{"warm", "cold", "uncached"} {
			b.Run(shape+"/"+mode, func(b *testing.B) {
				cacheBytes := int64(config.DefaultTokenizerCacheBytes)
				if mode == "uncached" {
					cacheBytes = 0
				}
				p := prompter(cacheBytes)
				// A fresh index per case: the speculative entries of one
				// case's picks must not slow the next one's.
				picker := scoring.NewPicker(benchIndex(b, first.Tokens, longPromptPods), ws)
				tag := func(i int) int {
					if mode == "cold" {
						return i + 1
					}
					return 0
				}
				// The first warm request finds its prefix cached by an
				// earlier one, as in the router.
				if _, err := p.Prompt(chat.PathChatCompletions, longRequest(b, corpus, shape, tag(0), 1<<20)); err != nil {
					b.Fatal(err)
				}
				// Wall time on the shared machine includes waiting for a core;
				// the thread's CPU time is the decision's own cost.
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				var total, tokenize, pick, cpu []time.Duration
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					b.StopTimer()
					body := longRequest(b, corpus, shape, tag(i), i)
					b.StartTimer()
					c0, t0 := threadCPU(b), time.Now()
					r, err := p.Prompt(chat.PathChatCompletions, body)
					t1 := time.Now()
					if err != nil || len(r.Tokens) < 40_000 {
						b.Fatalf("request %d: %d tokens, %v", i, len(r.Tokens), err)
					}
					d, err := picker.Pick(r, pods)
					t2 := time.Now()
					cpu = append(cpu, threadCPU(b)-c0)
					d.Hold.Settle() // as the proxy does at the pod's first byte
					if err != nil || (mode != "cold" && d.Pod != "pod-2" && d.Pod != "pod-5") {
						b.Fatalf("picked %s: %v", d.Pod, err)
					}
					total, tokenize, pick = append(total, t2.Sub(t0)), append(tokenize, t1.Sub(t0)), append(pick, t2.Sub(t1))
					i++
				}
				reportLatency(b, total, cpu)
				b.ReportMetric(percentileMS(tokenize, 0.5), "parse+render+tokenize-p50-ms")
				b.ReportMetric(percentileMS(pick, 0.5), "pick-p50-ms")
				if p.Cache != nil {
					st := p.Cache.Stats()
					b.ReportMetric(float64(st.ReusedBytes)/float64(st.ReusedBytes+st.EncodedBytes), "reused-text-share")
				}
			})
		}
	}
	// The machine's own floor, in the same run: the same memory-bound work
	// every iteration (dependent reads across a table of the index's size),
	// timed as the decisions are. Its p99 over its p50 is the tail this
	// machine adds to work that misses the caches as a decision's lookups
	// do; read the decisions' p99 against it.
	b.Run("floor", func(b *testing.B) {
		const slots, reads = 4 << 20, 10_000 // 32 MiB of table
		table := make([]uint64, slots)
		for i := range table {
			table[i] = uint64(i) * 0x9E3779B97F4A7C15
		}
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		var total, cpu []time.Duration
		x := uint64(1)
		for b.Loop() {
			c0, t0 := threadCPU(b), time.Now()
			for j := range uint64(reads) {
				x = table[(x^j)&(slots-1)] ^ x>>7
			}
			total, cpu = append(total, time.Since(t0)), append(cpu, threadCPU(b)-c0)
		}
		if x == 0 { // keeps the reads; a zero is as likely as any value
			b.Log("floor: the reads ended on zero")
		}
		reportLatency(b, total, cpu)
	})
}

// reportLatency reports the p50 and p99 of the wall and thread-CPU times.
func reportLatency(b *testing.B, total, cpu []time.Duration) {
	b.ReportMetric(percentileMS(total, 0.5), "p50-ms")
	b.ReportMetric(percentileMS(total, 0.99), "p99-ms")
	b.ReportMetric(percentileMS(cpu, 0.5), "cpu-p50-ms")
	b.ReportMetric(percentileMS(cpu, 0.99), "cpu-p99-ms")
}

// percentileMS is the q-quantile of s in milliseconds.
func percentileMS(s []time.Duration, q float64) float64 {
	s = slices.Sorted(slices.Values(s))
	return float64(s[min(len(s)-1, int(q*float64(len(s))))].Nanoseconds()) / 1e6
}
