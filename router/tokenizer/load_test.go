package tokenizer

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// TestLoadRejectsUnsupported edits one component of the real Qwen3 file at a
// time and expects a load error wrapping ErrUnsupported that names it.
func TestLoadRejectsUnsupported(t *testing.T) {
	data, err := os.ReadFile(testenv.Tokenizer(t, "qwen3").TokenizerJSON)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		field, value, name string
	}{
		{"normalizer", `{"type":"Lowercase"}`, "Lowercase"},
		{"normalizer", `{"type":"Sequence","normalizers":[{"type":"NFC"},{"type":"Replace","pattern":{"String":" "},"content":"_"}]}`, "Replace"},
		{"pre_tokenizer", `{"type":"Metaspace","replacement":"_"}`, "Metaspace"},
		{"pre_tokenizer", `{"type":"Sequence","pretokenizers":[{"type":"Whitespace"},{"type":"ByteLevel"}]}`, "Whitespace"},
		{"pre_tokenizer", `{"type":"Split","pattern":{"String":" "},"behavior":"Fuzzy","invert":false}`, "Fuzzy"},
		{"pre_tokenizer", `{"type":"Split","pattern":{"Regex":"\\s+"},"behavior":"Isolated","invert":false}`, "ByteLevel"},
		{"post_processor", `{"type":"RobertaProcessing","sep":["</s>",2],"cls":["<s>",0]}`, "RobertaProcessing"},
		{"decoder", `{"type":"WordPiece","prefix":"##"}`, "WordPiece"},
		{"decoder", `null`, "null"},
		{"model", `{"type":"Unigram","vocab":[]}`, "Unigram"},
		{"model", withField(t, doc["model"], "byte_fallback", true), "byte_fallback"},
		{"model", withField(t, doc["model"], "dropout", 0.1), "dropout"},
		{"model", withField(t, doc["model"], "continuing_subword_prefix", "##"), "continuing_subword_prefix"},
		{"truncation", `{"max_length":512,"strategy":"LongestFirst","stride":0,"direction":"Right"}`, "truncation"},
		{"padding", `{"strategy":"BatchLongest","direction":"Right","pad_id":0,"pad_token":"<pad>"}`, "padding"},
	}
	for _, c := range cases {
		t.Run(c.field+"/"+c.name, func(t *testing.T) {
			edited := map[string]json.RawMessage{}
			for k, v := range doc {
				edited[k] = v
			}
			edited[c.field] = json.RawMessage(c.value)
			out, err := json.Marshal(edited)
			if err != nil {
				t.Fatal(err)
			}
			_, err = Parse(out)
			if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), c.name) {
				t.Fatalf("Parse with an edited %s: got error %v, want ErrUnsupported naming %q", c.field, err, c.name)
			}
		})
	}
}

// withField returns a JSON object with one field set.
func withField(t *testing.T, obj json.RawMessage, key string, value any) string {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(obj, &m); err != nil {
		t.Fatal(err)
	}
	m[key] = value
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestLoadFacts checks the public lookups against facts stated in TESTING.md
// and in the files themselves.
func TestLoadFacts(t *testing.T) {
	tk, err := Load(testenv.Tokenizer(t, "qwen3").TokenizerJSON)
	if err != nil {
		t.Fatal(err)
	}
	if got := tk.VocabSize(); got != 151669 {
		t.Errorf("VocabSize = %d, want 151669 (151,643 BPE tokens + 26 added)", got)
	}
	if id, ok := tk.TokenToID("Hello"); !ok || id != 9707 {
		t.Errorf(`TokenToID("Hello") = %d, %v; want 9707`, id, ok)
	}
	if id, ok := tk.TokenToID("<|im_start|>"); !ok || id != 151644 {
		t.Errorf(`TokenToID("<|im_start|>") = %d, %v; want 151644`, id, ok)
	}
	if tok, ok := tk.IDToToken(220); !ok || tok != "Ġ" {
		t.Errorf("IDToToken(220) = %q, %v; want the byte-level space Ġ", tok, ok)
	}
	if _, ok := tk.IDToToken(1 << 30); ok {
		t.Error("IDToToken accepted an id beyond the vocabulary")
	}
	special := 0
	for _, a := range tk.AddedTokens() {
		if a.Special {
			special++
		}
	}
	if n := len(tk.AddedTokens()); n != 26 || special != 14 {
		t.Errorf("%d added tokens, %d special; want 26 and 14", n, special)
	}
	if _, err := Load("testdata/does-not-exist.json"); err == nil {
		t.Error("Load of a missing file succeeded")
	}
}
