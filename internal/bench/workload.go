package bench

import (
	"fmt"
	"strings"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
)

// Workload is one benchmark's load, as `vllm bench serve` takes it, plus
// the fleet size. It is echoed as the JSON report's "workload".
type Workload struct {
	// Dataset is prefix_repetition, zipf, none or multi-turn.
	Dataset string `json:"dataset"`
	// Prompts is text (vLLM's benchmark: the decoded text of random token
	// ids, which the router and the replicas tokenize) or tokens (token-id
	// prompts). Multi-turn is always text: chat messages.
	Prompts    string `json:"prompts"`
	NumPrompts int    `json:"num_prompts"`
	// NumPrefixes and PrefixLen shape the shared prefixes; with dataset
	// none there are none and each prompt is PrefixLen+SuffixLen fresh
	// tokens, so it is as long as the other datasets' prompts. Multi-turn
	// runs NumPrefixes conversations of NumPrompts/NumPrefixes turns: a
	// system prompt of PrefixLen tokens, then per turn a user message of
	// SuffixLen tokens, each turn sent with the whole conversation so far
	// (the replies included) once the previous turn's reply is in.
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
	// BlockSize is the replicas' KV block size (vLLM --block-size), which
	// the router is given as the provider gives it: 64, as the seed ran.
	BlockSize int `json:"block_size"`
	// PriorityMix is the priority classes the requests name (live mode;
	// empty: none).
	PriorityMix PriorityMix `json:"priority_mix,omitempty"`
}

// DatasetMultiTurn is the chat workload whose prefix grows every turn, as
// agents send their conversations.
const DatasetMultiTurn = "multi-turn"

// SeedBlockSize is the seed benchmark's vLLM --block-size.
const SeedBlockSize = 64

// SeedWorkload is the seed benchmark: 8 replicas, 150 prefixes of 2,048
// tokens, suffix 128, output 256, 9,000 prompts, 512 connections, rate inf.
func SeedWorkload() Workload {
	s := sim.SeedWorkload()
	return Workload{Dataset: DatasetPrefixRepetition, NumPrompts: s.NumPrompts, NumPrefixes: s.NumPrefixes,
		PrefixLen: s.PrefixLen, SuffixLen: s.SuffixLen, OutputLen: s.OutputLen, ZipfS: 1.1, IgnoreEOS: true,
		MaxConcurrency: 512, Seed: s.Seed, Replicas: 8, Prompts: PromptsText, BlockSize: SeedBlockSize}
}

// check says what is wrong with the workload's shape, naming the flag.
func (w Workload) check() error {
	var errs []string
	need := func(ok bool, msg string) {
		if !ok {
			errs = append(errs, msg)
		}
	}
	need(w.NumPrompts > 0, "--num-prompts must be > 0")
	need(w.OutputLen > 0, "--prefix-repetition-output-len must be > 0")
	need(w.BlockSize > 0, "--block-size must be > 0")
	need(w.Prompts == PromptsText || w.Prompts == PromptsTokens,
		fmt.Sprintf("--prompts %q: want %s or %s", w.Prompts, PromptsText, PromptsTokens))
	if err := w.PriorityMix.check(); err != nil {
		errs = append(errs, err.Error())
	}
	switch w.Dataset {
	case DatasetPrefixRepetition, DatasetZipf, DatasetMultiTurn:
		need(w.NumPrefixes > 0 && w.NumPrompts >= w.NumPrefixes,
			"--prefix-repetition-num-prefixes must be > 0 and at most --num-prompts")
		need(w.PrefixLen > 0 && w.SuffixLen > 0, "--prefix-repetition-prefix-len and -suffix-len must be > 0")
		need(w.Dataset != DatasetZipf || w.ZipfS > 0, "--zipf-s must be > 0")
		need(w.Dataset != DatasetMultiTurn || w.Prompts == PromptsText, "multi-turn sends chat messages: --prompts text")
	case DatasetNone:
		need(w.PrefixLen+w.SuffixLen > 0, "--prefix-repetition-prefix-len plus -suffix-len must be > 0")
	default:
		errs = append(errs, fmt.Sprintf("--dataset: unknown dataset %q (want %s, %s, %s or %s)", w.Dataset,
			DatasetPrefixRepetition, DatasetZipf, DatasetNone, DatasetMultiTurn))
	}
	if len(errs) > 0 {
		return fmt.Errorf("workload: %s", strings.Join(errs, "; "))
	}
	return nil
}

// engineConfig is the replicas' engine for the workload: the simulator's
// A10G with the workload's block size, the cache re-sized in its blocks.
func (w Workload) engineConfig() sim.EngineConfig {
	ec := sim.DefaultEngineConfig()
	mem := sim.DefaultA10G()
	mem.BlockSize = w.BlockSize
	ec.BlockSize, ec.NumGPUBlocks, ec.Seed = w.BlockSize, mem.GPUBlocks(), w.Seed
	return ec
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
	case DatasetMultiTurn:
		return nil, fmt.Errorf("dataset %s runs live only: each turn carries the previous turn's reply", w.Dataset)
	}
	return nil, fmt.Errorf("unknown dataset %q (want %s, %s, %s or %s)", w.Dataset, DatasetPrefixRepetition, DatasetZipf,
		DatasetNone, DatasetMultiTurn)
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
