package bench

import (
	"fmt"
	"runtime"
	"sync"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
)

// eventDelay is how long KV events take from a step's end to the router's
// index in virtual mode: publish, loopback network and decode, as the
// simulator's own calibration assumes.
const eventDelay = 0.01

// RunVirtual runs every policy on the workload in the simulator's virtual
// time, the policies in parallel (each run is deterministic and single
// threaded, so parallelism changes only the wall time).
func RunVirtual(w Workload, policies []string) (Report, error) {
	rep := Report{Mode: "virtual", Workload: w.Normalize(), Policies: make([]Summary, len(policies))}
	errs := make([]error, len(policies))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, p := range policies {
		scorers, _, _ := RouterScorers(p)
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			rep.Policies[i], errs[i] = runVirtualPolicy(w, p, scorers)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return rep, fmt.Errorf("policy %s: %w", policies[i], err)
		}
	}
	return rep, nil
}

// runVirtualPolicy runs one policy, with scorers for router policies.
func runVirtualPolicy(w Workload, policy string, scorers []config.Scorer) (Summary, error) {
	ds, err := w.SimDataset()
	if err != nil {
		return Summary{}, err
	}
	p, err := virtualPicker(policy, scorers, w.Seed)
	if err != nil {
		return Summary{}, err
	}
	res, err := sim.RunVirtual(sim.VirtualConfig{Engine: sim.DefaultEngineConfig(), Replicas: w.Replicas, Workload: ds,
		Concurrency: w.MaxConcurrency, RequestRate: w.RequestRate, Picker: p, EventDelay: eventDelay,
		Form: kvevents.FormMap, Seed: w.Seed})
	if err != nil {
		if sp, ok := p.(*scoringPicker); ok && sp.err != nil {
			err = fmt.Errorf("%w (picker: %w)", err, sp.err)
		}
		return Summary{}, err
	}
	recs := make([]Record, len(res.Records))
	for i, r := range res.Records {
		recs[i] = Record{Sent: r.Sent, FirstToken: r.FirstToken, Done: r.Done, PromptTokens: r.PromptTokens,
			OutputTokens: r.OutputTokens}
	}
	return Summarize(policy, recs, 0, Fleet{HitRate: res.HitRate, PeakWaiting: res.PeakWaiting,
		MeanKVUsage: res.MeanKVUsage, Preemptions: float64(res.Preemptions), PodRequests: res.PodRequests}), nil
}
