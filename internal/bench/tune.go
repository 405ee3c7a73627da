package bench

import (
	"fmt"
	"maps"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// Candidate is one scorer configuration tried for `best`.
type Candidate struct {
	Name    string
	Scorers []config.Scorer
}

// String renders the weights as "prefix 3 : cost 2", parameters in
// brackets ("load-bound 10 (factor 1.75)").
func (c Candidate) String() string {
	parts := make([]string, len(c.Scorers))
	for i, s := range c.Scorers {
		parts[i] = fmt.Sprintf("%s %g", s.Type, s.Weight)
		if len(s.Params) > 0 {
			var ps []string
			for _, k := range slices.Sorted(maps.Keys(s.Params)) {
				ps = append(ps, fmt.Sprintf("%s %g", k, s.Params[k]))
			}
			parts[i] += " (" + strings.Join(ps, ", ") + ")"
		}
	}
	return strings.Join(parts, " : ")
}

func sc(typ string, w float64) config.Scorer { return config.Scorer{Type: typ, Weight: w} }

// bound is the bounded-load scorer as a hard bound: its weight outweighs
// every other candidate's scorers together.
func bound(factor float64) config.Scorer {
	return config.Scorer{Type: scoring.LoadBoundType, Weight: 10, Params: map[string]float64{"factor": factor}}
}

// TuningCandidates is the grid `best` was chosen from: llm-d's
// configuration, its load scorers swapped for the router's own in-flight
// count and the TTFT cost estimate, and the spread scorer for new prefixes.
func TuningCandidates() []Candidate {
	const p, q, kv, inf, sp, c, rv = scoring.PrefixType, scoring.QueueType, scoring.KVUsageType, scoring.InFlightType,
		scoring.SpreadType, scoring.CostType, scoring.RendezvousType
	return []Candidate{
		{"llmd", config.LLMDScorers()},
		{"llmd+inflight", []config.Scorer{sc(p, 3), sc(kv, 2), sc(q, 2), sc(inf, 2)}},
		{"prefix+inflight", []config.Scorer{sc(p, 3), sc(inf, 2)}},
		{"prefix+inflight+spread", []config.Scorer{sc(p, 3), sc(inf, 2), sc(sp, 1)}},
		{"cost", []config.Scorer{sc(c, 1)}},
		{"cost+inflight", []config.Scorer{sc(c, 2), sc(inf, 1)}},
		{"prefix+cost", []config.Scorer{sc(p, 1), sc(c, 1)}},
		{"prefix+cost+inflight+spread", []config.Scorer{sc(p, 3), sc(c, 2), sc(inf, 1), sc(sp, 1)}},
		{"prefix+cost+inflight", []config.Scorer{sc(p, 2), sc(c, 2), sc(inf, 1)}},
		{"cost+prefix+inflight+spread", []config.Scorer{sc(c, 3), sc(p, 1), sc(inf, 1), sc(sp, 1)}},
		{"llmd+bound", []config.Scorer{sc(p, 3), sc(kv, 2), sc(q, 2), bound(1.25)}},
		{"prefix+cost+inflight+bound", []config.Scorer{sc(p, 2), sc(c, 2), sc(inf, 1), bound(1.25)}},
		{"prefix+cost+inflight+bound1.1", []config.Scorer{sc(p, 2), sc(c, 2), sc(inf, 1), bound(1.1)}},
		{"prefix+inflight+bound", []config.Scorer{sc(p, 3), sc(inf, 1), bound(1.25)}},
		{"llmd+bound1.5", append(config.LLMDScorers(), bound(1.5))},
		{"prefix+cost+inflight+bound1.5", []config.Scorer{sc(p, 2), sc(c, 2), sc(inf, 1), bound(1.5)}},
		{"llmd+spread", []config.Scorer{sc(p, 3), sc(kv, 2), sc(q, 2), sc(sp, 4)}},
		{"prefix+cost+inflight+bound1.75", []config.Scorer{sc(p, 2), sc(c, 2), sc(inf, 1), bound(1.75)}},
		{"prefix+cost+inflight+bound2", []config.Scorer{sc(p, 2), sc(c, 2), sc(inf, 1), bound(2)}},
		{"prefix+cost+inflight+spread2", []config.Scorer{sc(p, 2), sc(c, 2), sc(inf, 1), sc(sp, 2)}},
		// New prefixes placed alike by every router replica (issue 29
		// item 2): the mix above plus rendezvous at three weights; the
		// first is the default.
		{"prefix+cost+inflight+bound1.75+rendezvous1", config.CostAwareScorers()},
		{"prefix+cost+inflight+bound1.75+rendezvous2", []config.Scorer{sc(p, 2), sc(c, 2), sc(inf, 1), bound(1.75), sc(rv, 2)}},
		{"prefix+cost+inflight+bound1.75+rendezvous4", []config.Scorer{sc(p, 2), sc(c, 2), sc(inf, 1), bound(1.75), sc(rv, 4)}},
	}
}

// TuningWorkloads are the held-out workloads `best` was tuned on: other
// datasets and other seeds than the seed workload it is reported on.
func TuningWorkloads() map[string]Workload {
	zipf := SeedWorkload()
	zipf.Dataset, zipf.ZipfS, zipf.Seed = DatasetZipf, 1.1, 2
	none := SeedWorkload()
	none.Dataset, none.Seed = DatasetNone, 3
	long := SeedWorkload()
	long.PrefixLen, long.Seed = 6144, 4
	return map[string]Workload{"zipf": zipf, "none": none, "long-6k": long}
}

// TuningResult is every candidate's output throughput per held-out
// workload, and the score candidates are ranked by.
type TuningResult struct {
	Candidates []Candidate
	Workloads  []string
	// Throughput[c][w] is candidate c's output throughput on workload w.
	Throughput [][]float64
	// Score[c] is the geometric mean over workloads of candidate c's
	// throughput relative to the best candidate on that workload: 1 for a
	// candidate that wins everywhere; every workload weighs the same
	// whatever its absolute throughput.
	Score []float64
}

// Winner is the index of the highest-scoring candidate (the first on a tie).
func (t TuningResult) Winner() int {
	best := 0
	for i, s := range t.Score {
		if s > t.Score[best] {
			best = i
		}
	}
	return best
}

// Tune runs every candidate on every workload in virtual time.
func Tune(cands []Candidate, workloads map[string]Workload) (TuningResult, error) {
	res := TuningResult{Candidates: cands}
	for name := range workloads {
		res.Workloads = append(res.Workloads, name)
	}
	slices.Sort(res.Workloads)
	res.Throughput = make([][]float64, len(cands))
	errs := make([]error, len(cands)*len(res.Workloads))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for ci, c := range cands {
		res.Throughput[ci] = make([]float64, len(res.Workloads))
		for wi, wn := range res.Workloads {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				s, err := runVirtualPolicy(workloads[wn], PolicyBest, c.Scorers)
				res.Throughput[ci][wi], errs[ci*len(res.Workloads)+wi] = s.OutputThroughput, err
				if err != nil {
					errs[ci*len(res.Workloads)+wi] = fmt.Errorf("candidate %s on %s: %w", c.Name, wn, err)
				}
			}()
		}
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return res, err
		}
	}
	res.Score = make([]float64, len(cands))
	for ci := range cands {
		logSum := 0.0
		for wi := range res.Workloads {
			top := 0.0
			for cj := range cands {
				top = max(top, res.Throughput[cj][wi])
			}
			logSum += math.Log(res.Throughput[ci][wi] / top)
		}
		res.Score[ci] = math.Exp(logSum / float64(len(res.Workloads)))
	}
	return res, nil
}
