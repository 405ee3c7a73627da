package tokenizer

import (
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// Benchmarks. Run on one core so MB/s compares with node's single thread:
//
//	go test -run '^$' -bench . -benchtime 3x -cpu 1 ./router/tokenizer/

// benchTexts is about 4 MB of the real corpus (its first 1,000 chunks).
func benchTexts(b *testing.B) []string {
	b.Helper()
	texts := realCorpus(b)
	return texts[:min(len(texts), 1000)]
}

func totalBytes(texts []string) int {
	n := 0
	for _, s := range texts {
		n += len(s)
	}
	return n
}

// BenchmarkEncodeVersusJS encodes the same text as the JS reference, which
// times its own encode loop (after loading) in the same run, and reports both
// speeds and their ratio.
func BenchmarkEncodeVersusJS(b *testing.B) {
	texts := benchTexts(b)
	tk := qwen3V.load(b, true)
	var js struct {
		Bytes int
		Ms    float64
	}
	out, err := runNode(testenv.NodeModules(b), "qwen3", refOptions{Bench: true}, texts)
	if err != nil {
		b.Fatal(err)
	}
	if err := json.Unmarshal(out, &js); err != nil || js.Ms <= 0 {
		b.Fatalf("reading the JS timing: %v (%+v)", err, js)
	}
	b.SetBytes(int64(totalBytes(texts)))
	b.ReportAllocs()
	dst := make([]uint32, 0, 1<<16)
	b.ResetTimer()
	start := time.Now()
	for b.Loop() {
		for _, s := range texts {
			dst, _ = tk.AppendEncode(dst[:0], s, false)
		}
	}
	ours := float64(b.N*totalBytes(texts)) / time.Since(start).Seconds() / 1e6
	jsMBs := float64(js.Bytes) / js.Ms / 1e3
	b.ReportMetric(jsMBs, "js-MB/s")
	b.ReportMetric(ours/jsMBs, "x-js")
}

// prompt2176 returns real text that encodes to exactly 2,176 Qwen3 tokens,
// built from the corpus starting at chunk first.
func prompt2176(b *testing.B, tk *Tokenizer, texts []string, first int) string {
	b.Helper()
	const want = 2176
	var sb strings.Builder
	for i := first; ; i++ {
		sb.WriteString(texts[i%len(texts)])
		ids, err := tk.Encode(sb.String(), false)
		if err != nil {
			b.Fatal(err)
		}
		if len(ids) < want {
			continue
		}
		// Cut at the text of the first 2,176 tokens, then trim a rune at a
		// time until the text re-encodes to exactly that many.
		s, _ := tk.Decode(ids[:want], false)
		for s != "" {
			n, _ := tk.Encode(s, false)
			if len(n) == want {
				return s
			}
			_, size := utf8.DecodeLastRuneInString(s)
			s = s[:len(s)-size]
		}
	}
}

// latencies records per-call wall and thread CPU times and reports their
// p50 and p99.
type latencies struct{ wall, cpu []time.Duration }

func (l *latencies) measure(fn func()) {
	c0, okCPU := threadCPU()
	start := time.Now()
	fn()
	l.wall = append(l.wall, time.Since(start))
	if c1, ok := threadCPU(); ok && okCPU {
		l.cpu = append(l.cpu, c1-c0)
	}
}

func (l *latencies) report(b *testing.B) {
	for _, m := range []struct {
		name string
		d    []time.Duration
	}{{"wall", l.wall}, {"cpu", l.cpu}} {
		if len(m.d) == 0 {
			continue
		}
		slices.Sort(m.d)
		b.ReportMetric(float64(m.d[len(m.d)/2].Microseconds()), m.name+"-p50-µs")
		b.ReportMetric(float64(m.d[len(m.d)*99/100].Microseconds()), m.name+"-p99-µs")
	}
}

// BenchmarkCold2176 times one 2,176-token prompt never seen before, with the
// tokenizer's buffers dropped first, so nothing from an earlier call helps.
func BenchmarkCold2176(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	texts := benchTexts(b)
	tk := qwen3V.load(b, true)
	prompts := make([]string, 64)
	for i := range prompts {
		prompts[i] = prompt2176(b, tk, texts, i*7)
	}
	b.ReportAllocs()
	var lat latencies
	i := 0
	for b.Loop() {
		b.StopTimer()
		tk.pool = sync.Pool{New: func() any { return new(scratch) }}
		p := prompts[i%len(prompts)]
		i++
		b.StartTimer()
		lat.measure(func() {
			if _, err := tk.Encode(p, false); err != nil {
				b.Fatal(err)
			}
		})
	}
	lat.report(b)
}

// BenchmarkUniqueSuffix encodes chat-sized prompts that share a long system
// prefix and end in a unique suffix, and reports the p50 and p99 latency.
func BenchmarkUniqueSuffix(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	texts := benchTexts(b)
	tk := qwen3V.load(b, true)
	prefix := prompt2176(b, tk, texts, 0)
	var lat latencies
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		suffix := texts[(i+100)%len(texts)]
		n := min(600, len(suffix))
		for n < len(suffix) && !utf8.RuneStart(suffix[n]) {
			n++
		}
		p := prefix + suffix[:n] + fmt.Sprintf("\nrequest %d", i)
		i++
		lat.measure(func() {
			if _, err := tk.Encode(p, false); err != nil {
				b.Fatal(err)
			}
		})
	}
	lat.report(b)
}

// BenchmarkEncodeFamily reports the encode speed of each family on the same
// text, with the hand-written scanners and with regexp2 (the oracle path).
func BenchmarkEncodeFamily(b *testing.B) {
	texts := benchTexts(b)[:250]
	for _, v := range []variant{qwen3V, llama3V, deepseekV} {
		for _, fast := range []bool{true, false} {
			name := v.name + "/scanner"
			if !fast {
				name = v.name + "/regexp2"
			}
			b.Run(name, func(b *testing.B) {
				tk := v.load(b, fast)
				b.SetBytes(int64(totalBytes(texts)))
				b.ReportAllocs()
				var dst []uint32
				for b.Loop() {
					for _, s := range texts {
						dst, _ = tk.AppendEncode(dst[:0], s, false)
					}
				}
			})
		}
	}
}
