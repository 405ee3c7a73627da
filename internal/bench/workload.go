package bench

import (
	"fmt"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
)

// Workload is one benchmark's load, as `vllm bench serve` takes it, plus
// the fleet size. It is echoed as the JSON report's "workload".
type Workload struct {
	// Dataset is prefix_repetition, zipf or none.
	Dataset    string `json:"dataset"`
	NumPrompts int    `json:"num_prompts"`
	// NumPrefixes and PrefixLen shape the shared prefixes; with dataset
	// none there are none and each prompt is PrefixLen+SuffixLen fresh
	// tokens, so it is as long as the other datasets' prompts.
	NumPrefixes int `json:"num_prefixes"`
	PrefixLen   int `json:"prefix_len"`
	SuffixLen   int `json:"suffix_len"`
	OutputLen   int `json:"output_len"`
	// ZipfS is the zipf dataset's exponent.
	ZipfS float64 `json:"zipf_s,omitempty"`
	// IgnoreEOS is always true: every request generates exactly OutputLen
	// tokens, as the seed benchmark ran (--ignore-eos).
	IgnoreEOS      bool `json:"ignore_eos"`
	MaxConcurrency int  `json:"max_concurrency"`
	// RequestRate is Poisson arrivals per second; 0 means inf (all ready at once).
	RequestRate float64 `json:"request_rate"`
	Seed        uint64  `json:"seed"`
	Replicas    int     `json:"replicas"`
}

// SeedWorkload is the seed benchmark: 8 replicas, 150 prefixes of 2,048
// tokens, suffix 128, output 256, 9,000 prompts, 512 connections, rate inf.
func SeedWorkload() Workload {
	s := sim.SeedWorkload()
	return Workload{Dataset: DatasetPrefixRepetition, NumPrompts: s.NumPrompts, NumPrefixes: s.NumPrefixes,
		PrefixLen: s.PrefixLen, SuffixLen: s.SuffixLen, OutputLen: s.OutputLen, ZipfS: 1.1, IgnoreEOS: true,
		MaxConcurrency: 512, Seed: s.Seed, Replicas: 8}
}

// SimDataset draws the workload's prompts.
func (w Workload) SimDataset() (sim.Dataset, error) {
	switch w.Dataset {
	case DatasetPrefixRepetition:
		return sim.PrefixRepetition{NumPrefixes: w.NumPrefixes, PrefixLen: w.PrefixLen, SuffixLen: w.SuffixLen,
			OutputLen: w.OutputLen, NumPrompts: w.NumPrompts, Seed: w.Seed}, nil
	case DatasetZipf:
		return Zipf{NumPrefixes: w.NumPrefixes, PrefixLen: w.PrefixLen, SuffixLen: w.SuffixLen, OutputLen: w.OutputLen,
			NumPrompts: w.NumPrompts, S: w.ZipfS, Seed: w.Seed}, nil
	case DatasetNone:
		return NoPrefix{PromptLen: w.PrefixLen + w.SuffixLen, OutputLen: w.OutputLen, NumPrompts: w.NumPrompts,
			Seed: w.Seed}, nil
	}
	return nil, fmt.Errorf("unknown dataset %q (want %s, %s or %s)", w.Dataset, DatasetPrefixRepetition, DatasetZipf, DatasetNone)
}

// Normalize drops the fields the dataset does not use, so the JSON echo
// says only what shaped the run.
func (w Workload) Normalize() Workload {
	if w.Dataset != DatasetZipf {
		w.ZipfS = 0
	}
	if w.Dataset == DatasetNone {
		w.NumPrefixes = 0
	}
	return w
}
