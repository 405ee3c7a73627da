package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"unicode/utf8"
)

// Tokenizer encodes text to the token ids of one model, as Hugging Face's
// tokenizers library does with the model's tokenizer.json. It is immutable
// after Load and safe for concurrent use; each call borrows its working
// buffers from a pool, so there is no lock shared between requests.
type Tokenizer struct {
	model      *bpeModel
	normalizer normalizer
	stages     []preTokenizer
	raw        *addedMatcher // added tokens matched before normalization
	normalized *addedMatcher // added tokens matched after it
	added      []AddedToken
	special    map[uint32]bool
	template   template
	resume     resumer           // the first stage's matcher when the split can resume (resume.go), else nil
	tokens     map[string]uint32 // token as spelled in tokenizer.json -> id
	names      []string          // id -> token as spelled in tokenizer.json
	bytes      [][]byte          // id -> the bytes it decodes to
	pool       sync.Pool
}

// scratch holds one call's working buffers.
type scratch struct {
	outer, inner  []addedSplit
	pieces, spare []string
	spans         []span
	runs, segs    []segment
	symbols       []symbol
	heap          candidateHeap
	ids           []uint32
	pairs         []merge
	cache         map[string]cachedIDs // see cache.go
	arena         []uint32
	first         []string // first-stage pieces on the resumable path (resume.go)
	strides       []uint64 // a segment's prefix hashes (prefixcache.go)
}

// Load reads a Hugging Face tokenizer.json of the byte-level BPE family.
func Load(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading tokenizer: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("loading %s: %w", path, err)
	}
	return t, nil
}

// Parse builds a Tokenizer from the contents of a tokenizer.json. A component
// outside the byte-level BPE family is an error wrapping ErrUnsupported.
func Parse(data []byte) (*Tokenizer, error) {
	return parse(data, true)
}

// parse builds the tokenizer; fast=false keeps every split on regexp2, the
// oracle the hand-written scanner is tested against.
func parse(data []byte, fast bool) (*Tokenizer, error) {
	var spec fileSpec
	if err := json.Unmarshal(data, &spec); err != nil {
		return nil, fmt.Errorf("decoding tokenizer.json: %w", err)
	}
	if !isNull(spec.Truncation) {
		return nil, unsupported("setting", "truncation")
	}
	if !isNull(spec.Padding) {
		return nil, unsupported("setting", "padding")
	}
	model, err := decodeModel(spec.Model)
	if err != nil {
		return nil, err
	}
	t := &Tokenizer{special: map[uint32]bool{}}
	if t.model, err = buildBPE(model); err != nil {
		return nil, err
	}
	if t.normalizer, err = buildNormalizer(spec.Normalizer); err != nil {
		return nil, err
	}
	var byteLevel bool
	if t.stages, byteLevel, err = buildPreTokenizer(spec.PreTokenizer, fast); err != nil {
		return nil, err
	}
	if !byteLevel {
		return nil, fmt.Errorf("%w: pre_tokenizer has no ByteLevel step (only byte-level BPE is supported)", ErrUnsupported)
	}
	t.resume = resumableSplit(t.stages)
	if t.template, err = buildPostProcessor(spec.PostProcessor); err != nil {
		return nil, err
	}
	if err := checkDecoder(spec.Decoder); err != nil {
		return nil, err
	}
	if err := t.buildVocab(model.Vocab, spec.AddedTokens); err != nil {
		return nil, err
	}
	t.pool.New = func() any { return new(scratch) }
	return t, nil
}

// Encode returns the ids of text. With addSpecial the post-processor's
// special tokens are added, as vLLM does for /v1/completions prompts; rendered
// chat text is encoded without them. Special tokens written in the text are
// matched either way. Text that is not valid UTF-8 is an error wrapping
// ErrUntokenizable.
func (t *Tokenizer) Encode(text string, addSpecial bool) ([]uint32, error) {
	return t.AppendEncode(nil, text, addSpecial)
}

// AppendEncode is Encode appending to dst, for callers that reuse buffers.
func (t *Tokenizer) AppendEncode(dst []uint32, text string, addSpecial bool) ([]uint32, error) {
	return t.appendEncode(dst, text, addSpecial, nil)
}

// appendEncode is AppendEncode, reusing and filling c (nil: no cache) for
// the text between added tokens.
func (t *Tokenizer) appendEncode(dst []uint32, text string, addSpecial bool, c *PrefixCache) ([]uint32, error) {
	if !utf8.ValidString(text) {
		return dst, fmt.Errorf("%w: invalid UTF-8 at byte %d", ErrUntokenizable, invalidAt(text))
	}
	if dst == nil && len(text) > 1<<12 {
		// Prose runs 4 to 5 bytes a token: sizing for 3 saves the copies and
		// garbage of growing a long prompt's ids from nothing.
		dst = make([]uint32, 0, len(text)/3)
	}
	sc := t.pool.Get().(*scratch)
	defer t.pool.Put(sc)
	if addSpecial {
		dst = append(dst, t.template.prefix...)
	}
	sc.outer = t.raw.split(sc.outer[:0], text)
	for _, part := range sc.outer {
		if part.token >= 0 {
			dst = append(dst, t.raw.tokens[part.token].ID)
			continue
		}
		s := part.text
		if t.normalizer != nil {
			s = t.normalizer.normalize(s)
		}
		sc.inner = t.normalized.split(sc.inner[:0], s)
		for _, p := range sc.inner {
			if p.token >= 0 {
				dst = append(dst, t.normalized.tokens[p.token].ID)
				continue
			}
			if c != nil {
				dst = c.encodeText(dst, p.text, sc)
			} else {
				dst = t.encodeText(dst, p.text, sc)
			}
		}
	}
	if addSpecial {
		dst = append(dst, t.template.suffix...)
	}
	return dst, nil
}

// encodeText pre-tokenizes normalized text between added tokens and runs BPE
// on each piece.
func (t *Tokenizer) encodeText(dst []uint32, s string, sc *scratch) []uint32 {
	if s == "" {
		return dst
	}
	return t.encodePieces(dst, t.preTokenize(s, t.stages, sc), sc)
}

// preTokenize runs stages on s; the pieces live in sc until the next call.
func (t *Tokenizer) preTokenize(s string, stages []preTokenizer, sc *scratch) []string {
	pieces := append(sc.pieces[:0], s)
	for _, st := range stages {
		out := st.apply(sc.spare[:0], pieces, sc)
		sc.spare = pieces
		pieces = out
	}
	sc.pieces = pieces
	return pieces
}

// encodePieces runs BPE on each pre-tokenized piece.
func (t *Tokenizer) encodePieces(dst []uint32, pieces []string, sc *scratch) []uint32 {
	for _, p := range pieces {
		switch {
		case len(p) <= 1 || len(p) > maxCachedPiece:
			if p != "" {
				dst = t.model.encodeWord(dst, p, sc)
			}
		default:
			var hit bool
			if dst, hit = sc.lookup(dst, p); !hit {
				start := len(dst)
				dst = t.model.encodeWord(dst, p, sc)
				sc.remember(p, dst[start:])
			}
		}
	}
	return dst
}

func invalidAt(s string) int {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(s)
}
