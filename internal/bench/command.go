package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
)

// Command is `llmd-router bench`: it runs the policies on one workload in
// virtual time or against live simulated replicas, prints the A/B table,
// and writes the JSON report and the plot.
func Command(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	seed := SeedWorkload()
	var (
		mode        = fs.String("mode", "virtual", "virtual (discrete-event simulator) or live (simulated replicas, real router process)")
		policies    = fs.String("policies", "rr,random,approx,llmd,best", "comma-separated policies: rr, random, approx, llmd, best")
		dataset     = fs.String("dataset", seed.Dataset, "prefix_repetition, zipf, none or multi-turn (live: chat conversations)")
		prompts     = fs.String("prompts", seed.Prompts, "live: text (vLLM's: decoded random ids, tokenized by router and replicas) or tokens (token ids)")
		blockSize   = fs.Int("block-size", seed.BlockSize, "the replicas' KV block size (vLLM --block-size), given to the router too")
		numPrompts  = fs.Int("num-prompts", seed.NumPrompts, "prompts per policy")
		concurrency = fs.Int("max-concurrency", seed.MaxConcurrency, "client connections (requests in flight at most)")
		rate        = fs.Float64("request-rate", 0, "Poisson arrivals per second (0: inf, every request ready at once)")
		seedFlag    = fs.Uint64("seed", seed.Seed, "seed of the prompts, arrivals, placements and engines")
		numPrefixes = fs.Int("prefix-repetition-num-prefixes", seed.NumPrefixes, "distinct shared prefixes (prefix_repetition, zipf)")
		prefixLen   = fs.Int("prefix-repetition-prefix-len", seed.PrefixLen, "prefix tokens (none: added to the suffix)")
		suffixLen   = fs.Int("prefix-repetition-suffix-len", seed.SuffixLen, "suffix tokens")
		outputLen   = fs.Int("prefix-repetition-output-len", seed.OutputLen, "output tokens per request (--ignore-eos)")
		zipfS       = fs.Float64("zipf-s", seed.ZipfS, "zipf: popularity exponent")
		replicas    = fs.Int("replicas", seed.Replicas, "simulated replicas")
		jsonPath    = fs.String("json", "", "write the JSON report here (required)")
		plotPath    = fs.String("plot", "", "write the SVG plot here")
		live        = DefaultLiveOptions()
	)
	fs.Float64Var(&live.TimeScale, "time-scale", live.TimeScale, "live: simulated seconds per wall-clock second")
	fs.Float64Var(&live.MaxLag, "max-lag", live.MaxLag, "live: fail when a replica lags its schedule by more than this share of the run")
	fs.StringVar(&live.Router, "router", live.Router, "live: llmd-router binary whose serve command routes (default: this binary)")
	fs.StringVar(&live.Tokenizer.JSON, "tokenizer", "", "live: the model's tokenizer.json, for the router (without it the router routes on load alone)")
	fs.StringVar(&live.Tokenizer.Config, "tokenizer-config", "", "live: the model's tokenizer_config.json, for the router")
	scaled := fs.Bool("demo-scale", false, "the seed workload scaled for `make demo` (see internal/bench doc); virtual mode then models the live router's lag at the demo's time scale")
	routerCost := fs.Duration("router-cost", routerCostPerRequest, "virtual: the router's wall-clock processing time per request, spent in arrival order (default measured on the 2-core test machine, see internal/bench doc)")
	peers := fs.Duration("peer-delay", peerDelay, "virtual: the wall-clock time one router replica's decisions take to reach the others (the peer exchange of policy@N; see internal/bench doc)")
	oracle := fs.Bool("oracle", false, "virtual: route on the fleet's state at each decision (1 ms scrapes, KV events at once, no router time), the ceiling of each policy's scorers (see internal/bench doc)")
	routers := fs.Int("routers", DefaultRouters, "also run each router policy behind this many router replicas, connections spread over them as their Service spreads them, exchanging their decisions (shown as policy@N beside the one-router row; policy@N-alone runs them without the exchange; 1: one router only)")
	engines := fs.String("engines", "", "live: run against these engines instead of simulated replicas (comma-separated base URLs); policies rr, random and router")
	routerURLs := fs.String("router-urls", "", "live, with --engines: the routers the router policy sends to (comma-separated base URLs)")
	fs.StringVar(&live.Model, "model", live.Model, "live: the served model name")
	var mix PriorityMix
	fs.Var(mixFlag{&mix}, "priority-mix", "live: the priority classes the requests name in the x-llmd-priority header, drawn from --seed with these shares, e.g. high=0.2,low=0.8 (the router's class names; default none: the router's default class); the report adds a row per class")
	fs.Var(listFlag{&live.RouterArgs}, "router-arg", "live: one more argument for every `llmd-router serve` the bench starts, repeatable, e.g. --router-arg=--max-in-flight-per-pod=32 (flow control is on only with a cap or a pending bound, --max-pending-per-pod)")
	policy := fs.String("scheduling-policy", "", "live: the simulated replicas' vLLM --scheduling-policy, fcfs (vLLM's default) or priority; pair priority with --router-arg=--engine-priority")
	fs.IntVar(&live.LongPrefillTokenThreshold, "long-prefill-token-threshold", 0, "live: the simulated replicas' vLLM --long-prefill-token-threshold, the most prompt tokens one request computes in a step while others run or wait (0: vLLM's default, no cap)")
	ladder := fs.String("ladder", "", "run a rate ladder instead, e.g. 20,40,60 (the seed's): each rate sends rate x 20 prompts, uncapped (see internal/bench doc)")
	dayOpts := DefaultDayOptions()
	day := fs.Bool("day", false, "virtual: run a day-shaped load (quiet night, morning ramp, a peak above the fixed fleet's capacity) on --replicas fixed pods without and with flow control and on an autoscaled fleet with it, and print GPU-hours and TTFT (see internal/bench doc)")
	fs.Float64Var(&dayOpts.Peak, "day-peak", dayOpts.Peak, "--day: the arrival rate at the day's peak, requests per second")
	fs.Float64Var(&dayOpts.HourSeconds, "day-hour", dayOpts.HourSeconds, "--day: virtual seconds one hour of the day lasts (3600: a real day)")
	fs.IntVar(&dayOpts.Min, "day-min", dayOpts.Min, "--day: the autoscaler's minReplicas")
	fs.IntVar(&dayOpts.Max, "day-max", dayOpts.Max, "--day: the autoscaler's maxReplicas")
	fs.Float64Var(&dayOpts.Target, "day-target", dayOpts.Target, "--day: the autoscaler's target of the router's demand (requests in flight and queued) per pod")
	fs.Float64Var(&dayOpts.WorkTarget, "day-work-target", dayOpts.WorkTarget, "--day: the second autoscaled fleet's target of the router's offered work per pod, tokens per second (prompt tokens uncached on the chosen pod plus tokens generated, over the last minute)")
	fs.Float64Var(&dayOpts.PodStart, "pod-start", dayOpts.PodStart, "--day: seconds from a pod's creation to Ready (default from a published vLLM cold start, see internal/bench doc)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *jsonPath == "" {
		return fmt.Errorf("--json FILE is required")
	}
	switch sim.SchedulingPolicy(*policy) {
	case "", sim.PolicyFCFS, sim.PolicyPriority:
		live.SchedulingPolicy = sim.SchedulingPolicy(*policy)
	default:
		return fmt.Errorf("--scheduling-policy %q: want fcfs or priority", *policy)
	}
	if live.LongPrefillTokenThreshold < 0 {
		return fmt.Errorf("--long-prefill-token-threshold %d: want 0 (no cap) or more", live.LongPrefillTokenThreshold)
	}
	if *day {
		return runDay(fs, *mode, *policies, *replicas, dayOpts, Workload{Dataset: *dataset, NumPrefixes: *numPrefixes,
			PrefixLen: *prefixLen, SuffixLen: *suffixLen, OutputLen: *outputLen, IgnoreEOS: true, Seed: *seedFlag,
			Prompts: PromptsTokens, BlockSize: *blockSize}, *jsonPath, stdout, stderr)
	}
	if *engines != "" {
		// The workload's flags, without --demo-scale's or --replicas' sense
		// (the engines are what they are).
		w := Workload{Dataset: *dataset, NumPrompts: *numPrompts, NumPrefixes: *numPrefixes, PrefixLen: *prefixLen,
			SuffixLen: *suffixLen, OutputLen: *outputLen, ZipfS: *zipfS, IgnoreEOS: true, MaxConcurrency: *concurrency,
			RequestRate: *rate, Seed: *seedFlag, Prompts: *prompts, BlockSize: *blockSize, PriorityMix: mix}
		if given := givenFlags(fs, "router-arg", "scheduling-policy", "long-prefill-token-threshold"); given != "" {
			return fmt.Errorf("%s: with --engines the bench starts no router or replicas (configure them where they run)", given)
		}
		return runEndpoints(ctx, w, endpointPolicies(fs, *policies), Endpoints{Engines: splitList(*engines), Routers: splitList(*routerURLs)},
			*mode, live, *jsonPath, stdout, stderr)
	}
	pols, err := ParsePolicies(*policies)
	if err != nil {
		return err
	}
	if *routers < 1 || *routers > maxRouters {
		return fmt.Errorf("--routers %d: want 1 (one router) to %d", *routers, maxRouters)
	}
	pols = WithRouters(pols, *routers)
	w := Workload{Dataset: *dataset, NumPrompts: *numPrompts, NumPrefixes: *numPrefixes, PrefixLen: *prefixLen,
		SuffixLen: *suffixLen, OutputLen: *outputLen, ZipfS: *zipfS, IgnoreEOS: true, MaxConcurrency: *concurrency,
		RequestRate: *rate, Seed: *seedFlag, Replicas: *replicas, Prompts: *prompts, BlockSize: *blockSize, PriorityMix: mix}
	if *scaled {
		w, live.TimeScale = DemoWorkload(w), DemoTimeScale
	}
	if err := w.check(); err != nil {
		return err
	}
	var run func(Workload) (Report, error)
	switch *mode {
	case "virtual":
		// Virtual time stretches the router's wall-clock lag as the live
		// replicas' time scale does.
		if given := givenFlags(fs, "priority-mix", "router-arg", "scheduling-policy", "long-prefill-token-threshold"); given != "" {
			return fmt.Errorf("%s: live mode only (virtual mode has no router process, admission or priorities)", given)
		}
		if *routerCost < 0 || *peers < 0 {
			return fmt.Errorf("--router-cost %s, --peer-delay %s: must be >= 0", *routerCost, *peers)
		}
		lag := liveLag(live.TimeScale, *routerCost, *peers)
		if *oracle {
			lag = OracleLag(live.TimeScale)
		}
		run = func(w Workload) (Report, error) {
			fmt.Fprintf(stderr, "bench: virtual time, %d policies in parallel ...\n", len(pols))
			return RunVirtual(w, pols, lag)
		}
	case "live":
		if *oracle {
			return fmt.Errorf("--oracle: virtual mode only (a live router has the lag it has)")
		}
		run = func(w Workload) (Report, error) { return RunLive(ctx, w, pols, live, stderr) }
	default:
		return fmt.Errorf("--mode %q: want virtual or live", *mode)
	}
	start := time.Now()
	if *ladder != "" {
		rates, err := ParseRates(*ladder)
		if err != nil {
			return err
		}
		lr, err := RunLadder(w, rates, run)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "bench: %s ladder took %s of wall time\n", *mode, time.Since(start).Round(time.Millisecond))
		if err := WriteLadderTable(stdout, lr); err != nil {
			return err
		}
		return writeJSON(*jsonPath, lr)
	}
	rep, err := run(w)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "bench: %s mode took %s of wall time\n", *mode, time.Since(start).Round(time.Millisecond))
	rep.LeadWithDeployed()
	if err := WriteTable(stdout, rep); err != nil {
		return err
	}
	if err := WriteCeiling(stdout, rep); err != nil {
		return err
	}
	if err := WriteClassTable(stdout, rep); err != nil {
		return err
	}
	if err := writeJSON(*jsonPath, rep); err != nil {
		return err
	}
	if *plotPath != "" {
		return writeFile(*plotPath, func(f io.Writer) error { return WritePlot(f, rep) })
	}
	return nil
}

// runDay is the command with --day: the day-shaped run in virtual time.
func runDay(fs *flag.FlagSet, mode, policies string, replicas int, o DayOptions, w Workload, jsonPath string,
	stdout, stderr io.Writer) error {
	if mode != "virtual" {
		return fmt.Errorf("--day: virtual mode only (--mode virtual)")
	}
	if given := givenFlags(fs, "num-prompts", "request-rate", "max-concurrency", "ladder", "engines", "router-urls", "routers",
		"oracle", "demo-scale", "priority-mix", "router-arg", "scheduling-policy", "long-prefill-token-threshold", "plot", "zipf-s"); given != "" {
		return fmt.Errorf("%s: not with --day (the day's arrivals come from --day-peak and its shape; one router decides)", given)
	}
	if w.Dataset != DatasetPrefixRepetition {
		return fmt.Errorf("--dataset %s: --day runs %s (the seed's shape)", w.Dataset, DatasetPrefixRepetition)
	}
	policy := PolicyBest
	if givenFlags(fs, "policies") != "" {
		policy = strings.TrimSpace(policies)
	}
	o.Fixed = replicas
	start := time.Now()
	fmt.Fprintf(stderr, "bench: a virtual day on %d fixed pods and on %d-%d autoscaled pods ...\n", o.Fixed, o.Min, o.Max)
	rep, err := RunDay(w, o, policy, LiveLag(1))
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "bench: the day took %s of wall time\n", time.Since(start).Round(time.Millisecond))
	if err := WriteDayTable(stdout, rep); err != nil {
		return err
	}
	return writeJSON(jsonPath, rep)
}

// runEndpoints is the command against given endpoints: the table, the
// ceiling and probe lines, and the JSON report.
func runEndpoints(ctx context.Context, w Workload, policies []string, ep Endpoints, mode string, live LiveOptions,
	jsonPath string, stdout, stderr io.Writer) error {
	if mode != "live" {
		return fmt.Errorf("--engines: live mode only (--mode live)")
	}
	// A key for routers or engines that require one comes from the
	// environment, as the router's own does: flags show in ps.
	live.APIKey = os.Getenv("LLMD_API_KEY")
	start := time.Now()
	rep, err := RunEndpoints(ctx, w, policies, ep, live, stderr)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "bench: against %d engines took %s of wall time\n", len(ep.Engines), time.Since(start).Round(time.Millisecond))
	if err := WriteTable(stdout, rep); err != nil {
		return err
	}
	if err := WriteCeiling(stdout, rep); err != nil {
		return err
	}
	if err := WriteClassTable(stdout, rep); err != nil {
		return err
	}
	return writeJSON(jsonPath, rep)
}

// endpointPolicies is --policies against given endpoints: rr and router
// unless the flag was given.
func endpointPolicies(fs *flag.FlagSet, list string) []string {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "policies" })
	if !given {
		return []string{PolicyRR, PolicyRouter}
	}
	return splitList(list)
}

// splitList splits a comma-separated flag, dropping empty entries.
func splitList(list string) []string {
	var out []string
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// writeJSON writes v to path as indented JSON.
func writeJSON(path string, v any) error {
	return writeFile(path, func(f io.Writer) error {
		enc := json.NewEncoder(f)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	})
}

// writeFile creates path (and its directory) and fills it with write.
func writeFile(path string, write func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("creating the directory of %s: %w", path, err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// givenFlags names, as "--a, --b", those of names that were set on the
// command line, so an error names only what the user wrote.
func givenFlags(fs *flag.FlagSet, names ...string) string {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var given []string
	for _, n := range names {
		if set[n] {
			given = append(given, "--"+n)
		}
	}
	return strings.Join(given, ", ")
}
