package tokenizer

import (
	"strings"
	"testing"
)

// TestScannerMatchesRegex runs every hand-written scanner and regexp2 (the
// oracle) on generated texts and on a slice of the real corpus, and requires
// the same matches.
func TestScannerMatchesRegex(t *testing.T) {
	texts := generatedTexts(500)
	texts = append(texts, edgeTexts...)
	if !testing.Short() {
		corpus := realCorpus(t)
		texts = append(texts, corpus[:len(corpus)/8]...)
	}
	for pattern, fast := range scanners {
		oracle, err := newRegexMatcher(pattern)
		if err != nil {
			t.Fatal(err)
		}
		bad, skipped := 0, 0
		for _, s := range texts {
			if strings.HasPrefix(pattern, "(?i:") && longSFolds(s) {
				skipped++
				continue
			}
			got, want := fast.appendMatches(nil, s), oracle.appendMatches(nil, s)
			if !equalSpans(got, want) {
				bad++
				if bad <= 3 {
					t.Errorf("pattern %.30q on %q:\n got %v\nwant %v", pattern, clip(s), pieces(s, got), pieces(s, want))
				}
			}
		}
		if bad > 0 {
			t.Errorf("%d of %d texts split differently", bad, len(texts))
		}
		t.Logf("%.20q: %d texts split identically, %d with \"'ſ\" left to TestJSDivergence", pattern, len(texts)-skipped, skipped)
	}
}

// edgeTexts are hand-picked inputs at the edges of each alternative,
// including the ones where the JS reference diverges.
var edgeTexts = []string{
	"", " ", "  ", "\n", "a", "'", "'s", "'S", "'Ll", "'lL", "'rE", "'x", "''s", "'ſt", "'ſ", "x'ſx",
	"a  b", "a \tb", "a\t\tb", " \n \n x", "\r\n\r\n", "  \r  \n  ", "end   ", "\u00a0x", "\u3000\u3000x",
	" !!!\n\n", "!!!\r\n\r\nx", " 1234567", "١٢٣٤٥", "x\u0085y", "x \u0085 y", "\ufeffBOM", " \ufeffc",
	"\u2028\u2029", "a\u200db", "e\u0301\u0301", "  😀", "😀😀 x", "\t1", " \t!", "\v\fa", "x\u2009\u2009y",
}

func equalSpans(a, b []span) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func pieces(s string, spans []span) []string {
	var out []string
	for _, sp := range spans {
		out = append(out, s[sp.start:sp.end])
	}
	return out
}
