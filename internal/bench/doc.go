// Package bench is the A/B benchmark of routing policies: a load generator
// that mirrors `vllm bench serve` and runs the same workload through the
// Kubernetes baseline, simple placements and the router's scorer
// configurations, on the simulated fleet of package sim.
package bench
