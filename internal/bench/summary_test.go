package bench

import (
	"math"
	"testing"
)

// TestSummarizeMatchesHandComputedFigures checks every summary figure
// against values worked out by hand for three requests.
func TestSummarizeMatchesHandComputedFigures(t *testing.T) {
	recs := []Record{
		// sent 0, first token 1, then 3 tokens at 1.5, 2, 3: ITLs 0.5, 0.5, 1.
		{Sent: 0, FirstToken: 1, Done: 3, PromptTokens: 100, OutputTokens: 4, Streamed: true, Tokens: []float64{1.5, 2, 3}},
		{Sent: 1, FirstToken: 3, Done: 4, PromptTokens: 200, OutputTokens: 2, Streamed: true, Tokens: []float64{4}},
		{Sent: 2, FirstToken: 2.5, Done: 2.5, PromptTokens: 300, OutputTokens: 1, Streamed: true},
	}
	s := Summarize("x", recs, 2, Fleet{HitRate: 0.25, PeakWaiting: 9, MeanKVUsage: 0.5, PodRequests: []int{2, 1}})
	want := map[string][2]float64{
		"completed":              {float64(s.Completed), 3},
		"failed":                 {float64(s.Failed), 2},
		"duration":               {s.Duration, 4},
		"input tokens":           {float64(s.InputTokens), 600},
		"output tokens":          {float64(s.OutputTokens), 7},
		"request throughput":     {s.RequestThroughput, 0.75},
		"output throughput":      {s.OutputThroughput, 7.0 / 4},
		"total token throughput": {s.TotalTokenThroughput, 607.0 / 4},
		// Tokens per whole second: [1,2): 1, 1.5; [2,3): 2, 2.5; [3,4): 3, 3; [4,5): 4.
		"peak output throughput": {s.PeakOutputThroughput, 2},
		// TTFTs 1000, 2000, 500 ms.
		"mean ttft":   {s.MeanTTFT, 3500.0 / 3},
		"median ttft": {s.MedianTTFT, 1000},
		"p99 ttft":    {s.P99TTFT, 1000 + 0.98*1000},
		// TPOT over requests with > 1 token: 2000/3 and 1000/1 ms.
		"mean tpot": {s.MeanTPOT, (2000.0/3 + 1000) / 2},
		// ITLs 500, 500, 1000, 1000 ms.
		"mean itl":   {s.MeanITL, 750},
		"median itl": {s.MedianITL, 750},
		// E2ELs 3000, 3000, 500 ms.
		"mean e2el":   {s.MeanE2EL, 6500.0 / 3},
		"median e2el": {s.MedianE2EL, 3000},
		"hit rate":    {s.PrefixHitRate, 0.25},
	}
	for name, v := range want {
		if math.Abs(v[0]-v[1]) > 1e-9*math.Max(1, math.Abs(v[1])) {
			t.Errorf("%s = %v, want %v", name, v[0], v[1])
		}
	}
	if s.PeakWaiting != 9 || s.MeanKVUsage != 0.5 || len(s.TTFTs) != 3 || s.TTFTs[0] != 500 {
		t.Errorf("fleet figures or sorted TTFTs wrong: %+v", s)
	}
	if empty := Summarize("none", nil, 5, Fleet{}); empty.Failed != 5 || empty.Duration != 0 || empty.MeanTTFT != 0 {
		t.Errorf("a run without successes: %+v", empty)
	}
}
