package tokenizer

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// span is a byte range [start, end) of the text being split.
type span struct{ start, end int }

// matcher finds the non-overlapping matches of a Split pattern, left to right.
type matcher interface {
	appendMatches(dst []span, s string) []span
}

// regexMatcher runs a tokenizer.json regex with regexp2, whose default
// (.NET) dialect matches Oniguruma, the engine Hugging Face tokenizers uses,
// on the constructs these patterns need: lookahead, \p{..} classes, inline
// case-insensitive groups, and \s as Unicode White_Space. It is the general
// path and, for the patterns the hand-written scanner covers, the test oracle.
type regexMatcher struct{ re *regexp2.Regexp }

func newRegexMatcher(pattern string) (*regexMatcher, error) {
	re, err := regexp2.Compile(pattern, regexp2.None)
	if err != nil {
		return nil, fmt.Errorf("compiling split regex %q: %w", pattern, err)
	}
	return &regexMatcher{re}, nil
}

func (m *regexMatcher) appendMatches(dst []span, s string) []span {
	// regexp2 reports positions in runes; walk the string alongside to turn
	// them into byte offsets without decoding it twice per match.
	runePos, bytePos := 0, 0
	toByte := func(target int) int {
		for runePos < target {
			_, size := utf8.DecodeRuneInString(s[bytePos:])
			bytePos += size
			runePos++
		}
		return bytePos
	}
	match, err := m.re.FindStringMatch(s)
	for err == nil && match != nil {
		if match.Length > 0 {
			start := toByte(match.Index)
			dst = append(dst, span{start, toByte(match.Index + match.Length)})
		}
		match, err = m.re.FindNextMatch(match)
	}
	// With no timeout set, regexp2 can only fail on a timeout, so err is nil here.
	return dst
}

// literalMatcher splits on a fixed string (Split with a "String" pattern).
type literalMatcher string

func (m literalMatcher) appendMatches(dst []span, s string) []span {
	if m == "" {
		return dst
	}
	for off := 0; ; {
		i := strings.Index(s[off:], string(m))
		if i < 0 {
			return dst
		}
		dst = append(dst, span{off + i, off + i + len(m)})
		off += i + len(m)
	}
}
