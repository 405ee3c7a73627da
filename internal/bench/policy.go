package bench

import (
	"fmt"
	"strconv"
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

// routersSep joins a router policy and how many router replicas it runs
// behind: "best@2" is best behind two routers, as the provider deploys it.
const routersSep = "@"

// aloneSuffix ends "policy@N-alone": N router replicas without the peer
// exchange, each deciding on its own view alone, as replicas decided
// before it and as they do when their peers are gone.
const aloneSuffix = "-alone"

// Routers is how many router replicas policy runs behind: N for
// "policy@N" and "policy@N-alone", else 1.
func Routers(policy string) int {
	_, n, _ := splitRouters(policy)
	return n
}

// alone says policy's router replicas run without the peer exchange.
func alone(policy string) bool {
	_, _, a := splitRouters(policy)
	return a
}

// splitRouters splits "policy@N" and "policy@N-alone" into policy, N (0
// when N is not a number from 1 to maxRouters, or below 2 alone) and
// whether alone; a name without "@" runs behind one router.
func splitRouters(policy string) (base string, n int, noPeers bool) {
	base, count, ok := strings.Cut(policy, routersSep)
	if !ok {
		return policy, 1, false
	}
	count, noPeers = strings.CutSuffix(count, aloneSuffix)
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 || n > maxRouters || noPeers && n < 2 {
		return base, 0, noPeers
	}
	return base, n, noPeers
}

// DefaultRouters is the router replicas `llmd_prefix_router` deploys by
// default, which the bench command runs each router policy behind besides one.
const DefaultRouters = 2

// maxRouters bounds the router replicas a policy runs behind.
const maxRouters = 16

// WithRouters adds, after each router policy of policies, the same policy
// behind n router replicas ("best@n"), so the report puts the one-router
// and n-router figures side by side; n <= 1 adds nothing.
func WithRouters(policies []string, n int) []string {
	out := make([]string, 0, 2*len(policies))
	for _, p := range policies {
		out = append(out, p)
		if n > 1 && routed(p) && Routers(p) == 1 {
			out = append(out, p+routersSep+strconv.Itoa(n))
		}
	}
	return out
}

// RouterScorers is the scorer list a router policy runs (behind any number
// of routers, "policy@N"), and whether it reads the KV-event index; ok is
// false for rr and random, which are placements without a router
// (kube-proxy, or a random pod per request).
func RouterScorers(policy string) (scorers []config.Scorer, precise, ok bool) {
	policy, n, _ := splitRouters(policy)
	if n == 0 {
		return nil, false, false
	}
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
			return nil, fmt.Errorf("unknown policy %q (want %s, or %s<tuning candidate>; a router policy may end in %sN, N from 1 to %d, to run behind N routers, and then in %s to run them without the peer exchange)",
				p, strings.Join(AllPolicies, ", "), candidatePrefix, routersSep, maxRouters, aloneSuffix)
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
