package tokenizer

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"
)

// TestUntokenizable: lone surrogates, which Python would keep and Hugging
// Face's Rust tokenizer would refuse, must never become different ids.
func TestUntokenizable(t *testing.T) {
	tk := qwen3V.load(t, true)
	// WTF-8 (a surrogate encoded as if it were a scalar value) and stray bytes.
	for _, s := range []string{"a\xed\xa0\x80b", "\xff", "ok \xe4\xbd"} {
		if ids, err := tk.Encode(s, false); !errors.Is(err, ErrUntokenizable) {
			t.Errorf("Encode(%q) = %v, %v; want ErrUntokenizable", s, ids, err)
		}
	}
	lone := []byte(`{"prompt": "x\ud800y"}`)
	var decoded struct{ Prompt string }
	if err := json.Unmarshal(lone, &decoded); err != nil || decoded.Prompt != "x\ufffdy" {
		t.Fatalf("encoding/json no longer replaces lone surrogates (%q, %v): revisit CheckJSONText", decoded.Prompt, err)
	}
	for _, doc := range []string{`{"p":"\ud800"}`, `["\udc00x"]`, `"\uDBFF\u0041"`, `"a\\\ud800"`, `"\ud83d"`} {
		if err := CheckJSONText([]byte(doc)); !errors.Is(err, ErrUntokenizable) {
			t.Errorf("CheckJSONText(%s) = %v; want ErrUntokenizable", doc, err)
		}
	}
	for _, doc := range []string{`{"p":"\ud83d\ude00 fine"}`, `"\\ud800 is escaped text"`, `{"p":"\u00e9\n"}`, `"plain"`} {
		if err := CheckJSONText([]byte(doc)); err != nil {
			t.Errorf("CheckJSONText(%s) = %v; want nil", doc, err)
		}
	}
}

// TestQwen25Variant: without the four tokens after 151664, "<think>" is
// ordinary text; with them it is one id.
func TestQwen25Variant(t *testing.T) {
	q3, q25 := qwen3V.load(t, true), qwen25V.load(t, true)
	a, _ := q3.Encode("<think>x</think>", false)
	b, _ := q25.Encode("<think>x</think>", false)
	if !slices.Equal(a, []uint32{151667, 87, 151668}) || len(b) <= 3 || slices.Contains(b, 151667) {
		t.Errorf("qwen3 %v, qwen2.5 %v: want <think> as 151667 only in qwen3", a, b)
	}
	if q25.VocabSize() != 151665 {
		t.Errorf("qwen2.5 VocabSize = %d, want 151665", q25.VocabSize())
	}
}

// TestAddSpecial: the TemplateProcessing post-processor adds
// <|begin_of_text|> only when asked; ByteLevel post-processors add nothing.
func TestAddSpecial(t *testing.T) {
	tmpl := llama3TemplateV.load(t, true)
	plain, _ := tmpl.Encode("Hi", false)
	with, _ := tmpl.Encode("Hi", true)
	if !slices.Equal(with, append([]uint32{128000}, plain...)) || !slices.Equal(tmpl.SpecialPrefix(), []uint32{128000}) {
		t.Errorf("llama3 with template: %v with special, %v without; want 128000 prepended", with, plain)
	}
	q := qwen3V.load(t, true)
	a, _ := q.Encode("Hi", false)
	b, _ := q.Encode("Hi", true)
	if !slices.Equal(a, b) {
		t.Errorf("qwen3 (ByteLevel post-processor) adds ids: %v vs %v", a, b)
	}
}

// TestDecodeRoundTrip: decoding the ids of a text gives back its NFC form,
// and a character cut between tokens decodes to one U+FFFD.
func TestDecodeRoundTrip(t *testing.T) {
	tk := qwen3V.load(t, true)
	for _, s := range generatedTexts(50) {
		ids, err := tk.Encode(s, false)
		if err != nil {
			t.Fatal(err)
		}
		got, err := tk.Decode(ids, false)
		if err != nil || got != norm.NFC.String(s) {
			t.Fatalf("Decode(Encode(%q)) = %q, %v", s, got, err)
		}
	}
	ids, _ := tk.Encode("<|im_start|>user\n😀<|im_end|>", false)
	if got, _ := tk.Decode(ids, true); got != "user\n😀" {
		t.Errorf("Decode skipping special tokens = %q", got)
	}
	var cut []uint32
	for _, c := range []string{"🫨", "𓀀", "ꙮ", "𝔘"} {
		if ids, _ := tk.Encode(c, false); len(ids) > 1 {
			cut = ids
			break
		}
	}
	if cut == nil {
		t.Fatal("no candidate character is split across tokens; add one")
	}
	if got, _ := tk.Decode(cut[:1], false); got != "\ufffd" {
		t.Errorf("Decode of a cut character = %q, want one U+FFFD", got)
	}
	if _, err := tk.Decode([]uint32{1 << 30}, false); err == nil {
		t.Error("Decode accepted an id beyond the vocabulary")
	}
}

// TestAddedTokenOptions checks lstrip, rstrip and single_word with Hugging
// Face's semantics (the JS reference ignores single_word, so it cannot judge
// this): stripped white space is absorbed by the token, and a single_word
// token inside a word is left to BPE.
func TestAddedTokenOptions(t *testing.T) {
	toks := []AddedToken{
		{ID: 1, Content: "<L>", LStrip: true},
		{ID: 2, Content: "<R>", RStrip: true},
		{ID: 3, Content: "WORD", SingleWord: true},
		{ID: 4, Content: "<a>"},
		{ID: 5, Content: "<ab>"},
	}
	m := newAddedMatcher(toks)
	cases := map[string]string{
		"x  <L>y":      "x|  <L>:1|y",
		"x<R> \n y":    "x|<R> \n :2|y",
		"a WORD b":     "a |WORD:3| b",
		"aWORD b":      "aWORD b",
		"WORD_":        "WORD_",
		"WORD.":        "WORD:3|.",
		"<ab><a>":      "<ab>:5|<a>:4",
		"  <L>  <R>  ": "  <L>:1|  |<R>  :2",
	}
	for in, want := range cases {
		var parts []string
		for _, p := range m.split(nil, in) {
			if p.token >= 0 {
				parts = append(parts, p.text+":"+string(rune('0'+toks[p.token].ID)))
			} else {
				parts = append(parts, p.text)
			}
		}
		if got := strings.Join(parts, "|"); got != want {
			t.Errorf("split(%q) = %q, want %q", in, got, want)
		}
	}
}
