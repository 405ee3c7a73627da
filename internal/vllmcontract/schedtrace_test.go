package vllmcontract

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// traceClass is one kind of request in the comparison trace.
type traceClass struct {
	Name string
	// Count requests, each a shared prefix of PrefixLen tokens (one of
	// Prefixes, 0 for none) and a fresh suffix of SuffixLen, generating
	// OutputLen tokens.
	Count, Prefixes, PrefixLen, SuffixLen, OutputLen int
}

// traceClasses are the trace's classes: long prompts sharing a few
// prefixes (prefix reuse), short prompts with long outputs (decode
// batching), and long fresh prompts over the token budget with long
// outputs (chunked prefill, and KV pressure: four of them fill most of
// the 255 blocks, so admissions wait and running requests may be
// preempted).
var traceClasses = []traceClass{
	{Name: "shared prefix", Count: 24, Prefixes: 4, PrefixLen: 1536, SuffixLen: 64, OutputLen: 32},
	{Name: "short", Count: 24, SuffixLen: 96, OutputLen: 96},
	{Name: "long", Count: 12, SuffixLen: 3520, OutputLen: 192},
}

// traceRate is the trace's Poisson arrival rate, requests per second:
// most of the engine's capacity for this mix on one core.
const traceRate = 3.0

// traceRequest is one request of the trace.
type traceRequest struct {
	Class  int
	At     time.Duration // arrival after the trace's start
	Prompt []int
	Output int
}

// buildTrace draws the trace: the classes' requests shuffled, arriving
// as a Poisson process at traceRate.
func buildTrace() []traceRequest {
	rng := rand.New(rand.NewPCG(2026, 1203))
	var reqs []traceRequest
	for ci, c := range traceClasses {
		prefixes := make([][]int, c.Prefixes)
		for p := range prefixes {
			prefixes[p] = tokenPrompt(uint64(1<<32+ci<<8+p), c.PrefixLen)
		}
		for k := range c.Count {
			prompt := tokenPrompt(uint64(1<<33+ci<<16+k), c.SuffixLen)
			if c.Prefixes > 0 {
				prompt = append(append([]int(nil), prefixes[k%c.Prefixes]...), prompt...)
			}
			reqs = append(reqs, traceRequest{Class: ci, Prompt: prompt, Output: c.OutputLen})
		}
	}
	rng.Shuffle(len(reqs), func(i, j int) { reqs[i], reqs[j] = reqs[j], reqs[i] })
	at := 0.0
	for i := range reqs {
		reqs[i].At = time.Duration(at * float64(time.Second))
		at += rng.ExpFloat64() / traceRate
	}
	return reqs
}

// traceTiming is one request's times, seconds after the trace's start.
type traceTiming struct {
	Sent, FirstToken, Done float64
}

func (r traceTiming) ttft() float64 { return r.FirstToken - r.Sent }

// engineCounters are the engine-wide figures of a run.
type engineCounters struct {
	Steps, Preemptions, PromptTokens, PrefixHits float64
}

// runTraceOnEngine sends the trace to the real engine, each request at its
// arrival on its own connection, and times what the client sees.
func runTraceOnEngine(t testing.TB, e *testenv.Engine, trace []traceRequest) ([]traceTiming, engineCounters) {
	t.Helper()
	before := counters(t, e.URL)
	out := make([]traceTiming, len(trace))
	errs := make([]error, len(trace))
	start := time.Now()
	var wg sync.WaitGroup
	for i, r := range trace {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Until(start.Add(r.At)))
			s, err := streamCompletion(e.URL, r.Prompt, r.Output)
			if err == nil && s.PromptTokens != len(r.Prompt) {
				err = fmt.Errorf("trace request %d: the engine counted %d prompt tokens, not %d", i, s.PromptTokens, len(r.Prompt))
			}
			if err != nil {
				errs[i] = err
				return
			}
			out[i] = traceTiming{Sent: s.Sent.Sub(start).Seconds(), FirstToken: s.Chunks[0].At.Sub(start).Seconds(),
				Done: s.done().Sub(start).Seconds()}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	after := counters(t, e.URL)
	return out, engineCounters{Steps: after.Steps - before.Steps, Preemptions: after.Preemptions - before.Preemptions,
		PromptTokens: after.PromptTokens - before.PromptTokens, PrefixHits: after.PrefixHits - before.PrefixHits}
}

// counters reads the engine's cumulative counters: its steps are the
// count of its per-step token histogram.
func counters(t testing.TB, url string) engineCounters {
	t.Helper()
	_, steps := histogram(t, url, "vllm:iteration_tokens_total")
	return engineCounters{Steps: steps, Preemptions: series(t, url, "vllm:num_preemptions_total", nil),
		PromptTokens: series(t, url, "vllm:prompt_tokens_total", nil), PrefixHits: series(t, url, "vllm:prefix_cache_hits_total", nil)}
}

// runTraceOnSim replays the trace on one simulated replica of config ec,
// each request arriving when the real client sent it; its client sees
// each first token frontEnd seconds after the step that made it (the real
// API server's share of a TTFT, measured on the idle engine: the
// simulated engine has no front end).
func runTraceOnSim(t testing.TB, ec sim.EngineConfig, trace []traceRequest, sent []traceTiming, frontEnd float64) ([]traceTiming, engineCounters) {
	t.Helper()
	reqs := make([]*sim.Request, len(trace))
	for i, r := range trace {
		p := make([]uint32, len(r.Prompt), len(r.Prompt)+r.Output)
		for k, id := range r.Prompt {
			p[k] = uint32(id)
		}
		reqs[i] = &sim.Request{ID: uint64(i), Prompt: p, MaxTokens: r.Output, Arrival: sent[i].Sent}
	}
	// Goroutines may have sent in another order than the trace's.
	order := make([]*sim.Request, len(reqs))
	copy(order, reqs)
	sortByArrival(order)
	st, err := sim.Replay(ec, order)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]traceTiming, len(reqs))
	for i, r := range reqs {
		out[i] = traceTiming{Sent: r.Arrival, FirstToken: r.FirstToken + frontEnd, Done: r.Done + frontEnd}
	}
	return out, engineCounters{Steps: float64(st.Steps), Preemptions: float64(st.Preemptions),
		PromptTokens: float64(st.PrefixQueries), PrefixHits: float64(st.PrefixHits)}
}

// classFigures are one class's figures in one run.
type classFigures struct {
	TTFT, TPOT, Throughput float64
}

// figuresOf are each class's mean TTFT and TPOT and its output throughput
// (its output tokens over its span, first sent to last done), then the
// whole trace's as a last entry.
func figuresOf(trace []traceRequest, ts []traceTiming) []classFigures {
	out := make([]classFigures, len(traceClasses)+1)
	for ci := range out {
		var ttft, tpot []float64
		first, last, tokens := 0.0, 0.0, 0
		for i, r := range trace {
			if ci < len(traceClasses) && r.Class != ci {
				continue
			}
			x := ts[i]
			ttft = append(ttft, x.ttft())
			tpot = append(tpot, (x.Done-x.FirstToken)/float64(r.Output-1))
			if len(ttft) == 1 || x.Sent < first {
				first = x.Sent
			}
			last = max(last, x.Done)
			tokens += r.Output
		}
		out[ci] = classFigures{TTFT: mean(ttft), TPOT: mean(tpot), Throughput: float64(tokens) / (last - first)}
	}
	return out
}

// comparison renders the per-class table of the real engine against the
// simulated replica.
func comparison(trace []traceRequest, real, simulated []traceTiming, rc, sc engineCounters) string {
	var b strings.Builder
	b.WriteString("| class | requests | mean TTFT ms real / sim (err) | mean TPOT ms real / sim (err) | output tok/s real / sim (err) |\n|---|---|---|---|---|\n")
	rf, sf := figuresOf(trace, real), figuresOf(trace, simulated)
	for ci := range rf {
		name, n := "all", len(trace)
		if ci < len(traceClasses) {
			name, n = traceClasses[ci].Name, traceClasses[ci].Count
		}
		fmt.Fprintf(&b, "| %s | %d | %.1f / %.1f (%+.1f%%) | %.2f / %.2f (%+.1f%%) | %.1f / %.1f (%+.1f%%) |\n", name, n,
			1e3*rf[ci].TTFT, 1e3*sf[ci].TTFT, pctErr(sf[ci].TTFT, rf[ci].TTFT),
			1e3*rf[ci].TPOT, 1e3*sf[ci].TPOT, pctErr(sf[ci].TPOT, rf[ci].TPOT),
			rf[ci].Throughput, sf[ci].Throughput, pctErr(sf[ci].Throughput, rf[ci].Throughput))
	}
	fmt.Fprintf(&b, "\nengine steps real / sim: %.0f / %.0f; preemptions %.0f / %.0f; prompt tokens %.0f / %.0f, of them prefix-cache hits %.0f / %.0f\n",
		rc.Steps, sc.Steps, rc.Preemptions, sc.Preemptions, rc.PromptTokens, sc.PromptTokens, rc.PrefixHits, sc.PrefixHits)
	return b.String()
}

// pctErr is got's error against want, percent.
func pctErr(got, want float64) float64 { return 100 * (got - want) / want }
