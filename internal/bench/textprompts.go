package bench

import (
	"fmt"
	"math/rand/v2"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
	"github.com/llmd-dev/terraform-provider-llmd/router/tokenizer"
)

// Prompt forms, as --prompts takes them.
const (
	// PromptsText sends each prompt as the text its random token ids decode
	// to, as `vllm bench serve` does: the router and the replicas tokenize it.
	PromptsText = "text"
	// PromptsTokens sends token ids, which skip every tokenizer.
	PromptsTokens = "tokens"
)

// maxLengthRetries is how often a random span is decoded, re-encoded and
// padded or cut before its length is accepted as it is: vLLM's
// gen_prompt_decode_to_target_len gives up after 10.
const maxLengthRetries = 10

// textWorkload is a workload whose prompts are text, built before the run
// so that the client spends no CPU on them while it is timed. Prompt(i)
// re-encodes text i, so the token ids are those the engine will see.
type textWorkload struct {
	texts     []string
	outputLen int
	tok       *tokenizer.Tokenizer
	// mismatched counts prompts whose re-encoded length is not the asked
	// length (a span that kept changing for maxLengthRetries rounds, or the
	// junction of prefix and suffix merging into other tokens).
	mismatched int
}

var _ sim.Workload = (*textWorkload)(nil)

func (w *textWorkload) Len() int          { return len(w.texts) }
func (w *textWorkload) OutputLen(int) int { return w.outputLen }
func (w *textWorkload) Text(i int) string { return w.texts[i] }

func (w *textWorkload) Prompt(i int, buf []uint32) []uint32 {
	ids, err := w.tok.AppendEncode(buf[:0], w.texts[i], false)
	if err != nil {
		// The texts are the tokenizer's own decodings, valid UTF-8 by construction.
		panic(fmt.Sprintf("re-encoding prompt %d: %v", i, err))
	}
	return ids
}

// textBuilder draws random token spans that decode and re-encode to an
// exact length, as vLLM's benchmark datasets do.
type textBuilder struct {
	tok *tokenizer.Tokenizer
	rng *rand.Rand
}

// exactSpan returns n token ids drawn uniformly from the vocabulary and then
// adjusted until their decoded text re-encodes to n ids: re-encoded, padded
// with fresh random ids when short, cut when long, at most maxLengthRetries
// times (vLLM's gen_prompt_decode_to_target_len). ok is false when the last
// round still did not have n ids.
func (b textBuilder) exactSpan(n int) (ids []uint32, ok bool, err error) {
	ids = randomTokens(b.rng, make([]uint32, n))
	for try := 0; ; try++ {
		text, err := b.tok.Decode(ids, false)
		if err != nil {
			return nil, false, fmt.Errorf("decoding random ids: %w", err)
		}
		if ids, err = b.tok.Encode(text, false); err != nil {
			return nil, false, fmt.Errorf("re-encoding random text: %w", err)
		}
		if len(ids) == n || try >= maxLengthRetries {
			return ids, len(ids) == n, nil
		}
		if len(ids) < n {
			ids = append(ids, randomTokens(b.rng, make([]uint32, n-len(ids)))...)
		} else {
			ids = ids[:n]
		}
	}
}

// decode is the text of ids; exactSpan's ids always decode.
func (b textBuilder) decode(ids ...[]uint32) (string, error) {
	var all []uint32
	for _, s := range ids {
		all = append(all, s...)
	}
	text, err := b.tok.Decode(all, false)
	if err != nil {
		return "", fmt.Errorf("decoding a prompt: %w", err)
	}
	return text, nil
}

// buildTextWorkload draws the workload's prompts as text: prefix_repetition
// exactly as vLLM's PrefixRepetitionRandomDataset (each prefix, then each of
// its prompts' suffixes, every span of exact length, prompt = decode(prefix
// + suffix), all shuffled), zipf with the same spans and its skewed order,
// none with whole fresh prompts.
func buildTextWorkload(w Workload, tok *tokenizer.Tokenizer) (*textWorkload, error) {
	if tok == nil {
		return nil, fmt.Errorf("text prompts need the model's tokenizer (--tokenizer), or --prompts %s", PromptsTokens)
	}
	if err := w.check(); err != nil {
		return nil, err
	}
	b := textBuilder{tok: tok, rng: rand.New(rand.NewPCG(w.Seed, 0x74657874))}
	out := &textWorkload{outputLen: w.OutputLen, tok: tok, texts: make([]string, 0, w.NumPrompts)}
	add := func(want int, spans ...[]uint32) error {
		text, err := b.decode(spans...)
		if err != nil {
			return err
		}
		if ids, err := tok.Encode(text, false); err != nil || len(ids) != want {
			out.mismatched++
		}
		out.texts = append(out.texts, text)
		return nil
	}
	span := func(n int) ([]uint32, error) {
		ids, _, err := b.exactSpan(n) // a span left off length shows in add's count
		return ids, err
	}
	promptLen := w.PrefixLen + w.SuffixLen
	switch w.Dataset {
	case DatasetNone:
		for range w.NumPrompts {
			p, err := span(promptLen)
			if err != nil {
				return nil, err
			}
			if err := add(promptLen, p); err != nil {
				return nil, err
			}
		}
		return out, nil
	case DatasetPrefixRepetition:
		per := w.NumPrompts / w.NumPrefixes
		for range w.NumPrefixes {
			prefix, err := span(w.PrefixLen)
			if err != nil {
				return nil, err
			}
			for range per {
				suffix, err := span(w.SuffixLen)
				if err != nil {
					return nil, err
				}
				if err := add(promptLen, prefix, suffix); err != nil {
					return nil, err
				}
			}
		}
		b.rng.Shuffle(len(out.texts), func(i, j int) { out.texts[i], out.texts[j] = out.texts[j], out.texts[i] })
		return out, nil
	case DatasetZipf:
		prefixes := make([][]uint32, w.NumPrefixes)
		for k := range prefixes {
			var err error
			if prefixes[k], err = span(w.PrefixLen); err != nil {
				return nil, err
			}
		}
		for _, k := range zipfOrder(b.rng, w.NumPrefixes, w.NumPrompts, w.ZipfS) {
			suffix, err := span(w.SuffixLen)
			if err != nil {
				return nil, err
			}
			if err := add(promptLen, prefixes[k], suffix); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("dataset %s has no text form", w.Dataset)
}
