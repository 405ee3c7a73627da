package tokenizer

import (
	"testing"
	"unicode/utf8"
)

// FuzzScanner checks the hand-written scanner against regexp2 on arbitrary
// valid UTF-8, for both digit limits. go test runs the seeds; run
// go test -fuzz FuzzScanner ./router/tokenizer/ to search further.
func FuzzScanner(f *testing.F) {
	for _, s := range edgeTexts {
		f.Add(s)
	}
	for _, s := range generatedTexts(3) {
		f.Add(s)
	}
	oracles := map[int]*regexMatcher{}
	for digits, pattern := range map[int]string{1: qwenSplitPattern, 3: llama3SplitPattern} {
		m, err := newRegexMatcher(pattern)
		if err != nil {
			f.Fatal(err)
		}
		oracles[digits] = m
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) || longSFolds(s) {
			t.Skip("Encode rejects invalid UTF-8; \"'ſ\" is beyond regexp2 (see longSFolds)")
		}
		for digits, oracle := range oracles {
			got := wordScanner{maxDigits: digits}.appendMatches(nil, s)
			if want := oracle.appendMatches(nil, s); !equalSpans(got, want) {
				t.Fatalf("maxDigits %d on %q: scanner %q, regex %q", digits, s, pieces(s, got), pieces(s, want))
			}
		}
	})
}
