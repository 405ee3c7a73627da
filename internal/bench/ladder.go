package bench

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
)

// LadderStep is one rate of a ladder and the policies' results at it.
type LadderStep struct {
	Rate   float64 `json:"request_rate"`
	Report Report  `json:"report"`
}

// LadderReport is the JSON of a ladder run.
type LadderReport struct {
	Mode  string       `json:"mode"`
	Steps []LadderStep `json:"steps"`
}

// ParseRates reads a --ladder list of request rates.
func ParseRates(list string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		r, err := strconv.ParseFloat(f, 64)
		if err != nil || r <= 0 {
			return nil, fmt.Errorf("--ladder: %q is not a request rate > 0 (want e.g. 20,40,60)", f)
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--ladder %q: no rate (want e.g. 20,40,60)", list)
	}
	return out, nil
}

// LadderWorkload is w at one step of the ladder: Poisson arrivals at rate,
// rate x sim.LadderSeconds prompts, as many connections as prompts (the
// seed's ladder, as package sim derives it from BENCHMARK.md).
func LadderWorkload(w Workload, rate float64) Workload {
	w.RequestRate = rate
	w.NumPrompts = int(rate * sim.LadderSeconds)
	w.MaxConcurrency = w.NumPrompts
	return w
}

// RunLadder runs every step of the ladder with run (virtual or live mode).
func RunLadder(w Workload, rates []float64, run func(Workload) (Report, error)) (LadderReport, error) {
	var lr LadderReport
	for _, r := range rates {
		rep, err := run(LadderWorkload(w, r))
		if err != nil {
			return lr, fmt.Errorf("ladder step %g req/s: %w", r, err)
		}
		lr.Mode = rep.Mode
		lr.Steps = append(lr.Steps, LadderStep{Rate: r, Report: rep})
	}
	return lr, nil
}

// WriteLadderTable prints the ladder as BENCHMARK.md's table, one row per
// policy and rate.
func WriteLadderTable(w io.Writer, lr LadderReport) error {
	if _, err := fmt.Fprintln(w, "| policy | requested rate | prompts | achieved req/s | output tok/s | mean TTFT ms | P99 TTFT ms | mean TPOT ms |"); err != nil {
		return err
	}
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, st := range lr.Steps {
		for _, s := range st.Report.Policies {
			if _, err := fmt.Fprintf(w, "| %s | %g req/s | %d | %.2f | %.1f | %.1f | %.1f | %.1f |\n", s.Policy, st.Rate,
				s.Completed, s.RequestThroughput, s.OutputThroughput, s.MeanTTFT, s.P99TTFT, s.MeanTPOT); err != nil {
				return err
			}
		}
	}
	return nil
}
