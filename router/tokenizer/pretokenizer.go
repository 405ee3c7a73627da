package tokenizer

import (
	"encoding/json"
	"fmt"
	"slices"
)

// preTokenizer refines a list of pieces into smaller pieces. A tokenizer.json
// Sequence is flattened into a list of stages applied in order.
type preTokenizer interface {
	apply(dst, pieces []string, sc *scratch) []string
}

// splitBehavior says what becomes of a match and the text around it, as in
// Hugging Face's SplitDelimiterBehavior.
type splitBehavior uint8

const (
	splitIsolated splitBehavior = iota
	splitRemoved
	splitMergedWithPrevious
	splitMergedWithNext
	splitContiguous
)

var splitBehaviors = map[string]splitBehavior{
	"Isolated":           splitIsolated,
	"Removed":            splitRemoved,
	"MergedWithPrevious": splitMergedWithPrevious,
	"MergedWithNext":     splitMergedWithNext,
	"Contiguous":         splitContiguous,
}

type splitStage struct {
	m        matcher
	behavior splitBehavior
	invert   bool
}

func (st *splitStage) apply(dst, pieces []string, sc *scratch) []string {
	for _, p := range pieces {
		dst = st.splitOne(dst, p, sc)
	}
	return dst
}

func (st *splitStage) splitOne(dst []string, p string, sc *scratch) []string {
	sc.spans = st.m.appendMatches(sc.spans[:0], p)
	sc.runs = st.runs(sc.runs[:0], p, sc.spans)
	sc.segs = st.join(sc.segs[:0], sc.runs)
	for _, g := range sc.segs {
		if g.start < g.end {
			dst = append(dst, p[g.start:g.end])
		}
	}
	return dst
}

// segment is a run of text that did or did not match the pattern.
type segment struct {
	span
	match bool
}

// runs cuts s into the runs of text between and at the matches.
func (st *splitStage) runs(runs []segment, s string, matches []span) []segment {
	prev := 0
	for _, m := range matches {
		if prev < m.start {
			runs = append(runs, segment{span{prev, m.start}, st.invert})
		}
		runs = append(runs, segment{m, !st.invert})
		prev = m.end
	}
	if prev < len(s) {
		runs = append(runs, segment{span{prev, len(s)}, st.invert})
	}
	return runs
}

// join merges runs as Hugging Face's SplitDelimiterBehavior does.
func (st *splitStage) join(out, runs []segment) []segment {
	prevMatch := false
	switch st.behavior {
	case splitIsolated:
		out = append(out, runs...)
	case splitRemoved:
		for _, r := range runs {
			if !r.match {
				out = append(out, r)
			}
		}
	case splitMergedWithPrevious:
		for _, r := range runs {
			if r.match && !prevMatch && len(out) > 0 {
				out[len(out)-1].end = r.end
			} else {
				out = append(out, r)
			}
			prevMatch = r.match
		}
	case splitMergedWithNext:
		for i := len(runs) - 1; i >= 0; i-- {
			r := runs[i]
			if r.match && !prevMatch && len(out) > 0 {
				out[len(out)-1].start = r.start
			} else {
				out = append(out, r)
			}
			prevMatch = r.match
		}
		slices.Reverse(out)
	case splitContiguous:
		for _, r := range runs {
			if r.match == prevMatch && len(out) > 0 {
				out[len(out)-1].end = r.end
			} else {
				out = append(out, r)
			}
			prevMatch = r.match
		}
	}
	return out
}

// byteLevelStage marks the pipeline as byte-level (the BPE model then works
// on raw bytes) and optionally applies GPT-2's own split and a prefix space.
type byteLevelStage struct {
	addPrefixSpace bool
	split          *splitStage // nil unless use_regex
}

// gpt2SplitPattern is the split the ByteLevel pre-tokenizer applies when
// use_regex is true.
const gpt2SplitPattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

func (st *byteLevelStage) apply(dst, pieces []string, sc *scratch) []string {
	for _, p := range pieces {
		if st.addPrefixSpace && (len(p) == 0 || p[0] != ' ') {
			p = " " + p
		}
		if st.split == nil {
			dst = append(dst, p)
			continue
		}
		dst = st.split.splitOne(dst, p, sc)
	}
	return dst
}

// buildPreTokenizer flattens the pre_tokenizer into stages and reports
// whether a ByteLevel stage is present. fast selects the hand-written scanner
// for the split patterns it covers; tests turn it off to get the regex oracle.
func buildPreTokenizer(raw json.RawMessage, fast bool) (stages []preTokenizer, byteLevel bool, err error) {
	if isNull(raw) {
		return nil, false, nil
	}
	var spec componentSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, false, fmt.Errorf("decoding pre_tokenizer: %w", err)
	}
	switch spec.Type {
	case "Sequence":
		for i, item := range spec.PreTokenizers {
			sub, bl, err := buildPreTokenizer(item, fast)
			if err != nil {
				return nil, false, fmt.Errorf("pre_tokenizer Sequence[%d]: %w", i, err)
			}
			stages = append(stages, sub...)
			byteLevel = byteLevel || bl
		}
		return stages, byteLevel, nil
	case "Split":
		st, err := buildSplit(spec, fast)
		if err != nil {
			return nil, false, err
		}
		return []preTokenizer{st}, false, nil
	case "ByteLevel":
		st := &byteLevelStage{addPrefixSpace: spec.AddPrefixSpace}
		if spec.UseRegex == nil || *spec.UseRegex {
			m, err := newRegexMatcher(gpt2SplitPattern)
			if err != nil {
				return nil, false, err
			}
			st.split = &splitStage{m: m, behavior: splitIsolated}
		}
		return []preTokenizer{st}, true, nil
	}
	return nil, false, unsupported("pre_tokenizer", spec.Type)
}

// buildSplit builds a Split stage (fast: see buildPreTokenizer).
func buildSplit(spec componentSpec, fast bool) (*splitStage, error) {
	behavior, ok := splitBehaviors[spec.Behavior]
	if !ok {
		return nil, unsupported("Split behavior", spec.Behavior)
	}
	st := &splitStage{behavior: behavior, invert: spec.Invert}
	switch {
	case spec.Pattern == nil:
		return nil, fmt.Errorf("split pre_tokenizer without a pattern")
	case spec.Pattern.String != nil:
		st.m = literalMatcher(*spec.Pattern.String)
	case spec.Pattern.Regex != nil:
		if sc, ok := scannerFor(*spec.Pattern.Regex); ok && fast {
			st.m = sc
			break
		}
		m, err := newRegexMatcher(*spec.Pattern.Regex)
		if err != nil {
			return nil, err
		}
		st.m = m
	default:
		return nil, fmt.Errorf("split pre_tokenizer pattern is neither Regex nor String")
	}
	return st, nil
}
