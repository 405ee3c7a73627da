package sim

import (
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/router/tokenizer"
)

// TestOutputTokensAreQwenLetters checks the output vocabulary against the
// real Qwen tokenizer: each id the simulator generates decodes to the text
// it streams, so a client may count tokens either way.
func TestOutputTokensAreQwenLetters(t *testing.T) {
	tok, err := tokenizer.Load(testenv.Tokenizer(t, "qwen3").TokenizerJSON)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint32]bool{}
	for i := range 2000 {
		id := outputToken(42, i)
		seen[id] = true
		text, err := tok.Decode([]uint32{id}, false)
		if err != nil {
			t.Fatal(err)
		}
		if text != tokenText(id) || len(text) != 1 || text[0] < 'a' || text[0] > 'z' {
			t.Fatalf("id %d decodes to %q, simulator streams %q", id, text, tokenText(id))
		}
		if ids, err := tok.Encode(text, false); err != nil || len(ids) != 1 || ids[0] != id {
			t.Fatalf("%q encodes to %v (%v), want [%d]", text, ids, err, id)
		}
	}
	if len(seen) != numLetters {
		t.Fatalf("2000 output tokens used %d distinct ids, want all %d letters", len(seen), numLetters)
	}
}
