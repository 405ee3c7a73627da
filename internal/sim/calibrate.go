package sim

import (
	"fmt"
	"strings"
	"sync"
)

// SeedBaseline is the seed benchmark's Kubernetes-baseline result that the
// simulator is calibrated against.
var SeedBaseline = Result{Duration: 840.2, OutputThroughput: 2742, MeanTTFT: 19.0, HitRate: 0.11,
	MeanWaiting: 180, MeanKVUsage: 0.99}

// CalibrationRow is one run of the seed workload under the baseline.
type CalibrationRow struct {
	Label        string
	NumGPUBlocks int
	Result       Result
}

// CalibrationReport is the baseline at the configured capacity and at
// -20% and +20% blocks.
type CalibrationReport struct{ Rows []CalibrationRow }

// Calibrate runs the seed workload through 8 replicas behind kube-proxy
// (random pod per keep-alive connection, 512 connections) at ec's capacity
// and at 0.8x and 1.2x of it, in parallel (each run is deterministic).
func Calibrate(ec EngineConfig, seed uint64) (CalibrationReport, error) {
	factors := []struct {
		label string
		f     float64
	}{{"simulated", 1}, {"blocks -20%", 0.8}, {"blocks +20%", 1.2}}
	rep := CalibrationReport{Rows: make([]CalibrationRow, len(factors))}
	errs := make([]error, len(factors))
	var wg sync.WaitGroup
	for i, fc := range factors {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := ec
			c.NumGPUBlocks = int(float64(ec.NumGPUBlocks) * fc.f)
			res, err := RunVirtual(calibrationRun(c, seed))
			rep.Rows[i], errs[i] = CalibrationRow{Label: fc.label, NumGPUBlocks: c.NumGPUBlocks, Result: res}, err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return rep, fmt.Errorf("calibration run: %w", err)
		}
	}
	return rep, nil
}

// calibrationRun is the seed workload under the kube-proxy baseline.
func calibrationRun(ec EngineConfig, seed uint64) VirtualConfig {
	w := SeedWorkload()
	w.Seed = seed
	return VirtualConfig{Engine: ec, Replicas: 8, Workload: w, Concurrency: 512, Picker: NewKubeProxy(seed),
		EventDelay: 0.01, Seed: seed}
}

// Markdown renders the report as the table in doc.go.
func (c CalibrationReport) Markdown() string {
	var b strings.Builder
	b.WriteString("| run | num_gpu_blocks | duration s | output tok/s | mean TTFT s | hit rate | waiting | KV use | preemptions |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	s := SeedBaseline
	fmt.Fprintf(&b, "| seed (vLLM) | | %.1f | %.0f | %.1f | ~%.0f%% | ~%.0f | ~%.0f%% | |\n",
		s.Duration, s.OutputThroughput, s.MeanTTFT, 100*s.HitRate, s.MeanWaiting, 100*s.MeanKVUsage)
	for _, row := range c.Rows {
		r := row.Result
		fmt.Fprintf(&b, "| %s | %d | %.1f (%+.1f%%) | %.0f (%+.1f%%) | %.1f (%+.1f%%) | %.1f%% | %.0f | %.1f%% | %d |\n",
			row.Label, row.NumGPUBlocks, r.Duration, pct(r.Duration, s.Duration), r.OutputThroughput,
			pct(r.OutputThroughput, s.OutputThroughput), r.MeanTTFT, pct(r.MeanTTFT, s.MeanTTFT),
			100*r.HitRate, r.MeanWaiting, 100*r.MeanKVUsage, r.Preemptions)
	}
	return b.String()
}

func pct(got, want float64) float64 { return 100 * (got - want) / want }
