package bench

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
)

// Dataset names, as --dataset takes them.
const (
	DatasetPrefixRepetition = "prefix_repetition"
	DatasetZipf             = "zipf"
	DatasetNone             = "none"
)

// vocabSize is Qwen2.5's count of ordinary tokens, from which random prompt
// tokens are drawn (as package sim and vLLM's random datasets draw them).
const vocabSize = 151643

// Zipf is prefix_repetition with skewed popularity: prompt i uses prefix k
// (0-based rank) with probability proportional to 1/(k+1)^S, so a few hot
// prefixes carry most of the traffic. A prefix-affine router that ignores
// load piles the hot ones onto single pods; that is what it tests.
type Zipf struct {
	NumPrefixes, PrefixLen, SuffixLen, OutputLen, NumPrompts int
	// S is the Zipf exponent (> 0); 1.1 puts about a fifth of the prompts
	// on the hottest of 150 prefixes.
	S    float64
	Seed uint64
}

// NoPrefix is a workload without shared prefixes: every prompt is
// PromptLen fresh random tokens. Prefix scoring has nothing to find, so a
// router can only match or lose to load balancing.
type NoPrefix struct {
	PromptLen, OutputLen, NumPrompts int
	Seed                             uint64
}

var (
	_ sim.Dataset = Zipf{}
	_ sim.Dataset = NoPrefix{}
)

// Build implements sim.Dataset.
func (z Zipf) Build() (sim.Workload, error) {
	if z.NumPrefixes <= 0 || z.NumPrompts <= 0 || z.PrefixLen+z.SuffixLen <= 0 || z.OutputLen <= 0 || z.S <= 0 {
		return nil, fmt.Errorf("zipf workload %+v: needs prefixes, prompts, a prompt, an output and s > 0", z)
	}
	rng := rand.New(rand.NewPCG(z.Seed, 0x7a697066))
	w := &drawn{prefixLen: z.PrefixLen, suffixLen: z.SuffixLen, outputLen: z.OutputLen, seed: z.Seed,
		prefixes: make([][]uint32, z.NumPrefixes)}
	for i := range w.prefixes {
		w.prefixes[i] = randomTokens(rng, make([]uint32, z.PrefixLen))
	}
	w.order = zipfOrder(rng, z.NumPrefixes, z.NumPrompts, z.S)
	return w, nil
}

// zipfOrder draws n prompts' prefixes, prefix k (0-based rank of m) with
// probability proportional to 1/(k+1)^s.
func zipfOrder(rng *rand.Rand, m, n int, s float64) []int32 {
	cum := make([]float64, m)
	total := 0.0
	for k := range cum {
		total += 1 / math.Pow(float64(k+1), s)
		cum[k] = total
	}
	order := make([]int32, n)
	for i := range order {
		x := rng.Float64() * total
		k := 0
		for k < len(cum)-1 && cum[k] < x {
			k++
		}
		order[i] = int32(k)
	}
	return order
}

// Build implements sim.Dataset.
func (n NoPrefix) Build() (sim.Workload, error) {
	if n.PromptLen <= 0 || n.OutputLen <= 0 || n.NumPrompts <= 0 {
		return nil, fmt.Errorf("none workload %+v: needs a prompt, an output and prompts", n)
	}
	return &drawn{suffixLen: n.PromptLen, outputLen: n.OutputLen, seed: n.Seed, order: make([]int32, n.NumPrompts)}, nil
}

// drawn is a workload whose prompt i is prefixes[order[i]] (none when there
// are no prefixes) followed by suffixLen tokens from prompt i's own stream,
// so prompts are generated on demand and a run holds only those in flight.
type drawn struct {
	prefixLen, suffixLen, outputLen int
	seed                            uint64
	prefixes                        [][]uint32
	order                           []int32
}

func (w *drawn) Len() int          { return len(w.order) }
func (w *drawn) OutputLen(int) int { return w.outputLen }

func (w *drawn) Prompt(i int, buf []uint32) []uint32 {
	p := 0
	if len(w.prefixes) > 0 {
		p = w.prefixLen
	}
	n := p + w.suffixLen
	out := buf[:0]
	if cap(buf) < n+w.outputLen {
		out = make([]uint32, 0, n+w.outputLen)
	}
	out = out[:n]
	if p > 0 {
		copy(out, w.prefixes[w.order[i]])
	}
	randomTokens(rand.New(rand.NewPCG(w.seed, uint64(i)+1)), out[p:])
	return out
}

// randomTokens fills dst with ids drawn uniformly from the vocabulary.
func randomTokens(rng *rand.Rand, dst []uint32) []uint32 {
	for i := range dst {
		dst[i] = uint32(rng.IntN(vocabSize))
	}
	return dst
}
