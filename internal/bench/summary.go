package bench

import (
	"math"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
)

// Record is one finished request, times in seconds from the run's start.
type Record struct {
	Sent, FirstToken, Done     float64
	PromptTokens, OutputTokens int
	// Streamed says single tokens were timed (live mode, from the stream's
	// chunks); virtual mode does not observe them. Tokens then holds the
	// arrival time of every output token after the first.
	Streamed bool
	Tokens   []float64
	// Class is the priority class the request named ("" for none).
	Class string
}

// Fleet is what the replicas' own counters say about a run (vLLM's
// /metrics in live mode, the engines' counters in virtual mode).
type Fleet struct {
	// HitRate is prompt tokens found in the prefix caches over prompt tokens
	// looked up, during the run (counter deltas).
	HitRate float64
	// PeakWaiting is the largest sampled fleet total of waiting requests.
	PeakWaiting int
	// MeanKVUsage is the pods' average KV-cache use over the loaded part of the run.
	MeanKVUsage float64
	Preemptions float64
	PodRequests []int
	// RouterRequests counts the requests each router replica decided
	// (policies behind several routers).
	RouterRequests []int
	// Series is every pod's load over the run (live mode; nil in virtual).
	Series *Series
}

// Summary is one policy's result, in `vllm bench serve`'s terms plus the
// fleet's prefix-cache hit rate and load. Times are milliseconds.
type Summary struct {
	Policy    string `json:"policy"`
	Completed int    `json:"completed"`
	Failed    int    `json:"failed"`
	// Shed counts the requests refused with 429 or 503 (live mode: the
	// router's admission), which are not failed.
	Shed                 int     `json:"shed,omitempty"`
	Duration             float64 `json:"duration_s"`
	InputTokens          int     `json:"total_input_tokens"`
	OutputTokens         int     `json:"total_output_tokens"`
	RequestThroughput    float64 `json:"request_throughput"`
	OutputThroughput     float64 `json:"output_throughput"`
	TotalTokenThroughput float64 `json:"total_token_throughput"`
	// PeakOutputThroughput is the most output tokens in one second (live
	// mode only: virtual mode does not time single tokens).
	PeakOutputThroughput float64 `json:"peak_output_throughput,omitempty"`
	MeanTTFT             float64 `json:"mean_ttft_ms"`
	MedianTTFT           float64 `json:"median_ttft_ms"`
	P99TTFT              float64 `json:"p99_ttft_ms"`
	MeanTPOT             float64 `json:"mean_tpot_ms"`
	MedianTPOT           float64 `json:"median_tpot_ms"`
	P99TPOT              float64 `json:"p99_tpot_ms"`
	// ITL is per streamed token (live mode only).
	MeanITL    float64 `json:"mean_itl_ms,omitempty"`
	MedianITL  float64 `json:"median_itl_ms,omitempty"`
	P99ITL     float64 `json:"p99_itl_ms,omitempty"`
	MeanE2EL   float64 `json:"mean_e2el_ms"`
	MedianE2EL float64 `json:"median_e2el_ms"`
	P99E2EL    float64 `json:"p99_e2el_ms"`
	// PrefixHitRate is prompt tokens served from the prefix caches over
	// prompt tokens looked up, from the replicas' counters.
	PrefixHitRate float64 `json:"prefix_hit_rate"`
	// HitCeiling, against given endpoints, is the most PrefixHitRate the
	// policy's prompts allow on the engines' caches (hitCeiling).
	HitCeiling  float64 `json:"hit_ceiling,omitempty"`
	PeakWaiting int     `json:"peak_waiting"`
	MeanKVUsage float64 `json:"mean_kv_usage"`
	Preemptions float64 `json:"preemptions"`
	PodRequests []int   `json:"pod_requests,omitempty"`
	// RouterRequests counts the requests each router replica decided, when
	// the policy ran behind more than one.
	RouterRequests []int `json:"router_requests,omitempty"`
	// Herd says whether one pod drew far more than its share while another
	// had room (DetectHerding).
	Herd Herd `json:"herd"`
	// PodsOverTime is every pod's requests, queue and KV use over the run.
	PodsOverTime *Series `json:"pods_over_time,omitempty"`
	// Router holds the router process's own counters after a live run
	// (decisions, KV-event messages and gaps, index keys...).
	Router map[string]float64 `json:"router,omitempty"`
	// Classes is each priority class's part of the run, when the workload
	// had a priority mix.
	Classes []ClassSummary `json:"classes,omitempty"`
	// TTFTs are every request's TTFT in ms, sorted, for the plot.
	TTFTs []float64 `json:"-"`
}

// Summarize computes the summary of a run. Requests that failed are
// counted, not timed, as vLLM's summary does.
func Summarize(policy string, recs []Record, failed int, fl Fleet) Summary {
	s := Summary{Policy: policy, Completed: len(recs), Failed: failed, PrefixHitRate: fl.HitRate,
		PeakWaiting: fl.PeakWaiting, MeanKVUsage: fl.MeanKVUsage, Preemptions: fl.Preemptions, PodRequests: fl.PodRequests,
		RouterRequests: fl.RouterRequests, Herd: DetectHerding(fl.PodRequests, fl.Series), PodsOverTime: fl.Series}
	if len(recs) == 0 {
		return s
	}
	start, end := math.Inf(1), 0.0
	var ttft, tpot, e2el, itl []float64
	perSecond := map[int]int{}
	for _, r := range recs {
		start, end = min(start, r.Sent), max(end, r.Done)
		s.InputTokens += r.PromptTokens
		s.OutputTokens += r.OutputTokens
		ttft = append(ttft, 1e3*(r.FirstToken-r.Sent))
		e2el = append(e2el, 1e3*(r.Done-r.Sent))
		if r.OutputTokens > 1 {
			tpot = append(tpot, 1e3*(r.Done-r.FirstToken)/float64(r.OutputTokens-1))
		}
		if !r.Streamed {
			continue
		}
		perSecond[int(r.FirstToken)]++
		prev := r.FirstToken
		for _, t := range r.Tokens {
			itl = append(itl, 1e3*(t-prev))
			prev = t
			perSecond[int(t)]++
		}
	}
	s.Duration = end - start
	if s.Duration > 0 {
		s.RequestThroughput = float64(len(recs)) / s.Duration
		s.OutputThroughput = float64(s.OutputTokens) / s.Duration
		s.TotalTokenThroughput = float64(s.InputTokens+s.OutputTokens) / s.Duration
	}
	for _, n := range perSecond {
		s.PeakOutputThroughput = max(s.PeakOutputThroughput, float64(n))
	}
	s.MeanTTFT, s.MedianTTFT, s.P99TTFT = sim.MeanMedianP99(ttft)
	s.TTFTs = ttft // sorted by stats
	s.MeanTPOT, s.MedianTPOT, s.P99TPOT = sim.MeanMedianP99(tpot)
	s.MeanITL, s.MedianITL, s.P99ITL = sim.MeanMedianP99(itl)
	s.MeanE2EL, s.MedianE2EL, s.P99E2EL = sim.MeanMedianP99(e2el)
	return s
}
