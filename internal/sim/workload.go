package sim

import (
	"fmt"
	"math/rand/v2"
)

// Dataset describes a benchmark workload; Build draws its requests. Other
// datasets (Zipf-skewed prefixes, no shared prefix) implement it outside
// this package; a Workload that needs no drawing returns itself.
type Dataset interface {
	Build() (Workload, error)
}

// Workload is a benchmark's requests, generated on demand so that a run
// holds only its in-flight prompts.
type Workload interface {
	// Len is the number of requests.
	Len() int
	// Prompt returns request i's prompt token ids, reusing buf when it is
	// large enough. Spare capacity for OutputLen(i) more tokens lets the
	// engine append the output in place.
	Prompt(i int, buf []uint32) []uint32
	// OutputLen is how many tokens request i generates.
	OutputLen(i int) int
}

// PrefixRepetition mirrors `vllm bench serve --dataset-name
// prefix_repetition`: NumPrefixes random prefixes of PrefixLen tokens, each
// followed by a random suffix of SuffixLen tokens in NumPrompts/NumPrefixes
// prompts, shuffled; every request generates exactly OutputLen tokens
// (--ignore-eos). Prompts are token ids, so no tokenizer is needed.
type PrefixRepetition struct {
	NumPrefixes, PrefixLen, SuffixLen, OutputLen, NumPrompts int
	Seed                                                     uint64
}

// SeedWorkload is the seed benchmark: 150 prefixes of 2,048 tokens, suffix
// 128, output 256, 9,000 prompts.
func SeedWorkload() PrefixRepetition {
	return PrefixRepetition{NumPrefixes: 150, PrefixLen: 2048, SuffixLen: 128, OutputLen: 256, NumPrompts: 9000, Seed: 1}
}

// vocabSize is Qwen2.5's count of ordinary (non-added) tokens, from which
// random prompt tokens are drawn as vLLM draws them from the vocabulary.
const vocabSize = 151643

// prefixRepetition generates the workload lazily: the prefixes up front,
// each prompt's suffix from its own seeded stream when asked for.
type prefixRepetition struct {
	spec     PrefixRepetition
	prefixes [][]uint32
	order    []int32 // shuffled prompt number -> prefix
}

// Build draws the prefixes and the shuffled order.
func (w PrefixRepetition) Build() (Workload, error) {
	if w.NumPrefixes <= 0 || w.NumPrompts < w.NumPrefixes || w.PrefixLen+w.SuffixLen <= 0 || w.OutputLen <= 0 {
		return nil, fmt.Errorf("workload %+v: needs prefixes > 0, prompts >= prefixes, a prompt and an output", w)
	}
	rng := rand.New(rand.NewPCG(w.Seed, 0x70726566))
	p := &prefixRepetition{spec: w, prefixes: make([][]uint32, w.NumPrefixes)}
	for i := range p.prefixes {
		p.prefixes[i] = randomTokens(rng, make([]uint32, w.PrefixLen))
	}
	per := w.NumPrompts / w.NumPrefixes
	for i := range w.NumPrefixes {
		for range per {
			p.order = append(p.order, int32(i))
		}
	}
	rng.Shuffle(len(p.order), func(i, j int) { p.order[i], p.order[j] = p.order[j], p.order[i] })
	return p, nil
}

// randomTokens fills dst with token ids drawn uniformly from the vocabulary.
func randomTokens(rng *rand.Rand, dst []uint32) []uint32 {
	for i := range dst {
		dst[i] = uint32(rng.IntN(vocabSize))
	}
	return dst
}

func (p *prefixRepetition) Len() int          { return len(p.order) }
func (p *prefixRepetition) OutputLen(int) int { return p.spec.OutputLen }

func (p *prefixRepetition) Prompt(i int, buf []uint32) []uint32 {
	w := p.spec
	n := w.PrefixLen + w.SuffixLen
	out := buf[:0]
	if cap(buf) < n+w.OutputLen {
		out = make([]uint32, 0, n+w.OutputLen)
	}
	out = out[:n]
	copy(out, p.prefixes[p.order[i]])
	rng := rand.New(rand.NewPCG(w.Seed, uint64(i)+1))
	randomTokens(rng, out[w.PrefixLen:])
	return out
}
