//go:build linux

package chat

import (
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// benchTokens is the prompt length the issue asks to measure.
const benchTokens = 2176

// benchBody builds a Qwen3 chat request (system prompt, three earlier
// turns, tools, a last user turn) from real text, sized so that its prompt
// is exactly benchTokens tokens with the last turn "lastTurn(0)".
func benchBody(b *testing.B, m *Model) func(i int) []byte {
	data, err := os.ReadFile("/usr/share/common-licenses/GPL-3")
	if err != nil {
		b.Skipf("no benchmark text: %v", err)
	}
	text := string(data)
	build := func(sysLen, i int) []byte {
		req := map[string]any{
			"model": "qwen3",
			"messages": []map[string]any{
				{"role": "system", "content": text[:sysLen]},
				{"role": "user", "content": text[20000:20600]},
				{"role": "assistant", "content": text[21000:21500]},
				{"role": "user", "content": text[22000:22400]},
				{"role": "assistant", "content": "<think>\nshort\n</think>\n\n" + text[23000:23300]},
				{"role": "user", "content": fmt.Sprintf("Question %d: what does section %d say about conveying?", i, i%17)},
			},
			"tools": []map[string]any{{"type": "function", "function": map[string]any{
				"name": "lookup", "description": "Look up a section <by number> & 'title'",
				"parameters": map[string]any{"type": "object", "properties": map[string]any{"n": map[string]any{"type": "integer"}}},
			}}},
		}
		out, err := json.Marshal(req)
		if err != nil {
			b.Fatal(err)
		}
		return out
	}
	count := func(body []byte) int {
		req, err := ParseRequest(PathChatCompletions, body)
		if err != nil {
			b.Fatal(err)
		}
		ids, err := m.Tokenize(req)
		if err != nil {
			b.Fatal(err)
		}
		return len(ids[0])
	}
	lo, hi := 0, 19000
	for lo < hi { // smallest system prompt reaching benchTokens
		mid := (lo + hi) / 2
		if count(build(mid, 0)) < benchTokens {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if n := count(build(lo, 0)); n != benchTokens {
		b.Fatalf("could not size the request: %d tokens", n)
	}
	return func(i int) []byte { return build(lo, i) }
}

func tokenizeBody(b *testing.B, m *Model, body []byte) []uint32 {
	req, err := ParseRequest(PathChatCompletions, body)
	if err != nil {
		b.Fatal(err)
	}
	ids, err := m.Tokenize(req)
	if err != nil {
		b.Fatal(err)
	}
	return ids[0]
}

// BenchmarkChatCold measures parse + normalise + render + tokenize of the
// 2,176-token request on a freshly loaded model (empty tokenizer caches).
func BenchmarkChatCold(b *testing.B) {
	files := testenv.Tokenizer(b, "qwen3")
	m, err := LoadModel(files.TokenizerJSON, files.TokenizerConfig, Options{})
	if err != nil {
		b.Fatal(err)
	}
	body := benchBody(b, m)(0)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		fresh, err := LoadModel(files.TokenizerJSON, files.TokenizerConfig, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		tokenizeBody(b, fresh, body)
	}
}

// threadCPU is the CPU time the calling OS thread has used: on a shared
// machine wall time also counts the time other processes held the core.
// getrusage counts in scheduler ticks; CLOCK_THREAD_CPUTIME_ID is exact.
func threadCPU(b *testing.B) time.Duration {
	const clockThreadCPUTime = 3 // CLOCK_THREAD_CPUTIME_ID
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		b.Fatal(errno)
	}
	return time.Duration(ts.Nano())
}

// BenchmarkChatUniqueLastTurn measures a warm model on 2,176-token requests
// that share everything but a unique last user turn, and reports the p50
// and p99 of the per-request wall time and of the thread's CPU time.
func BenchmarkChatUniqueLastTurn(b *testing.B) {
	m, gen, bodies := benchBodies(b)
	tokenizeBody(b, m, gen(0)) // warm
	b.ResetTimer()
	measure(b, func(i int) { tokenizeBody(b, m, bodies[i]) })
}

// benchBodies loads the Qwen3 model and makes b.N request bodies that
// differ only in their last user turn, plus the generator that made them.
func benchBodies(b *testing.B) (*Model, func(int) []byte, [][]byte) {
	files := testenv.Tokenizer(b, "qwen3")
	m, err := LoadModel(files.TokenizerJSON, files.TokenizerConfig, Options{})
	if err != nil {
		b.Fatal(err)
	}
	gen := benchBody(b, m)
	bodies := make([][]byte, b.N)
	for i := range bodies {
		bodies[i] = gen(i + 1)
	}
	return m, gen, bodies
}

// measure runs fn b.N times on one OS thread and reports the p50 and p99 of
// its wall time and of the thread's CPU time.
func measure(b *testing.B, fn func(i int)) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	wall := make([]time.Duration, b.N)
	cpu := make([]time.Duration, b.N)
	for i := range b.N {
		start, startCPU := time.Now(), threadCPU(b)
		fn(i)
		wall[i], cpu[i] = time.Since(start), threadCPU(b)-startCPU
	}
	b.StopTimer()
	for _, s := range []struct {
		name  string
		times []time.Duration
	}{{"", wall}, {"cpu-", cpu}} {
		slices.Sort(s.times)
		b.ReportMetric(float64(s.times[len(s.times)/2].Microseconds()), s.name+"p50-µs")
		b.ReportMetric(float64(s.times[len(s.times)*99/100].Microseconds()), s.name+"p99-µs")
	}
}

// BenchmarkRenderOnly isolates parsing, normalisation and template
// rendering of the same requests (no tokenizing).
func BenchmarkRenderOnly(b *testing.B) {
	m, _, bodies := benchBodies(b)
	b.ResetTimer()
	measure(b, func(i int) {
		if _, err := m.RenderChat(bodies[i]); err != nil {
			b.Fatal(err)
		}
	})
}

// BenchmarkEncodeLongWord is the tokenizer's worst case on request text:
// one unsplit piece (a run of one letter, or of spaces) of 1 MiB, which
// the BPE merges as a whole. It sets MaxTokenizeBytes.
func BenchmarkEncodeLongWord(b *testing.B) {
	files := testenv.Tokenizer(b, "qwen3")
	m, err := LoadModel(files.TokenizerJSON, files.TokenizerConfig, Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, unit string }{{"letters", "a"}, {"spaces", " "}} {
		text := strings.Repeat(c.unit, MaxTokenizeBytes)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := m.tok.Encode(text, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
