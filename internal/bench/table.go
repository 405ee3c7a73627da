package bench

import (
	"fmt"
	"io"
)

// WriteTable prints the A/B table in Markdown: one row per policy, with
// output throughput also relative to the rr baseline when it ran.
func WriteTable(w io.Writer, rep Report) error {
	base := rep.Policy(PolicyRR)
	if _, err := fmt.Fprintln(w, "| policy | duration s | output tok/s | vs rr | req/s | mean TTFT ms | median TTFT ms | P99 TTFT ms | mean TPOT ms | prefix hit rate | peak waiting | mean KV use | max pod / mean |"); err != nil {
		return err
	}
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, s := range rep.Policies {
		rel := "-"
		if base != nil && base.OutputThroughput > 0 {
			rel = fmt.Sprintf("%.2fx", s.OutputThroughput/base.OutputThroughput)
		}
		herd := fmt.Sprintf("%.2f", s.Herd.Ratio)
		if s.Herd.Herded {
			herd += " HERD"
		}
		if _, err := fmt.Fprintf(w, "| %s | %.1f | %.0f | %s | %.2f | %.0f | %.0f | %.0f | %.1f | %.1f%% | %d | %.1f%% | %s |\n",
			s.Policy, s.Duration, s.OutputThroughput, rel, s.RequestThroughput, s.MeanTTFT, s.MedianTTFT, s.P99TTFT,
			s.MeanTPOT, 100*s.PrefixHitRate, s.PeakWaiting, 100*s.MeanKVUsage, herd); err != nil {
			return err
		}
	}
	if rep.Policy(Deployed) != nil {
		_, err := fmt.Fprintf(w, "%s is what llmd_prefix_router deploys by default: the default scorers (%s) behind %d replicas that exchange their decisions.\n",
			Deployed, PolicyBest, DefaultRouters)
		return err
	}
	return nil
}

// WriteCeiling prints, when the report has one, the ceiling of routing and
// the share of it each routed policy reached; against given endpoints, the
// hit-rate ceiling and what the prefill probe predicts.
func WriteCeiling(w io.Writer, rep Report) error {
	if rep.Caches != nil {
		return writeEndpointCeiling(w, rep)
	}
	c := rep.Ceiling
	if c == nil || c.OutputThroughput <= 0 {
		return nil
	}
	line := fmt.Sprintf("ceiling of routing (virtual time, no router lag, best of the router's policies): %.0f output tok/s (%s); reached:",
		c.OutputThroughput, c.Policy)
	for _, s := range rep.Policies {
		if routed(s.Policy) {
			line += fmt.Sprintf(" %s %.2f", s.Policy, s.OutputThroughput/c.OutputThroughput)
		}
	}
	_, err := fmt.Fprintln(w, line)
	return err
}

// WriteSummary prints one policy's summary in the shape of `vllm bench
// serve`'s, plus the fleet counters it cannot see.
func WriteSummary(w io.Writer, s Summary) error {
	line := func(label, format string, v any) { fmt.Fprintf(w, "%-40s"+format+"\n", label+":", v) }
	fmt.Fprintf(w, "============ Serving Benchmark Result (%s) ============\n", s.Policy)
	line("Successful requests", "%d", s.Completed)
	line("Failed requests", "%d", s.Failed)
	line("Benchmark duration (s)", "%.2f", s.Duration)
	line("Total input tokens", "%d", s.InputTokens)
	line("Total generated tokens", "%d", s.OutputTokens)
	line("Request throughput (req/s)", "%.2f", s.RequestThroughput)
	line("Output token throughput (tok/s)", "%.2f", s.OutputThroughput)
	if s.PeakOutputThroughput > 0 {
		line("Peak output token throughput (tok/s)", "%.2f", s.PeakOutputThroughput)
	}
	line("Total token throughput (tok/s)", "%.2f", s.TotalTokenThroughput)
	for _, m := range []struct {
		name             string
		mean, median, p9 float64
	}{{"TTFT", s.MeanTTFT, s.MedianTTFT, s.P99TTFT}, {"TPOT", s.MeanTPOT, s.MedianTPOT, s.P99TPOT},
		{"ITL", s.MeanITL, s.MedianITL, s.P99ITL}, {"E2EL", s.MeanE2EL, s.MedianE2EL, s.P99E2EL}} {
		if m.name == "ITL" && m.mean == 0 {
			continue // virtual mode does not time single tokens
		}
		line("Mean "+m.name+" (ms)", "%.2f", m.mean)
		line("Median "+m.name+" (ms)", "%.2f", m.median)
		line("P99 "+m.name+" (ms)", "%.2f", m.p9)
	}
	line("Prefix cache hit rate (prompt tokens)", "%.2f%%", 100*s.PrefixHitRate)
	line("Peak waiting requests (fleet)", "%d", s.PeakWaiting)
	line("Mean KV-cache use", "%.2f%%", 100*s.MeanKVUsage)
	_, err := fmt.Fprintln(w, "==================================================")
	return err
}

// writeEndpointCeiling prints each policy's hit rate against its ceiling on
// the engines' caches, and the mean TTFT the probe predicts from the hit
// rates beside the measured one.
func writeEndpointCeiling(w io.Writer, rep Report) error {
	line := fmt.Sprintf("prefix hit rate against its ceiling (each distinct prefix computed once, in the engines' %d blocks of %d tokens):",
		rep.Caches.Blocks, rep.Caches.BlockSize)
	for _, s := range rep.Policies {
		if s.HitCeiling > 0 {
			line += fmt.Sprintf(" %s %.1f%% of %.1f%% (%.2f)", s.Policy, 100*s.PrefixHitRate, 100*s.HitCeiling, s.PrefixHitRate/s.HitCeiling)
		}
	}
	if _, err := fmt.Fprintln(w, line); err != nil {
		return err
	}
	p := rep.Probe
	if p == nil {
		return nil
	}
	line = fmt.Sprintf("prefill probe (engine 1, one request at a time): uncached %.0f ms, prefix cached %.0f ms; mean TTFT predicted at no queue from the hit rate, measured:",
		p.UncachedMS, p.CachedMS)
	for _, s := range rep.Policies {
		line += fmt.Sprintf(" %s %.0f ms, %.0f ms;", s.Policy, p.PredictTTFT(s.PrefixHitRate), s.MeanTTFT)
	}
	// Queues lengthen every policy's TTFT; the ratio to rr's is what the
	// hit rates alone predict.
	if base := rep.Policy(PolicyRR); base != nil && base.MeanTTFT > 0 {
		for _, s := range rep.Policies {
			if s.Policy != PolicyRR {
				line += fmt.Sprintf(" %s/rr predicted %.2f, measured %.2f;", s.Policy,
					p.PredictTTFT(s.PrefixHitRate)/p.PredictTTFT(base.PrefixHitRate), s.MeanTTFT/base.MeanTTFT)
			}
		}
	}
	_, err := fmt.Fprintln(w, line)
	return err
}
