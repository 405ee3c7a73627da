package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// The split patterns of Qwen2/2.5/3 and Llama 3 (and of GPT-4's cl100k) differ
// only in how many digits one piece may hold. regexp2 backtracks through the
// seven alternatives for every piece; wordScanner decides each piece from the
// first one or two runes instead, which is where most of the encoder's speed
// comes from. It reproduces the regex's semantics exactly, alternative by
// alternative (the regex path is its oracle in the tests).
const (
	qwenSplitPattern   = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	llama3SplitPattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// scanners are the hand-written matchers, by the split pattern each replaces.
var scanners = map[string]matcher{
	qwenSplitPattern:     wordScanner{maxDigits: 1},
	llama3SplitPattern:   wordScanner{maxDigits: 3},
	deepseekDigitPattern: numberRun{max: 3},
	deepseekCJKPattern:   hanKanaRun{},
	deepseekSplitPattern: deepseekScanner{},
}

// scannerFor returns the hand-written scanner for a split pattern it covers.
func scannerFor(pattern string) (matcher, bool) {
	m, ok := scanners[pattern]
	return m, ok
}

type runeClass uint8

const (
	classOther runeClass = iota
	classLetter
	classNumber
	classSpace // Unicode White_Space, as \s in Oniguruma
)

var asciiClass = func() (t [utf8.RuneSelf]runeClass) {
	for r := rune(0); r < utf8.RuneSelf; r++ {
		t[r] = classify(r)
	}
	return t
}()

func classify(r rune) runeClass {
	switch {
	case unicode.IsLetter(r):
		return classLetter
	case unicode.IsNumber(r):
		return classNumber
	case unicode.IsSpace(r):
		return classSpace
	}
	return classOther
}

// runeAt decodes the rune at byte i and its class, with an ASCII fast path.
func runeAt(s string, i int) (rune, int, runeClass) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1, asciiClass[c]
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	return r, n, classify(r)
}

type wordScanner struct{ maxDigits int }

func (w wordScanner) appendMatches(dst []span, s string) []span {
	for i := 0; i < len(s); {
		n := w.piece(s, i)
		dst = append(dst, span{i, i + n})
		i += n
	}
	return dst
}

// piece returns the byte length of the match starting at i. Every rune is a
// letter, a number, white space or other, and each class is covered by some
// alternative, so a match always starts exactly at i.
func (w wordScanner) piece(s string, i int) int {
	r, n, c := runeAt(s, i)
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if r == '\'' {
		if k := contraction(s[i+1:]); k > 0 {
			return 1 + k
		}
	}
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if c == classLetter {
		return n + w.run(s, i+n, classLetter)
	}
	if c != classNumber && r != '\r' && r != '\n' && i+n < len(s) {
		if _, n2, c2 := runeAt(s, i+n); c2 == classLetter {
			return n + n2 + w.run(s, i+n+n2, classLetter)
		}
	}
	// \p{N}{1,maxDigits}
	if c == classNumber {
		j := i + n
		for k := 1; k < w.maxDigits && j < len(s); k++ {
			_, n2, c2 := runeAt(s, j)
			if c2 != classNumber {
				break
			}
			j += n2
		}
		return j - i
	}
	// ` ?[^\s\p{L}\p{N}]+[\r\n]*`
	j := i
	if r == ' ' {
		j++
	}
	if k := w.run(s, j, classOther); k > 0 {
		j += k
		for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j - i
	}
	// Only white space is left.
	return whitespacePiece(s, i)
}

// whitespacePiece matches the three white-space alternatives the patterns
// share at i, where a white-space rune starts: \s*[\r\n]+ takes the run up to
// its last line break; \s+(?!\S) takes the run but leaves its last rune to
// prefix the next piece; \s+ takes a single space before a non-space.
func whitespacePiece(s string, i int) int {
	end, lastBreak, lastStart := i, -1, i
	for end < len(s) {
		r, n, c := runeAt(s, end)
		if c != classSpace {
			break
		}
		if r == '\r' || r == '\n' {
			lastBreak = end + 1
		}
		lastStart = end
		end += n
	}
	switch {
	case lastBreak > 0:
		return lastBreak - i
	case end == len(s) || lastStart == i:
		return end - i
	default:
		return lastStart - i
	}
}

// run returns the byte length of the run of class c starting at i.
func (wordScanner) run(s string, i int, c runeClass) int {
	j := i
	for j < len(s) {
		_, n, c2 := runeAt(s, j)
		if c2 != c {
			break
		}
		j += n
	}
	return j - i
}

// contraction returns the byte length of the contraction suffix at the start
// of s (after an apostrophe), or 0. Oniguruma matches (?i:...) by Unicode case
// folding, so U+017F LATIN SMALL LETTER LONG S matches "s" too.
func contraction(s string) int {
	if len(s) == 0 {
		return 0
	}
	if len(s) >= 2 && s[0] == 0xC5 && s[1] == 0xBF { // U+017F
		return 2
	}
	switch s[0] | 0x20 {
	case 's', 't', 'm', 'd':
		return 1
	case 'r', 'v':
		if len(s) >= 2 && s[1]|0x20 == 'e' {
			return 2
		}
	case 'l':
		if len(s) >= 2 && s[1]|0x20 == 'l' {
			return 2
		}
	}
	return 0
}
