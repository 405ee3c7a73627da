package vllmcontract

import (
	"cmp"
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// BenchmarkSchedulerAgainstVLLM holds the simulator's scheduler against
// vLLM's (DESIGN.md decision 11): one real engine with the fleet's test
// flags is measured in isolation into a sim.CostTable (microbenchmarks,
// never the trace), then the same trace runs on that engine and on one
// simulated replica of the same engine config priced by that table, and
// the per-class mean TTFT, mean TPOT and throughput are compared. The
// cost being the engine's own, what differs is the scheduler's structure.
// It is a benchmark, so plain `go test` never spends its minutes:
//
//	go test -run '^$' -bench SchedulerAgainstVLLM -benchtime 1x -v -timeout 40m ./internal/vllmcontract
func BenchmarkSchedulerAgainstVLLM(b *testing.B) {
	for b.Loop() {
		te := testenv.StartEngine(b, onBenchCore(engineOptions(b, tableFleet())))
		tab := measureCostTable(b, te)
		b.Logf("cost table measured on %s (%d blocks):\n%s", te.Name, tableBlocks, tab.markdown())
		mixed := measureMixed(b, te, tab.Table)
		b.Logf("mixed steps measured on %s, against the table's price (the table's own check, not the trace):\n%s", te.Name, mixedMarkdown(mixed))
		te.Stop()

		e := testenv.StartEngine(b, onBenchCore(engineOptions(b, testFleet())))
		ec := engineConfigOf(b, e)
		b.Logf("engine config, as the real engine runs it: %d blocks of %d tokens, max_num_seqs %d, max_num_batched_tokens %d",
			ec.NumGPUBlocks, ec.BlockSize, ec.MaxNumSeqs, ec.MaxBatchedTokens)
		rec := schedRecord{Date: time.Now().UTC().Format(time.DateOnly), Engine: recordedEngine(ec), Table: tab, Mixed: mixed}
		trace := buildTrace()
		for range traceRuns {
			resetPrefixCache(b, e)
			real, rc := runTraceOnEngine(b, e, trace)
			rec.Runs = append(rec.Runs, realRun{Timings: real, Counters: rc})
		}
		e.Stop()
		if path := os.Getenv("LLMD_SCHED_RECORD"); path != "" {
			if err := rec.write(path); err != nil {
				b.Fatal(err)
			}
		}
		b.Logf("trace of %d requests, real engine against simulated replica:\n%s", len(trace), rec.compare(b, trace))
	}
}

// onBenchCore pins an engine's threads to core 0, whatever its slot: the
// table's engine and the trace's run one after the other, and a table
// measured on one core prices another core's steps some 5% off on this
// shared machine.
func onBenchCore(o testenv.EngineOptions) testenv.EngineOptions {
	env := map[string]string{"VLLM_CPU_OMP_THREADS_BIND": "0"}
	for k, v := range o.Env {
		env[k] = v
	}
	o.Env = env
	return o
}

// traceRuns is how often the real engine runs the trace: the runs'
// spread is the noise the comparison stands in.
const traceRuns = 2

// cacheConfigOf is e's KV cache as it states it in vllm:cache_config_info,
// read with Prometheus's parser.
func cacheConfigOf(t testing.TB, e *testenv.Engine) (blocks, blockSize int) {
	t.Helper()
	info := family(t, e.URL, "vllm:cache_config_info").GetMetric()
	if len(info) != 1 {
		t.Fatalf("%s: %d cache_config_info series", e.Name, len(info))
	}
	labels := map[string]string{}
	for _, l := range info[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	blocks, err1 := strconv.Atoi(labels["num_gpu_blocks"])
	blockSize, err2 := strconv.Atoi(labels["block_size"])
	if err1 != nil || err2 != nil {
		t.Fatalf("%s: cache_config_info %v lacks num_gpu_blocks or block_size", e.Name, labels)
	}
	return blocks, blockSize
}

// engineConfigOf is the simulated engine the real one is: its cache as it
// reports it (vllm:cache_config_info) and its scheduler's settings as it
// runs them (dev mode's /server_info: max_num_batched_tokens is vLLM's
// CPU default, no flag sets it). It fails on a setting the simulator does
// not model.
func engineConfigOf(t testing.TB, e *testenv.Engine) sim.EngineConfig {
	t.Helper()
	blocks, size := cacheConfigOf(t, e)
	s := schedulerConfigOf(t, e)
	t.Logf("%s's scheduler: %+v", e.Name, s)
	if !s.EnableChunkedPrefill || s.AsyncScheduling || s.LongPrefillTokenThreshold != 0 || s.Watermark != 0 || !s.SchedulerReserveFullISL {
		t.Fatalf("%s's scheduler %+v: the simulator models chunked prefill, synchronous steps, no long-prefill cap, no watermark and whole-sequence admission", e.Name, s)
	}
	return sim.EngineConfig{NumGPUBlocks: blocks, BlockSize: size, MaxNumSeqs: s.MaxNumSeqs, MaxBatchedTokens: s.MaxNumBatchedTokens, Seed: 1}
}

// schedulerConfig is the part of vLLM's SchedulerConfig the simulator
// follows or refuses.
type schedulerConfig struct {
	MaxNumSeqs                int     `json:"max_num_seqs"`
	MaxNumBatchedTokens       int     `json:"max_num_batched_tokens"`
	EnableChunkedPrefill      bool    `json:"enable_chunked_prefill"`
	AsyncScheduling           bool    `json:"async_scheduling"`
	LongPrefillTokenThreshold int     `json:"long_prefill_token_threshold"`
	Watermark                 float64 `json:"watermark"`
	SchedulerReserveFullISL   bool    `json:"scheduler_reserve_full_isl"`
	Policy                    string  `json:"policy"`
}

// schedulerConfigOf reads the engine's scheduler config from /server_info
// (VLLM_SERVER_DEV_MODE=1).
func schedulerConfigOf(t testing.TB, e *testenv.Engine) schedulerConfig {
	t.Helper()
	resp, err := client.Get(e.URL + "/server_info?config_format=json")
	if err != nil {
		t.Fatalf("reading %s's server info: %v", e.Name, err)
	}
	defer resp.Body.Close()
	var info struct {
		VLLMConfig struct {
			SchedulerConfig schedulerConfig `json:"scheduler_config"`
		} `json:"vllm_config"`
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("reading %s's server info: %s", e.Name, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		t.Fatalf("decoding %s's server info: %v", e.Name, err)
	}
	return info.VLLMConfig.SchedulerConfig
}

// resetPrefixCache empties the engine's prefix cache, as the simulated
// replica starts.
func resetPrefixCache(t testing.TB, e *testenv.Engine) {
	t.Helper()
	if status, out := post(t, e.URL+"/reset_prefix_cache", nil); status != 200 {
		t.Fatalf("resetting %s's prefix cache: %d %s", e.Name, status, out)
	}
}

// sortByArrival orders requests by arrival, ties in trace order.
func sortByArrival(reqs []*sim.Request) {
	slices.SortStableFunc(reqs, func(a, b *sim.Request) int { return cmp.Compare(a.Arrival, b.Arrival) })
}
