package testenv

import (
	"encoding/json"
	"os"
	"testing"
)

// TestQwenTokenizerFiles loads the real Qwen vocabulary and checks the facts the
// tokenizer work relies on (TESTING.md): 151,643 base tokens, 151,387 merges,
// 26 added tokens, an NFC normalizer.
func TestQwenTokenizerFiles(t *testing.T) {
	mf := Tokenizer(t, "qwen3")
	raw, err := os.ReadFile(mf.TokenizerJSON)
	if err != nil {
		t.Fatal(err)
	}
	var tj struct {
		Model struct {
			Type   string            `json:"type"`
			Vocab  map[string]int    `json:"vocab"`
			Merges []json.RawMessage `json:"merges"`
		} `json:"model"`
		AddedTokens []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
		} `json:"added_tokens"`
		Normalizer struct {
			Type string `json:"type"`
		} `json:"normalizer"`
	}
	if err := json.Unmarshal(raw, &tj); err != nil {
		t.Fatalf("decoding %s: %v", mf.TokenizerJSON, err)
	}
	if tj.Model.Type != "BPE" || len(tj.Model.Vocab) != 151643 || len(tj.Model.Merges) != 151387 || len(tj.AddedTokens) != 26 || tj.Normalizer.Type != "NFC" {
		t.Fatalf("qwen3 tokenizer.json: model %s, %d vocab, %d merges, %d added, normalizer %s; want BPE, 151643, 151387, 26, NFC",
			tj.Model.Type, len(tj.Model.Vocab), len(tj.Model.Merges), len(tj.AddedTokens), tj.Normalizer.Type)
	}
	if id := tj.Model.Vocab["Hello"]; id != 9707 {
		t.Errorf(`vocab["Hello"] = %d, want 9707`, id)
	}
}
