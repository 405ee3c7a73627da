package scoring_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
	"github.com/llmd-dev/terraform-provider-llmd/router/tokenizer"
)

func qwen(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	tok, err := tokenizer.Load(testenv.Tokenizer(t, "qwen3").TokenizerJSON)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestCompletionsPrompt reads every prompt form of /v1/completions with the
// real Qwen3 tokenizer. The expected ids of the text prompt are the JS
// reference's (TESTING.md), not this code's.
func TestCompletionsPrompt(t *testing.T) {
	c := &scoring.Completions{Tokenizer: qwen(t), BaseModel: "qwen"}
	hello := []uint32{9707, 11, 847, 5562, 374, 18838}
	for _, tc := range []struct {
		name, path, body string
		tokens           []uint32
		lora             string
		untokenizable    bool
		malformed        bool
	}{
		{"text", "/v1/completions", `{"model":"qwen","prompt":"Hello, my dog is cute"}`, hello, "", false, false},
		{"text batch", "/v1/completions", `{"prompt":["Hello, my dog is cute","x"]}`, hello, "", false, false},
		{"ids", "/v1/completions", `{"prompt":[5,6,7]}`, []uint32{5, 6, 7}, "", false, false},
		{"id batch", "/v1/completions", `{"prompt":[[8,9],[1]]}`, []uint32{8, 9}, "", false, false},
		{"lora", "/v1/completions", `{"model":"sql-adapter","prompt":[1,2]}`, []uint32{1, 2}, "sql-adapter", false, false},
		{"cache salt", "/v1/completions", `{"prompt":"a","cache_salt":"s"}`, nil, "", true, false},
		{"lone surrogate", "/v1/completions", `{"prompt":"a\ud800b"}`, nil, "", true, false},
		{"chat", "/v1/chat/completions", `{"messages":[]}`, nil, "", true, false},
		{"not json", "/v1/completions", `{"prompt":`, nil, "", false, true},
		{"no prompt", "/v1/completions", `{"model":"qwen"}`, nil, "", false, true},
		{"bad prompt", "/v1/completions", `{"prompt":{"a":1}}`, nil, "", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := c.Prompt(tc.path, []byte(tc.body))
			switch {
			case tc.malformed:
				if err == nil || errors.Is(err, scoring.ErrUntokenizable) || r != nil {
					t.Fatalf("malformed body: %v, %v", r, err)
				}
			case tc.untokenizable:
				if !errors.Is(err, scoring.ErrUntokenizable) || r == nil || r.Untokenizable == "" || len(r.Tokens) > 0 {
					t.Fatalf("want a routable untokenizable request, got %+v, %v", r, err)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(r.Tokens, tc.tokens) || r.LoRA != tc.lora {
					t.Fatalf("got %v lora %q, want %v lora %q", r.Tokens, r.LoRA, tc.tokens, tc.lora)
				}
			}
		})
	}
}
