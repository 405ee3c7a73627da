package scoring

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/llmd-dev/terraform-provider-llmd/router/config"
)

// builders maps each scorer type to its parameter names and a constructor
// taking the parameters in that order; absent ones are NaN (see or).
var builders = map[string]struct {
	params []string
	build  func(p []float64) Scorer
}{
	PrefixType:     {[]string{"offload_weight"}, func(p []float64) Scorer { return NewPrefix(or(p[0], 0.5)) }},
	QueueType:      {nil, func([]float64) Scorer { return NewQueue() }},
	InFlightType:   {nil, func([]float64) Scorer { return NewInFlight() }},
	KVUsageType:    {nil, func([]float64) Scorer { return NewKVUsage() }},
	SpreadType:     {nil, func([]float64) Scorer { return NewSpread() }},
	RendezvousType: {nil, func([]float64) Scorer { return NewRendezvous() }},
	LoadBoundType: {[]string{"factor", "min_in_flight"}, func(p []float64) Scorer {
		return NewLoadBound(or(p[0], 0), int(or(p[1], 0)))
	}},
	CostType: {[]string{"budget_tokens", "step_seconds", "waiting_tokens"}, func(p []float64) Scorer {
		return NewCost(or(p[0], 0), or(p[1], 0), or(p[2], 0))
	}},
	HistoryType: {[]string{"block_chars", "max_blocks", "capacity_per_pod"}, func(p []float64) Scorer {
		return NewHistory(int(or(p[0], 0)), int(or(p[1], 0)), int(or(p[2], 0)))
	}},
}

// or is v, or def when the parameter was absent (NaN). Constructors turn
// their own zero values into defaults, so a parameter that has no meaningful
// zero needs no default here.
func or(v, def float64) float64 {
	if math.IsNaN(v) {
		return def
	}
	return v
}

// Types lists the scorer types the configuration accepts.
func Types() []string {
	out := make([]string, 0, len(builders))
	for t := range builders {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// Weighted is a scorer and its weight.
type Weighted struct {
	Scorer Scorer
	Weight float64
}

// FromConfig builds the configured scorers. Errors name the key, as
// config.Validate's do; a nil error means the list is usable.
func FromConfig(cfg config.Scoring) ([]Weighted, error) {
	var errs []error
	out := make([]Weighted, 0, len(cfg.Scorers))
	for i, sc := range cfg.Scorers {
		key := fmt.Sprintf("scoring.scorers[%d]", i)
		b, ok := builders[sc.Type]
		if !ok {
			errs = append(errs, fmt.Errorf("%s.type: unknown scorer %q (want one of %s)", key, sc.Type, strings.Join(Types(), ", ")))
			continue
		}
		p := make([]float64, len(b.params))
		for j := range p {
			p[j] = math.NaN()
		}
		for _, name := range slices.Sorted(maps.Keys(sc.Params)) {
			v, j := sc.Params[name], slices.Index(b.params, name)
			switch {
			case j < 0:
				errs = append(errs, fmt.Errorf("%s.params.%s: %s takes no such parameter (it takes %v)", key, name, sc.Type, b.params))
			case v < 0:
				errs = append(errs, fmt.Errorf("%s.params.%s: must be >= 0, got %g", key, name, v))
			default:
				p[j] = v
			}
		}
		out = append(out, Weighted{Scorer: b.build(p), Weight: sc.Weight})
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}
