package bench

import (
	"fmt"
	"strings"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// Policy names, as --policies takes them.
const (
	PolicyRR     = "rr"
	PolicyRandom = "random"
	PolicyApprox = "approx"
	PolicyLLMD   = "llmd"
	PolicyBest   = "best"
)

// AllPolicies is every policy in report order: baselines first.
var AllPolicies = []string{PolicyRR, PolicyRandom, PolicyApprox, PolicyLLMD, PolicyBest}

// BestScorers is the challenger: the winner of the live tuning on held-out
// workloads and seeds (never the seed workload), config.CostAwareScorers.
// The router's default is whatever won on the seed workload live
// (BENCHMARKS.md); the two may be the same mix.
func BestScorers() []config.Scorer { return config.CostAwareScorers() }

// approxScorers is the Gateway API Inference Extension's default
// configuration with routing-history prefix affinity in place of precise
// KV events: the same load scorers and weights as llmd, so the comparison
// isolates approximate against precise prefix knowledge.
func approxScorers() []config.Scorer {
	return []config.Scorer{{Type: scoring.HistoryType, Weight: 3}, {Type: scoring.KVUsageType, Weight: 2},
		{Type: scoring.QueueType, Weight: 2}}
}

// RouterScorers is the scorer list a router policy runs, and whether it
// reads the KV-event index; ok is false for rr and random, which are
// placements without a router (kube-proxy, or a random pod per request).
func RouterScorers(policy string) (scorers []config.Scorer, precise, ok bool) {
	switch policy {
	case PolicyApprox:
		return approxScorers(), false, true
	case PolicyLLMD:
		return config.LLMDScorers(), true, true
	case PolicyBest:
		return BestScorers(), true, true
	}
	if name, ok := strings.CutPrefix(policy, candidatePrefix); ok {
		for _, c := range TuningCandidates() {
			if c.Name == name {
				return c.Scorers, true, true
			}
		}
	}
	return nil, false, false
}

// routed says a router process decides policy (rr and random need none).
func routed(policy string) bool {
	_, _, ok := RouterScorers(policy)
	return ok
}

// candidatePrefix names a tuning candidate as a policy ("cand:prefix+cost"),
// so live runs can try the grid one candidate at a time.
const candidatePrefix = "cand:"

// ParsePolicies splits a --policies list and checks every name.
func ParsePolicies(list string) ([]string, error) {
	var out []string
	for _, p := range strings.Split(list, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !isPolicy(p) {
			return nil, fmt.Errorf("unknown policy %q (want %s, or %s<tuning candidate>)", p, strings.Join(AllPolicies, ", "),
				candidatePrefix)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no policy in %q", list)
	}
	return out, nil
}

func isPolicy(p string) bool {
	if _, _, ok := RouterScorers(p); ok {
		return true
	}
	for _, q := range AllPolicies {
		if p == q {
			return true
		}
	}
	return false
}

// virtualPicker returns the simulator picker for policy; router policies
// run router/scoring through the adapter.
func virtualPicker(policy string, scorers []config.Scorer, seed uint64) (sim.Picker, error) {
	switch policy {
	case PolicyRR:
		return sim.NewKubeProxy(seed), nil
	case PolicyRandom:
		return sim.NewRandom(seed), nil
	}
	_, precise, ok := RouterScorers(policy)
	if !ok {
		return nil, fmt.Errorf("unknown policy %q", policy)
	}
	ws, err := scoring.FromConfig(config.Scoring{Scorers: scorers})
	if err != nil {
		return nil, fmt.Errorf("policy %s: %w", policy, err)
	}
	return &scoringPicker{scorers: ws, precise: precise, staleAfter: config.DefaultStaleAfter.Seconds()}, nil
}
