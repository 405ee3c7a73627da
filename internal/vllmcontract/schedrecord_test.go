package vllmcontract

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
)

// schedRecord is one run of BenchmarkSchedulerAgainstVLLM as data: the
// real engine's config and measured table, and the trace's timings on it.
// With LLMD_SCHED_RECORD=path the benchmark writes it; the recorded run
// in testdata lets the simulator be held against it without an engine.
type schedRecord struct {
	Date   string
	Engine engineRecord
	Table  tableRun
	Mixed  []mixedPoint
	Runs   []realRun
}

// engineRecord is sim.EngineConfig without its cost.
type engineRecord struct {
	NumGPUBlocks, BlockSize, MaxNumSeqs, MaxBatchedTokens int
}

func recordedEngine(ec sim.EngineConfig) engineRecord {
	return engineRecord{NumGPUBlocks: ec.NumGPUBlocks, BlockSize: ec.BlockSize, MaxNumSeqs: ec.MaxNumSeqs, MaxBatchedTokens: ec.MaxBatchedTokens}
}

// realRun is the trace's timings and counters on the real engine.
type realRun struct {
	Timings  []traceTiming
	Counters engineCounters
}

// engineConfig is the simulated replica of the recorded engine, priced by
// its table.
func (r schedRecord) engineConfig() sim.EngineConfig {
	e := r.Engine
	return sim.EngineConfig{NumGPUBlocks: e.NumGPUBlocks, BlockSize: e.BlockSize, MaxNumSeqs: e.MaxNumSeqs,
		MaxBatchedTokens: e.MaxBatchedTokens, Cost: r.Table.Table, Seed: 1}
}

func (r schedRecord) write(path string) error {
	b, err := json.MarshalIndent(r, "", " ")
	if err != nil {
		return fmt.Errorf("encoding the scheduler record: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the scheduler record: %w", err)
	}
	return nil
}

func readRecord(path string) (schedRecord, error) {
	var r schedRecord
	b, err := os.ReadFile(path)
	if err != nil {
		return r, fmt.Errorf("reading the scheduler record: %w", err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("decoding the scheduler record %s: %w", path, err)
	}
	return r, r.Table.Table.Validate()
}

// simulate replays each real run on the simulated replica, arrivals as
// the real client sent them.
func (r schedRecord) simulate(t testing.TB, trace []traceRequest) [][]classFigures {
	t.Helper()
	var out [][]classFigures
	for _, run := range r.Runs {
		simulated, _ := runTraceOnSim(t, r.engineConfig(), trace, run.Timings, r.Table.Overhead)
		out = append(out, figuresOf(trace, simulated))
	}
	return out
}

// compare renders, per real run, the per-class comparison with the
// simulated replica.
func (r schedRecord) compare(t testing.TB, trace []traceRequest) string {
	t.Helper()
	var b strings.Builder
	for i, run := range r.Runs {
		simulated, sc := runTraceOnSim(t, r.engineConfig(), trace, run.Timings, r.Table.Overhead)
		fmt.Fprintf(&b, "run %d:\n\n%s\n", i+1, comparison(trace, run.Timings, simulated, run.Counters, sc))
	}
	return b.String()
}
