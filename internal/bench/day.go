package bench

import (
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
	"github.com/llmd-dev/terraform-provider-llmd/router/proxy"
)

// PodStart is a vLLM pod's time from creation to Ready serving
// Qwen2.5-7B-Instruct with its weights on FSx, in seconds: 233 s, rounded
// up to 240. Tensorfuse, "Reducing GPU Cold Start Time when using vLLM"
// (2025-09-01, tensorfuse.io/docs/blogs/reducing_gpu_cold_start), timed
// vLLM's cold start of Llama-3.1-8B-Instruct (16 GB of bf16 weights, as
// Qwen2.5-7B's 15.2 GB) on an L40S: model download 61 s, weight loading
// 33 s, Dynamo bytecode transformation 10 s, graph compilation 42 s, CUDA
// graph capture 54 s, engine init and imports 94 s. The weights sit on FSx
// (no download); no torch.compile cache is persisted across pods, so every
// other step is paid: 33+10+42+54+94 = 233 s. Not counted: pulling the
// image onto a node that never ran it and provisioning a GPU node (the
// GPU-capacity issue's part): the nodes are there.
const PodStart = 240.0

// dayPending is llmd_prefix_router's limits.max_pending_per_pod default:
// a pod takes no more of a router's requests while 2 of them have yet to
// answer a byte.
const dayPending = 2

// dayKVReserve is llmd_prefix_router's limits.kv_output_reserve default:
// the KV bound is on, counting each request's output up to 1,024 tokens
// (the day's requests generate 256).
const dayKVReserve = 1024

// DayOptions shapes the day-shaped run (`bench --day`).
type DayOptions struct {
	// Peak is the rate at the day's peak, requests per second; HourSeconds
	// the virtual seconds one hour of the day lasts.
	Peak, HourSeconds float64
	// Fixed is the fixed fleet's size.
	Fixed int
	// Min, Max and Target are the autoscaler's: minReplicas, maxReplicas
	// and the router's demand per pod (in flight plus queued) it aims for.
	Min, Max int
	Target   float64
	// WorkTarget is the second autoscaled fleet's target of the router's
	// offered work per pod (sim.HPAConfig.WorkTarget), tokens per second;
	// that fleet scales on the work alone.
	WorkTarget float64
	// PodStart is a pod's creation-to-Ready time in seconds.
	PodStart float64
}

// DefaultDayOptions is the run BENCHMARKS.md reports. The seed's 8 pods,
// warm, behind the router with flow control, held a day peaking at 44 req/s
// (P99 TTFT 0.36 s at the peak, 103 requests in flight per pod) and fell
// over at 47 (half the peak shed; BENCHMARKS.md): the peak, 50 req/s, is
// above their capacity. The target, 75 in flight per pod, is about 3/4 of
// those 103, the rest headroom for the load that grows while a pod starts.
// Each hour of the day lasts 10 virtual minutes: a pod's start, the HPA's
// 15 s period and 300 s scale-down window and the TTL keep their real
// lengths, so the ramps are 6x steeper against them than a real day's, and
// the fixed costs of scaling (a start paid before a pod serves, the window
// kept after the load fell) weigh 6x more against an hour: both work
// against the autoscaled fleet, so a saving measured so holds over a real
// day (--day-hour 3600 runs one). The work's target, 1,800 tokens a second
// per pod, is about 5/6 of what a pod serves warm: the 8 pods that held 44
// req/s and fell over at 47 served ~384 tokens each (the 128-token suffix
// uncached, 256 generated), 2,100 to 2,250 a pod. A saturated fleet reports
// what it serves, so the target must sit below that by more than the HPA's
// 10% tolerance for the HPA to scale it out (BENCHMARKS.md, 2026-12-07:
// 2,000 cost less but held the peak only by arriving there with pods to
// spare; 2,100 and 2,200 did not).
func DefaultDayOptions() DayOptions {
	return DayOptions{Peak: 50, HourSeconds: 600, Fixed: 8, Min: 2, Max: 16, Target: 75, WorkTarget: 1800, PodStart: PodStart}
}

func (o DayOptions) check() error {
	var errs []error
	need := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	need(o.Peak > 0, "--day-peak %g: must be > 0", o.Peak)
	need(o.HourSeconds > 0, "--day-hour %g: must be > 0", o.HourSeconds)
	need(o.Fixed >= 1, "--replicas %d: the fixed fleet needs a pod", o.Fixed)
	need(o.Min >= 1 && o.Max >= o.Min, "--day-min %d, --day-max %d: want 1 <= min <= max", o.Min, o.Max)
	need(o.Target > 0, "--day-target %g: must be > 0", o.Target)
	need(o.WorkTarget > 0, "--day-work-target %g: must be > 0", o.WorkTarget)
	need(o.PodStart >= 0, "--pod-start %g: must be >= 0", o.PodStart)
	return errors.Join(errs...)
}

// DayRow is one fleet's day.
type DayRow struct {
	Name   string        `json:"name"`
	Result sim.DayResult `json:"result"`
}

// DayReport is the day-shaped run's report.
type DayReport struct {
	Mode     string         `json:"mode"`
	Workload Workload       `json:"workload"`
	Options  DayOptions     `json:"options"`
	Policy   string         `json:"policy"`
	Profile  sim.DayProfile `json:"profile"`
	Rows     []DayRow       `json:"rows"`
}

// dayFleet is one fleet the day runs on.
type dayFleet struct {
	name  string
	fixed int
	adm   sim.Admission
	// demand and work are the autoscaler's targets (sim.HPAConfig), 0 none.
	demand, work float64
}

// RunDay runs the day's load on the fixed fleet without and with flow
// control and on the autoscaled fleet with it (scaled on the router's
// demand, and on its offered work), in parallel, behind one
// router deciding with policy under lag.
func RunDay(w Workload, o DayOptions, policy string, lag RouterLag) (DayReport, error) {
	if err := o.check(); err != nil {
		return DayReport{}, err
	}
	if !routed(policy) || Routers(policy) != 1 {
		return DayReport{}, fmt.Errorf("--policies %s: the day runs one router policy behind one router", policy)
	}
	ec := w.engineConfig()
	flow := sim.Admission{Cap: ec.MaxNumSeqs, Pending: dayPending, MaxQueue: proxy.DefaultMaxQueue,
		TTL: proxy.DefaultQueueTimeout.Seconds(), KVReserve: dayKVReserve}
	fleets := []dayFleet{
		{name: fmt.Sprintf("fixed %d, no flow control", o.Fixed), fixed: o.Fixed},
		{name: fmt.Sprintf("fixed %d, flow control", o.Fixed), fixed: o.Fixed, adm: flow},
		{name: fmt.Sprintf("autoscaled %d-%d on demand, flow control", o.Min, o.Max), adm: flow, demand: o.Target},
		{name: fmt.Sprintf("autoscaled %d-%d on offered work, flow control", o.Min, o.Max), adm: flow, work: o.WorkTarget},
	}
	prof := sim.DayProfile{Hourly: sim.BusinessDay(), Peak: o.Peak, HourSeconds: o.HourSeconds}
	rep := DayReport{Mode: "virtual-day", Workload: w.Normalize(), Options: o, Policy: policy, Profile: prof,
		Rows: make([]DayRow, len(fleets))}
	errs := make([]error, len(fleets))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, f := range fleets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			scorers, _, _ := RouterScorers(policy)
			p, err := virtualPicker(policy, scorers, w.Seed)
			if err != nil {
				errs[i] = err
				return
			}
			res, err := sim.RunDay(sim.DayConfig{Engine: ec, Profile: prof, Picker: p, Fixed: f.fixed,
				Autoscale: sim.HPAConfig{Min: o.Min, Max: o.Max, Target: f.demand, WorkTarget: f.work}, PodStart: o.PodStart, Admission: f.adm,
				EventDelay: lag.EventDelay, ScrapeInterval: lag.Scrape, SpeculationTTL: lag.SpeculationTTL,
				Form: kvevents.FormMap, Seed: w.Seed, Workload: func(n int) sim.Dataset { return dayDataset(w, n) }})
			if err != nil {
				if sp, ok := p.(interface{ pickErr() error }); ok && sp.pickErr() != nil {
					err = fmt.Errorf("%w (picker: %w)", err, sp.pickErr())
				}
				errs[i] = fmt.Errorf("%s: %w", f.name, err)
			}
			rep.Rows[i] = DayRow{Name: f.name, Result: res}
		}()
	}
	wg.Wait()
	return rep, errors.Join(errs...)
}

// dayDataset is the workload's shape with n prompts or a few more: every
// prefix the same number of times, in shuffled order.
func dayDataset(w Workload, n int) sim.Dataset {
	per := (n + w.NumPrefixes - 1) / w.NumPrefixes
	return sim.PrefixRepetition{NumPrefixes: w.NumPrefixes, PrefixLen: w.PrefixLen, SuffixLen: w.SuffixLen,
		OutputLen: w.OutputLen, NumPrompts: per * w.NumPrefixes, Seed: w.Seed}
}

// WriteDayTable prints the day's table: cost (GPU-hours: pods x hours, the
// run's and scaled to a 24 h day) and service, one row per fleet, then the
// fleets hour by hour.
func WriteDayTable(out io.Writer, rep DayReport) error {
	day := rep.Profile.Duration()
	fmt.Fprintf(out, "day: %s, peak %.1f req/s (mean %.1f), each hour %.0f s of virtual time, pod start %.0f s, autoscaler targets per pod: demand %.0f requests, offered work %.0f tokens/s\n",
		rep.Workload.Dataset, rep.Options.Peak, rep.Profile.Expected()/day, rep.Options.HourSeconds, rep.Options.PodStart, rep.Options.Target, rep.Options.WorkTarget)
	fmt.Fprintln(out, "| fleet | mean pods | peak pods | GPU-hours (run) | GPU-hours per 24 h | vs fixed | served | shed 503 | P99 TTFT s | mean TTFT s | P99 TTFT at peak s | mean TTFT at peak s | shed at peak | mean TPOT ms | prefix hit rate | preemptions |")
	fmt.Fprintln(out, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	base := rep.Rows[0].Result.PodSeconds
	for _, r := range rep.Rows {
		s := r.Result
		if _, err := fmt.Fprintf(out, "| %s | %.2f | %d | %.1f | %.1f | %+.1f%% | %d | %d | %.2f | %.2f | %.2f | %.2f | %d of %d | %.1f | %.1f%% | %d |\n",
			r.Name, s.MeanPods, s.PeakPods, s.PodSeconds/3600, s.MeanPods*24, 100*(s.PodSeconds/base-1), s.Served, s.Shed,
			s.P99TTFT, s.MeanTTFT, s.PeakP99TTFT, s.PeakMeanTTFT, s.PeakShed, s.PeakRequests, 1000*s.MeanTPOT, 100*s.HitRate, s.Preemptions); err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "\nhour by hour (means over the hour's samples): rate, then each fleet's pods costing a GPU and requests waiting in the router")
	head := "| hour | req/s |"
	rule := "|---|---|"
	for _, r := range rep.Rows {
		head += " " + r.Name + ": pods | queued |"
		rule += "---|---|"
	}
	fmt.Fprintln(out, head)
	fmt.Fprintln(out, rule)
	for h := range rep.Profile.Hourly {
		from, to := float64(h)*rep.Profile.HourSeconds, float64(h+1)*rep.Profile.HourSeconds
		line := fmt.Sprintf("| %02d | %.1f |", h, rep.Options.Peak*(rep.Profile.Hourly[h]+rep.Profile.Hourly[(h+1)%len(rep.Profile.Hourly)])/2)
		for _, r := range rep.Rows {
			var pods, queued, n float64
			for _, s := range r.Result.Timeline {
				if s.T >= from && s.T < to {
					pods += float64(s.Pods)
					queued += float64(s.Queued)
					n++
				}
			}
			if n > 0 {
				pods, queued = pods/n, queued/n
			}
			line += fmt.Sprintf(" %.1f | %.0f |", pods, queued)
		}
		if _, err := fmt.Fprintln(out, line); err != nil {
			return err
		}
	}
	return nil
}
