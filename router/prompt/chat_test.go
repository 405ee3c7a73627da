package prompt_test

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/prompt"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// qwenCatalog serves the real Qwen3 tokenizer and chat template as model
// "qwen", with one LoRA adapter on top, built the way the router builds it
// from its configuration.
func qwenCatalog(t testing.TB) *chat.Catalog {
	t.Helper()
	files := testenv.Tokenizer(t, "qwen3")
	p, err := prompt.ChatFromConfig(&config.Config{Model: "qwen", LoRAAdapters: []string{"sql-adapter"},
		Tokenizer: config.Tokenizer{JSON: files.TokenizerJSON, Config: files.TokenizerConfig}})
	if err != nil {
		t.Fatal(err)
	}
	return p.Catalog
}

// TestChatWithoutTokenizer: a router configured without tokenizer files
// routes every request on load alone, and still refuses malformed bodies.
func TestChatWithoutTokenizer(t *testing.T) {
	p, err := prompt.ChatFromConfig(&config.Config{Model: "qwen"})
	if err != nil {
		t.Fatal(err)
	}
	r, err := p.Prompt(chat.PathCompletions, []byte(`{"model":"qwen","prompt":[1,2,3]}`))
	if !errors.Is(err, scoring.ErrUntokenizable) || r == nil || r.Untokenizable != "unknown_model" {
		t.Errorf("got %+v, %v", r, err)
	}
	if _, err := p.Prompt(chat.PathCompletions, []byte(`[`)); err == nil || errors.Is(err, scoring.ErrUntokenizable) {
		t.Errorf("malformed body: %v", err)
	}
	if _, err := prompt.ChatFromConfig(&config.Config{Model: "qwen", Tokenizer: config.Tokenizer{JSON: "/nonexistent", Config: "/nonexistent"}}); err == nil {
		t.Error("loaded a tokenizer from a missing file")
	}
}

// TestChatFromS3 loads the real Qwen3 tokenizer files from S3 (moto), where
// the Run:ai Model Streamer deployment keeps them beside the weights, and
// tokenizes a completion and a chat request to the same ids as the files
// read from disk.
func TestChatFromS3(t *testing.T) {
	files := testenv.Tokenizer(t, "qwen3")
	m := testenv.StartMoto(t)
	m.SetEnv(t)
	t.Setenv("AWS_ENDPOINT_URL_S3", m.URL)
	for key, path := range map[string]string{"tokenizer.json": files.TokenizerJSON, "tokenizer_config.json": files.TokenizerConfig} {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		m.PutObject(t, "models", "qwen3/rev1/"+key, data)
	}
	fromS3, err := prompt.ChatFromConfig(&config.Config{Model: "qwen",
		Tokenizer: config.Tokenizer{JSON: "s3://models/qwen3/rev1/tokenizer.json", Config: "s3://models/qwen3/rev1/tokenizer_config.json"}})
	if err != nil {
		t.Fatal(err)
	}
	fromDisk := &prompt.Chat{Catalog: qwenCatalog(t)}
	for _, req := range []struct{ path, body string }{
		{chat.PathCompletions, `{"model":"qwen","prompt":"Hello, my dog is cute"}`},
		{chat.PathChatCompletions, `{"model":"qwen","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello, my dog is cute"}]}`},
	} {
		got, err := fromS3.Prompt(req.path, []byte(req.body))
		if err != nil {
			t.Fatalf("%s from S3: %v", req.path, err)
		}
		want, err := fromDisk.Prompt(req.path, []byte(req.body))
		if err != nil {
			t.Fatalf("%s from disk: %v", req.path, err)
		}
		if len(got.Tokens) == 0 || !slices.Equal(got.Tokens, want.Tokens) {
			t.Errorf("%s: ids from S3 %v, from disk %v", req.path, got.Tokens, want.Tokens)
		}
	}
	missing := "s3://models/qwen3/rev2/tokenizer.json"
	_, err = prompt.ChatFromConfig(&config.Config{Model: "qwen", Tokenizer: config.Tokenizer{JSON: missing, Config: "s3://models/qwen3/rev1/tokenizer_config.json"}})
	if err == nil || !strings.Contains(err.Error(), "reading tokenizer.json: reading "+missing+": S3 answered NoSuchKey") {
		t.Errorf("a tokenizer.json missing from the bucket: %v", err)
	}
}

// TestChatPrompter reads every request form through package chat with the
// real Qwen3 files. The ids of the text prompt are the JS reference's
// (TESTING.md), not this code's.
func TestChatPrompter(t *testing.T) {
	cat := qwenCatalog(t)
	p := &prompt.Chat{Catalog: cat}
	_, _, qwen, err := cat.Resolve("qwen")
	if err != nil {
		t.Fatal(err)
	}
	hello := []uint32{9707, 11, 847, 5562, 374, 18838}
	for _, tc := range []struct {
		name, path, body string
		tokens           []uint32
		more             []string // a batch's further prompts, as texts
		lora             string
		untokenizable    string
		invalid          bool
		salted           bool
	}{
		{name: "text", path: chat.PathCompletions, body: `{"model":"qwen","prompt":"Hello, my dog is cute"}`, tokens: hello},
		{name: "text batch", path: chat.PathCompletions, body: `{"model":"qwen","prompt":["Hello, my dog is cute","x","y z"]}`, tokens: hello, more: []string{"x", "y z"}},
		{name: "ids", path: chat.PathCompletions, body: `{"model":"qwen","prompt":[5,6,7]}`, tokens: []uint32{5, 6, 7}},
		{name: "lora", path: chat.PathCompletions, body: `{"model":"sql-adapter","prompt":[1,2]}`, tokens: []uint32{1, 2}, lora: "sql-adapter"},
		{name: "chat", path: chat.PathChatCompletions, body: `{"model":"qwen","messages":[{"role":"user","content":"Hello, my dog is cute"}]}`},
		{name: "cache salt", path: chat.PathCompletions, body: `{"model":"qwen","prompt":"a","cache_salt":"s"}`, tokens: []uint32{64}, salted: true},
		{name: "unknown model", path: chat.PathCompletions, body: `{"model":"other","prompt":"a"}`, untokenizable: "unknown_model"},
		{name: "image", path: chat.PathChatCompletions, body: `{"model":"qwen","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://x/y.png"}}]}]}`, untokenizable: "?"},
		{name: "not json", path: chat.PathCompletions, body: `{"prompt":`, invalid: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := p.Prompt(tc.path, []byte(tc.body))
			switch {
			case tc.invalid:
				if err == nil || errors.Is(err, scoring.ErrUntokenizable) || r != nil {
					t.Fatalf("invalid body: %+v, %v", r, err)
				}
			case tc.untokenizable != "":
				if !errors.Is(err, scoring.ErrUntokenizable) || r == nil || r.Untokenizable == "" || len(r.Tokens) > 0 ||
					(tc.untokenizable != "?" && r.Untokenizable != tc.untokenizable) {
					t.Fatalf("want a routable request untokenizable for %q, got %+v, %v", tc.untokenizable, r, err)
				}
			case tc.tokens == nil: // chat: the template frames the message
				if err != nil {
					t.Fatal(err)
				}
				text, err := qwen.Tokenizer().Decode(r.Tokens, false)
				if err != nil || !strings.HasPrefix(text, "<|im_start|>user\nHello, my dog is cute<|im_end|>") {
					t.Fatalf("chat prompt renders as %q (%v)", text, err)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(r.Tokens, tc.tokens) || r.LoRA != tc.lora || (len(r.Extra) == 1) != tc.salted {
					t.Fatalf("got %v lora %q extra %q, want %v lora %q salted %v", r.Tokens, r.LoRA, r.Extra, tc.tokens, tc.lora, tc.salted)
				}
				// A batch's further prompts carry the ids each has alone.
				var more [][]uint32
				for _, text := range tc.more {
					alone, err := p.Prompt(chat.PathCompletions, []byte(`{"model":"qwen","prompt":"`+text+`"}`))
					if err != nil {
						t.Fatal(err)
					}
					more = append(more, alone.Tokens)
				}
				if !slices.EqualFunc(r.More, more, slices.Equal) {
					t.Fatalf("further prompts %v, want %v", r.More, more)
				}
			}
		})
	}
}
