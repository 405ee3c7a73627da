package tokenizer

import (
	"encoding/json"
	"os"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// editedFamily loads a family's tokenizer.json after edit has changed it.
func editedFamily(t *testing.T, family string, edit func(doc map[string]json.RawMessage)) *Tokenizer {
	t.Helper()
	data, err := os.ReadFile(testenv.Tokenizer(t, family).TokenizerJSON)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc)
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := Parse(out)
	if err != nil {
		t.Fatalf("loading edited %s: %v", family, err)
	}
	return tk
}

// TestIgnoreMerges: Llama 3 sets ignore_merges, so a piece that is itself in
// the vocabulary is one token even where merging its bytes would end
// elsewhere. The test finds such pieces in the vocabulary, checks that
// turning the flag off changes their ids, and that ours match the JS
// reference (which implements the flag) with it on.
func TestIgnoreMerges(t *testing.T) {
	on := llama3V.load(t, true)
	off := editedFamily(t, "llama3", func(doc map[string]json.RawMessage) {
		doc["model"] = json.RawMessage(withField(t, doc["model"], "ignore_merges", false))
	})
	var words []string
	scanner := wordScanner{maxDigits: 3}
	for raw := range on.model.vocab {
		if len(raw) < 2 || !utf8.ValidString(raw) || len(scanner.appendMatches(nil, raw)) != 1 {
			continue
		}
		if ids, _ := off.Encode(raw, false); len(ids) > 1 {
			words = append(words, raw)
		}
	}
	if len(words) == 0 {
		t.Fatal("no vocabulary piece merges differently without ignore_merges; the test cannot show the flag matters")
	}
	slices.Sort(words)
	found := len(words)
	words = words[:min(found, 200)]
	want := runReference(t, "llama3", refOptions{}, words)
	for i, w := range words {
		got, _ := on.Encode(w, false)
		if id := on.model.vocab[w]; !slices.Equal(got, []uint32{id}) || !slices.Equal(got, want[i]) {
			t.Errorf("%q: ids %v, want the single vocabulary id %d (JS reference %v)", w, got, id, want[i])
		}
	}
	t.Logf("%d vocabulary pieces merge differently without ignore_merges; checked %d against the JS reference", found, len(words))
}

// TestNormalizedAddedToken: an added token with normalized=true is matched in
// the NFC text, so a decomposed spelling finds it; with normalized=false it
// is matched in the raw text only. (The JS reference matches every added
// token in the raw text, so this follows Hugging Face's documented semantics.)
func TestNormalizedAddedToken(t *testing.T) {
	for _, normalized := range []bool{true, false} {
		tk := editedFamily(t, "qwen3", func(doc map[string]json.RawMessage) {
			var added []map[string]any
			if err := json.Unmarshal(doc["added_tokens"], &added); err != nil {
				t.Fatal(err)
			}
			added = append(added, map[string]any{"id": 151669, "content": "café!", "single_word": false,
				"lstrip": false, "rstrip": false, "normalized": normalized, "special": false})
			doc["added_tokens"], _ = json.Marshal(added)
		})
		composed, _ := tk.Encode("x café!", false)
		decomposed, _ := tk.Encode("x cafe\u0301!", false)
		if !slices.Contains(composed, 151669) || slices.Contains(decomposed, 151669) != normalized {
			t.Errorf("normalized=%v: composed %v, decomposed %v", normalized, composed, decomposed)
		}
	}
}
