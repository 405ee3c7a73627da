package bench

import (
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
)

// RouterLag is what separates the live router's decisions from the
// fleet's state, as virtual mode models it, in simulated seconds.
type RouterLag struct {
	// Scrape is the /metrics polling period.
	Scrape float64 `json:"scrape_s"`
	// EventDelay is from a step's end to its KV events in the index.
	EventDelay float64 `json:"event_delay_s"`
	// SpeculationTTL is how long an unconfirmed speculative entry lives.
	SpeculationTTL float64 `json:"speculation_ttl_s"`
	// PerRequest is the router's processing time per request (read,
	// tokenize, score, forward), spent in arrival order: it spreads a burst.
	PerRequest float64 `json:"per_request_s"`
	// Workers is how many requests the router decides at once (0 or 1: one
	// after another, as the 2-core test machine's live router measured).
	Workers int `json:"workers,omitempty"`
	// PeerDelay is from one router replica's decision (its request's first
	// token, its end) to the other replicas' views (sim.VirtualConfig.PeerDelay).
	PeerDelay float64 `json:"peer_delay_s"`
}

// eventDelay is how long KV events take in wall time from a step's end to
// the router's index: publish, loopback ZeroMQ and decode.
const eventDelay = 0.01

// peerDelay is how long in wall time one router replica's news (a
// decision, its request's first byte or end) takes to reach the other
// replicas' views: router/peers sends a replica's news in a batch at most
// FlushEvery (2 ms by default) after it happens, then the batch crosses
// the pod network once, at worst between Availability Zones ("single-digit
// millisecond latency", AWS Fault Isolation Boundaries, Availability
// Zones; EC2 pings between zones of one Region 0.4-2.1 ms round trip, so
// about 1 ms one way), and the peer applies it in microseconds. About 3 ms
// at worst, rounded up: pessimistic until the live exchange's delay is
// measured (BENCHMARKS.md, session 15).
const peerDelay = 5 * time.Millisecond

// routerCostPerRequest is the live router's wall time per request on this
// project's 2-core test machine, where client, replicas and router share
// the CPU, text prompts tokenized included. Measured: a live demo-scale
// run of llmd whose 450 prompts are all one opening burst showed a mean
// router overhead (llmd_router_overhead_seconds: reading, tokenizing,
// scoring, forwarding) of 229 ms, which a burst served one request after
// another gives for 2 x 229 ms / 451 = 1.0 ms each (BENCHMARKS.md).
const routerCostPerRequest = time.Millisecond

// LiveLag is the lag of `llmd-router serve` with its defaults (50 ms
// scrapes, 2 s speculation TTL) in front of replicas running timeScale
// simulated seconds per wall-clock second: every wall-clock delay of the
// router stretches by the time scale in simulated time.
func LiveLag(timeScale float64) RouterLag { return liveLag(timeScale, routerCostPerRequest, peerDelay) }

// liveLag is LiveLag with another router cost per request and peer delay
// (wall time).
func liveLag(timeScale float64, perRequest, peers time.Duration) RouterLag {
	return RouterLag{Scrape: config.DefaultScrapeInterval.Seconds() * timeScale, EventDelay: eventDelay * timeScale,
		SpeculationTTL: config.DefaultSpeculationTTL.Seconds() * timeScale, PerRequest: perRequest.Seconds() * timeScale,
		PeerDelay: peers.Seconds() * timeScale}
}

// OracleLag is a router that sees the fleet as it is at each decision:
// loads scraped every millisecond, KV events in the index the moment their
// step ends, router replicas' news of each other at once, no time spent
// per request (speculative entries live as in LiveLag, though with events
// at once they are confirmed at once). No
// router works so; a policy's throughput under it is the ceiling of its
// scorers on the workload, and the gap to its LiveLag run is what the
// router's information lag costs.
func OracleLag(timeScale float64) RouterLag {
	return RouterLag{Scrape: 0.001, SpeculationTTL: LiveLag(timeScale).SpeculationTTL}
}

// routedPolicies are the policies a router process decides.
var routedPolicies = []string{PolicyApprox, PolicyLLMD, PolicyBest}

// RoutingCeiling runs the routed policies on w in virtual time under
// OracleLag(timeScale) and returns the best of them.
func RoutingCeiling(w Workload, timeScale float64) (Ceiling, error) {
	rep, err := RunVirtual(w, routedPolicies, OracleLag(timeScale))
	if err != nil {
		return Ceiling{}, fmt.Errorf("the ceiling of routing: %w", err)
	}
	var c Ceiling
	for _, s := range rep.Policies {
		if s.OutputThroughput > c.OutputThroughput {
			c = Ceiling{Policy: s.Policy, OutputThroughput: s.OutputThroughput}
		}
	}
	return c, nil
}

// RunVirtual runs every policy on the workload in the simulator's virtual
// time with the router's lag, the policies in parallel (each run is
// deterministic and single threaded, so parallelism changes only the wall
// time).
func RunVirtual(w Workload, policies []string, lag RouterLag) (Report, error) {
	rep := Report{Mode: "virtual", Workload: w.Normalize(), Policies: make([]Summary, len(policies)), Lag: &lag}
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
			rep.Policies[i], errs[i] = runVirtualLagged(w, p, scorers, lag)
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

// runVirtualPolicy runs one policy, with scorers for router policies,
// behind a router in real time (the tuning runs).
func runVirtualPolicy(w Workload, policy string, scorers []config.Scorer) (Summary, error) {
	return runVirtualLagged(w, policy, scorers, LiveLag(1))
}

// runVirtualLagged runs one policy with the given router lag. rr and
// random are placements without a router: they pay no router cost.
func runVirtualLagged(w Workload, policy string, scorers []config.Scorer, lag RouterLag) (Summary, error) {
	return runVirtualOn(w.engineConfig(), w, policy, scorers, lag)
}

// runVirtualOn is runVirtualLagged on replicas running engine ec.
func runVirtualOn(ec sim.EngineConfig, w Workload, policy string, scorers []config.Scorer, lag RouterLag) (Summary, error) {
	ps := make([]sim.Picker, Routers(policy))
	for k := range ps {
		p, err := virtualPicker(policy, scorers, w.Seed)
		if err != nil {
			return Summary{}, err
		}
		ps[k] = p
	}
	return runVirtualPicker(ec, w, policy, ps, lag)
}

// runVirtualPicker is runVirtualOn with the policy's pickers built, one
// per router replica.
func runVirtualPicker(ec sim.EngineConfig, w Workload, policy string, ps []sim.Picker, lag RouterLag) (Summary, error) {
	ds, err := w.SimDataset()
	if err != nil {
		return Summary{}, err
	}
	perRequest := lag.PerRequest
	if !routed(policy) {
		perRequest = 0
	}
	res, err := sim.RunVirtual(sim.VirtualConfig{Engine: ec, Replicas: w.Replicas, Workload: ds,
		Concurrency: w.MaxConcurrency, RequestRate: w.RequestRate, Picker: ps[0], Routers: ps, EventDelay: lag.EventDelay,
		ScrapeInterval: lag.Scrape, SpeculationTTL: lag.SpeculationTTL, RouterCost: perRequest, RouterWorkers: lag.Workers,
		PeerDelay: lag.PeerDelay, NoPeers: alone(policy), Form: kvevents.FormMap, Seed: w.Seed})
	if err != nil {
		for _, p := range ps {
			if sp, ok := p.(interface{ pickErr() error }); ok && sp.pickErr() != nil {
				err = fmt.Errorf("%w (picker: %w)", err, sp.pickErr())
			}
		}
		return Summary{}, err
	}
	recs := make([]Record, len(res.Records))
	for i, r := range res.Records {
		recs[i] = Record{Sent: r.Sent, FirstToken: r.FirstToken, Done: r.Done, PromptTokens: r.PromptTokens,
			OutputTokens: r.OutputTokens}
	}
	return Summarize(policy, recs, 0, Fleet{HitRate: res.HitRate, PeakWaiting: res.PeakWaiting,
		MeanKVUsage: res.MeanKVUsage, Preemptions: float64(res.Preemptions), PodRequests: res.PodRequests,
		RouterRequests: routerRequests(res.RouterRequests)}), nil
}

// routerRequests is the per-router count worth reporting: none for one router.
func routerRequests(counts []int) []int {
	if len(counts) < 2 {
		return nil
	}
	return counts
}
