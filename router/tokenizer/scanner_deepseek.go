package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// DeepSeek V3 splits in three passes: digits in threes, runs of Han and kana,
// then a word pattern close to Qwen's but keyed on punctuation and symbols
// (\p{P}, \p{S}) and marks (\p{M}). Unlike Qwen's, these patterns do not
// cover every rune, so the scanners search for the next match as a regex
// does, and the text between matches stays a piece of its own.
const (
	deepseekDigitPattern = `\p{N}{1,3}`
	deepseekCJKPattern   = "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"
	deepseekSplitPattern = "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
)

// numberRun matches \p{N}{1,max}.
type numberRun struct{ max int }

func (m numberRun) appendMatches(dst []span, s string) []span {
	for i := 0; i < len(s); {
		_, n, c := runeAt(s, i)
		if c != classNumber {
			i += n
			continue
		}
		j := i + n
		for k := 1; k < m.max && j < len(s); k++ {
			_, n2, c2 := runeAt(s, j)
			if c2 != classNumber {
				break
			}
			j += n2
		}
		dst = append(dst, span{i, j})
		i = j
	}
	return dst
}

// hanKanaRun matches [\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+.
type hanKanaRun struct{}

func isHanKana(r rune) bool {
	return (r >= 0x4e00 && r <= 0x9fa5) || (r >= 0x3040 && r <= 0x309f) || (r >= 0x30a0 && r <= 0x30ff)
}

func (hanKanaRun) appendMatches(dst []span, s string) []span {
	start := -1
	for i, r := range s {
		switch in := isHanKana(r); {
		case in && start < 0:
			start = i
		case !in && start >= 0:
			dst = append(dst, span{start, i})
			start = -1
		}
	}
	if start >= 0 {
		dst = append(dst, span{start, len(s)})
	}
	return dst
}

// deepseekScanner matches deepseekSplitPattern.
type deepseekScanner struct{}

// Rune properties the DeepSeek word pattern tests.
const (
	propLetterOrMark = 1 << iota // \p{L} or \p{M}
	propPunctOrSym               // \p{P} or \p{S}
)

var asciiProps = func() (t [utf8.RuneSelf]uint8) {
	for r := rune(0); r < utf8.RuneSelf; r++ {
		t[r] = props(r)
	}
	return t
}()

func props(r rune) uint8 {
	var p uint8
	if unicode.IsLetter(r) || unicode.IsMark(r) {
		p |= propLetterOrMark
	}
	if unicode.IsPunct(r) || unicode.IsSymbol(r) {
		p |= propPunctOrSym
	}
	return p
}

func propsAt(s string, i int) (rune, int, uint8) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1, asciiProps[c]
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	return r, n, props(r)
}

// runOf returns the byte length of the run of runes with property p at i.
func runOf(s string, i int, p uint8) int {
	j := i
	for j < len(s) {
		_, n, q := propsAt(s, j)
		if q&p == 0 {
			break
		}
		j += n
	}
	return j - i
}

func (deepseekScanner) appendMatches(dst []span, s string) []span {
	for i := 0; i < len(s); {
		if n := deepseekPiece(s, i); n > 0 {
			dst = append(dst, span{i, i + n})
			i += n
			continue
		}
		_, n := utf8.DecodeRuneInString(s[i:])
		i += n
	}
	return dst
}

// deepseekPiece returns the byte length of the match starting at i, or 0,
// trying the alternatives in the pattern's order.
func deepseekPiece(s string, i int) int {
	r, n, p := propsAt(s, i)
	// [!"#...~][A-Za-z]+ : ASCII punctuation and symbols, then ASCII letters
	if r < utf8.RuneSelf && p&propPunctOrSym != 0 {
		j := i + 1
		for j < len(s) && (s[j]|0x20 >= 'a' && s[j]|0x20 <= 'z') {
			j++
		}
		if j > i+1 {
			return j - i
		}
	}
	// [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+ : a mark may be taken by either
	// part, so a letter or mark starts the run itself
	if p&propLetterOrMark != 0 {
		return runOf(s, i, propLetterOrMark)
	}
	if r != '\r' && r != '\n' && p&propPunctOrSym == 0 && i+n < len(s) {
		if k := runOf(s, i+n, propLetterOrMark); k > 0 {
			return n + k
		}
	}
	// ` ?[\p{P}\p{S}]+[\r\n]*`
	j := i
	if r == ' ' {
		j++
	}
	if k := runOf(s, j, propPunctOrSym); k > 0 {
		j += k
		for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j - i
	}
	if _, _, c := runeAt(s, i); c != classSpace {
		return 0
	}
	return whitespacePiece(s, i)
}
