package tokenizer

import (
	"slices"
	"strings"
	"testing"
)

// longSFolds reports whether s holds "'ſ": Oniguruma's (?i) folds U+017F
// LATIN SMALL LETTER LONG S to "s" (Unicode CaseFolding.txt, status C), so
// Hugging Face splits "'ſ" as a contraction; regexp2, the regex oracle, and
// the JS port do not. The scanner follows Oniguruma. No vocabulary here has a
// token joining "ſ" to what follows, so the ids agree with the JS reference
// anyway; only the split differs, and TestJSDivergence pins it down.
func longSFolds(s string) bool { return strings.Contains(s, "'\u017f") }

// TestJSDivergence pins down each case where the JS reference departs from
// Hugging Face's tokenizers (see jsDiverges): our ids follow the Oniguruma
// semantics of the Rust library, as the regex oracle does, and differ from the
// JS port's. If the reference stops diverging on a case, this test says so.
func TestJSDivergence(t *testing.T) {
	cases := []struct {
		v         variant
		text, why string
	}{
		{qwen3V, "a \ufeffc", "U+FEFF is \\s in JavaScript, not in Oniguruma"},
		{qwen3V, " \u0085x", "U+0085 is \\s in Oniguruma, not in JavaScript"},
		{llama3V, "x  \u0085", "U+0085 is \\s in Oniguruma, not in JavaScript"},
		{deepseekV, "a \U0001FA8F`s", "U+1FA8F is assigned (So) in node's Unicode 17, unassigned in Unicode 15.0"},
	}
	// One node process per family, not per case.
	byFamily := map[string][]string{}
	for _, c := range cases {
		if !jsDiverges(c.text) {
			t.Errorf("jsDiverges(%q) = false; %s", c.text, c.why)
		}
		byFamily[c.v.family] = append(byFamily[c.v.family], c.text)
	}
	js := map[string][]uint32{}
	for family, texts := range byFamily {
		for i, ids := range runReference(t, family, refOptions{}, texts) {
			js[texts[i]] = ids
		}
	}
	for _, c := range cases {
		got, err := c.v.load(t, true).Encode(c.text, false)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(got, js[c.text]) {
			t.Errorf("%s %q: the JS reference now agrees (%v), so %q no longer holds: update jsDiverges", c.v.name, c.text, got, c.why)
		}
		if oracle, _ := c.v.load(t, false).Encode(c.text, false); !slices.Equal(got, oracle) {
			t.Errorf("%s %q: ids %v, regex oracle %v", c.v.name, c.text, got, oracle)
		}
	}
}

// TestLongSContraction: "'ſ" is split as a contraction, as Oniguruma's case
// folding does (see longSFolds), with both digit limits.
func TestLongSContraction(t *testing.T) {
	for _, max := range []int{1, 3} {
		got := pieces("x'ſhello 'ſ", wordScanner{maxDigits: max}.appendMatches(nil, "x'ſhello 'ſ"))
		if want := []string{"x", "'ſ", "hello", " '", "ſ"}; !slices.Equal(got, want) {
			t.Errorf("maxDigits %d: split %q, want %q", max, got, want)
		}
	}
}
