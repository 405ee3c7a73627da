package sim

import "testing"

// BenchmarkSeedWorkloadVirtual is the full seed workload (8 replicas, 9,000
// prompts, 512 connections, kube-proxy baseline) in virtual time: the unit
// of work of the policy benchmark, which runs it once per policy.
func BenchmarkSeedWorkloadVirtual(b *testing.B) {
	for b.Loop() {
		res, err := RunVirtual(calibrationRun(SeedEngineConfig(), 1))
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(res.Duration, "sim-s/op")
	}
}
