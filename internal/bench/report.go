package bench

import (
	"slices"
	"strconv"
)

// Report is the JSON the bench command writes: the workload and one
// summary per policy, in the order they ran (the command then leads
// with the deployed configuration: LeadWithDeployed).
type Report struct {
	Mode     string    `json:"mode"`
	Workload Workload  `json:"workload"`
	Policies []Summary `json:"policies"`
	// Live holds what live mode measured about the run itself.
	Live *LiveInfo `json:"live,omitempty"`
	// Lag is the router lag virtual mode modelled.
	Lag *RouterLag `json:"router_lag,omitempty"`
	// Ceiling, in live mode, is what routing could give the workload at
	// most: each routed policy's live throughput is read against it.
	Ceiling *Ceiling `json:"ceiling,omitempty"`
	// Caches and Probe, against given endpoints, are the engines' KV
	// caches and their prefill times, read before the first policy.
	Caches *EngineCaches `json:"caches,omitempty"`
	Probe  *PrefillProbe `json:"prefill_probe,omitempty"`
}

// Ceiling is the most output throughput any of the router's policies
// reaches on a workload in virtual time under OracleLag, a router without
// information lag (doc.go, "The ceiling of routing").
type Ceiling struct {
	Policy           string  `json:"policy"`
	OutputThroughput float64 `json:"output_throughput"`
}

// Policy returns the named policy's summary, or nil.
func (r *Report) Policy(name string) *Summary {
	for i := range r.Policies {
		if r.Policies[i].Policy == name {
			return &r.Policies[i]
		}
	}
	return nil
}

// Deployed is the configuration `llmd_prefix_router` deploys by default:
// the default scorers behind DefaultRouters replicas that exchange their
// decisions.
var Deployed = PolicyBest + routersSep + strconv.Itoa(DefaultRouters)

// LeadWithDeployed puts the deployed configuration first and the same
// scorers behind one router second, so the table and the picture open with
// what a user gets beside what one router gives; the other policies follow
// in the order they ran. A report without the deployed configuration is
// left as it is.
func (r *Report) LeadWithDeployed() {
	if r.Policy(Deployed) == nil {
		return
	}
	rank := func(s Summary) int {
		switch s.Policy {
		case Deployed:
			return 0
		case PolicyBest:
			return 1
		}
		return 2
	}
	slices.SortStableFunc(r.Policies, func(a, b Summary) int { return rank(a) - rank(b) })
}
