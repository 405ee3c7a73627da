package bench

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/router/tokenizer"
)

func qwenTokenizer(t *testing.T) *tokenizer.Tokenizer {
	t.Helper()
	files := testenv.Tokenizer(t, "qwen3")
	tok, err := tokenizer.LoadWithConfig(files.TokenizerJSON, files.TokenizerConfig)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestExactSpanReencodesToLength checks vLLM's length adjustment: random
// ids, decoded and re-encoded, padded or cut, end as text that encodes to
// exactly the asked number of tokens, for every length the datasets use.
func TestExactSpanReencodesToLength(t *testing.T) {
	tok := qwenTokenizer(t)
	w := SeedWorkload()
	b := textBuilder{tok: tok, rng: rand.New(rand.NewPCG(w.Seed, 1))}
	for _, n := range []int{1, 64, 128, 2048, 6144} {
		ids, ok, err := b.exactSpan(n)
		if err != nil {
			t.Fatal(err)
		}
		text, err := b.decode(ids)
		if err != nil {
			t.Fatal(err)
		}
		again, err := tok.Encode(text, false)
		if err != nil {
			t.Fatal(err)
		}
		if !ok || len(ids) != n || len(again) != n {
			t.Errorf("span of %d: ok %v, %d ids, text re-encodes to %d", n, ok, len(ids), len(again))
		}
	}
}

// TestTextWorkloadPrefixRepetition builds the demo's prefix_repetition in
// text form: every prompt is prefix + suffix decoded, re-encoding to the
// asked 2,176 tokens (the junction may merge across, which the workload
// counts), prompts sharing a prefix share its text, and the order is
// shuffled (prompts 0..11 do not all share one prefix).
func TestTextWorkloadPrefixRepetition(t *testing.T) {
	tok := qwenTokenizer(t)
	w := DemoWorkload(SeedWorkload())
	w.NumPrompts, w.NumPrefixes = 120, 10
	tw, err := buildTextWorkload(w, tok)
	if err != nil {
		t.Fatal(err)
	}
	if tw.Len() != 120 {
		t.Fatalf("%d prompts, want 120", tw.Len())
	}
	exact := 0
	groups := map[string]int{}
	for i := range tw.Len() {
		ids := tw.Prompt(i, nil)
		if len(ids) == w.PrefixLen+w.SuffixLen {
			exact++
		}
		// The first 2,000 tokens' text identifies the prefix.
		head, err := tok.Decode(ids[:2000], false)
		if err != nil {
			t.Fatal(err)
		}
		groups[head]++
	}
	if exact+tw.mismatched != tw.Len() || tw.mismatched > tw.Len()/10 {
		t.Errorf("%d prompts of exactly %d tokens, %d counted off length, of %d", exact, w.PrefixLen+w.SuffixLen,
			tw.mismatched, tw.Len())
	}
	if len(groups) != 10 {
		t.Errorf("%d distinct prefixes, want 10", len(groups))
	}
	for head, n := range groups {
		if n != 12 {
			t.Errorf("a prefix (%.20q...) heads %d prompts, want 12", head, n)
		}
	}
	first := tw.Text(0)[:200]
	same := 0
	for i := range 12 {
		if strings.HasPrefix(tw.Text(i), first) {
			same++
		}
	}
	if same == 12 {
		t.Error("the first 12 prompts all share one prefix: not shuffled")
	}
}

// TestTextWorkloadNoneAndZipf: none's prompts are fresh and of exact
// length; zipf's hottest prefix heads the most prompts.
func TestTextWorkloadNoneAndZipf(t *testing.T) {
	tok := qwenTokenizer(t)
	none := Workload{Dataset: DatasetNone, NumPrompts: 20, PrefixLen: 200, SuffixLen: 56, OutputLen: 8, Seed: 3,
		Prompts: PromptsText, BlockSize: 64}
	tw, err := buildTextWorkload(none, tok)
	if err != nil {
		t.Fatal(err)
	}
	for i := range tw.Len() {
		if n := len(tw.Prompt(i, nil)); n != 256 {
			t.Errorf("none prompt %d: %d tokens, want 256", i, n)
		}
	}
	z := Workload{Dataset: DatasetZipf, NumPrompts: 200, NumPrefixes: 20, PrefixLen: 128, SuffixLen: 16, OutputLen: 8,
		ZipfS: 1.1, Seed: 2, Prompts: PromptsText, BlockSize: 64}
	tw, err = buildTextWorkload(z, tok)
	if err != nil {
		t.Fatal(err)
	}
	groups := map[string]int{}
	for i := range tw.Len() {
		head, err := tok.Decode(tw.Prompt(i, nil)[:100], false)
		if err != nil {
			t.Fatal(err)
		}
		groups[head]++
	}
	most := 0
	for _, n := range groups {
		most = max(most, n)
	}
	if most < 200/20*3 {
		t.Errorf("zipf's hottest prefix heads %d of 200 prompts, want well above the uniform 10", most)
	}
}
