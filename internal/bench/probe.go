package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
)

// PrefillProbe is one engine's time to first token, one request at a time,
// for a prompt of the workload's shape uncached and with its prefix cached:
// what a hit saves before any queue forms.
type PrefillProbe struct {
	UncachedMS float64 `json:"uncached_ttft_ms"`
	CachedMS   float64 `json:"cached_ttft_ms"`
	// CachedShare is the share of the prompt's tokens the cached prefix
	// covers (its full blocks).
	CachedShare float64 `json:"cached_share"`
}

// PredictTTFT is the mean TTFT the probe predicts at a prefix hit rate, with
// no queue: the uncached time less the saving in proportion to the share
// of the prompt found cached.
func (p PrefillProbe) PredictTTFT(hitRate float64) float64 {
	if p.CachedShare <= 0 {
		return p.UncachedMS
	}
	return p.UncachedMS - (p.UncachedMS-p.CachedMS)*min(1, hitRate/p.CachedShare)
}

// probeRounds is how many prefixes the probe times; it reports medians.
const probeRounds = 3

// probePrefill times, on one engine, probeRounds fresh prompts of the
// workload's prefix and suffix lengths, each sent once uncached and once
// with another suffix behind the same prefix, as token ids with one
// output token; blockSize is the engine's. The probe's prefixes are drawn apart from the workload's
// (their own random stream), so no policy finds them cached.
func probePrefill(ctx context.Context, w Workload, engine string, blockSize int, opts LiveOptions) (PrefillProbe, error) {
	prefixLen, suffixLen := w.PrefixLen, max(w.SuffixLen, 1)
	if w.Dataset == DatasetNone {
		prefixLen = max(w.PrefixLen, 1)
	}
	rng := rand.New(rand.NewPCG(w.Seed, 0x70726f62))
	span := func(n int) []uint32 {
		out := make([]uint32, n)
		for i := range out {
			// Ids every common vocabulary has as ordinary tokens.
			out[i] = uint32(1000 + rng.IntN(29000))
		}
		return out
	}
	hc := &http.Client{Timeout: 2 * time.Minute}
	var uncached, cached []float64
	for range probeRounds {
		prefix := span(prefixLen)
		for _, into := range []*[]float64{&uncached, &cached} {
			ms, err := timeFirstToken(ctx, hc, engine, opts, slices.Concat(prefix, span(suffixLen)))
			if err != nil {
				return PrefillProbe{}, fmt.Errorf("prefill probe on %s: %w", engine, err)
			}
			*into = append(*into, ms)
		}
	}
	bs := max(blockSize, 1)
	_, uncachedMS, _ := sim.MeanMedianP99(uncached)
	_, cachedMS, _ := sim.MeanMedianP99(cached)
	return PrefillProbe{UncachedMS: uncachedMS, CachedMS: cachedMS,
		CachedShare: float64(prefixLen/bs*bs) / float64(prefixLen+suffixLen)}, nil
}

// timeFirstToken streams one completion of prompt with one output token
// and returns the milliseconds to its first chunk.
func timeFirstToken(ctx context.Context, hc *http.Client, base string, opts LiveOptions, prompt []uint32) (float64, error) {
	body, err := marshalRequest(opts.Model, prompt, nil, 1)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if opts.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+opts.APIKey)
	}
	sent := time.Now()
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	if resp.StatusCode != http.StatusOK {
		sc.Scan()
		return 0, fmt.Errorf("answered %s: %s", resp.Status, sc.Text())
	}
	first := time.Duration(0)
	for sc.Scan() {
		if first == 0 && bytes.HasPrefix(sc.Bytes(), []byte("data: {")) {
			first = time.Since(sent)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if first == 0 {
		return 0, fmt.Errorf("the stream carried no chunk")
	}
	return float64(first) / float64(time.Millisecond), nil
}
