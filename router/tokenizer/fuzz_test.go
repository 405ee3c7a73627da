package tokenizer

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzScanner checks every hand-written scanner against regexp2 on arbitrary
// valid UTF-8. go test runs the seeds; run
// go test -fuzz FuzzScanner ./router/tokenizer/ to search further.
func FuzzScanner(f *testing.F) {
	for _, s := range edgeTexts {
		f.Add(s)
	}
	for _, s := range generatedTexts(3) {
		f.Add(s)
	}
	oracles := map[string]*regexMatcher{}
	for pattern := range scanners {
		m, err := newRegexMatcher(pattern)
		if err != nil {
			f.Fatal(err)
		}
		oracles[pattern] = m
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			t.Skip("Encode rejects invalid UTF-8")
		}
		for pattern, oracle := range oracles {
			if strings.HasPrefix(pattern, "(?i:") && longSFolds(s) {
				continue // beyond regexp2, see longSFolds
			}
			got := scanners[pattern].appendMatches(nil, s)
			if want := oracle.appendMatches(nil, s); !equalSpans(got, want) {
				t.Fatalf("pattern %.30q on %q: scanner %q, regex %q", pattern, s, pieces(s, got), pieces(s, want))
			}
		}
	})
}
