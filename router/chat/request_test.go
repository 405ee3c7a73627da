package chat

import (
	"errors"
	"slices"
	"testing"
)

// TestCompletionPrompts covers /v1/completions prompt forms: string, batch
// of strings, token ids, batch of token id lists, add_special_tokens, and
// refusals. String prompts are checked against the JS tokenizer's ids.
func TestCompletionPrompts(t *testing.T) {
	m, _ := loadFamily(t, "qwen3", Options{})
	ref := jsEncode(t, "qwen3", []string{"Hello, my dog is cute", "Zweite Zeile <|im_end|> 🙂"})
	cases := []struct {
		name string
		body string
		want [][]uint32
		err  error
	}{
		{"string", `{"model":"m","prompt":"Hello, my dog is cute"}`, ref[:1], nil},
		{"batch of strings", `{"prompt":["Hello, my dog is cute","Zweite Zeile <|im_end|> 🙂"]}`, ref, nil},
		{"token ids", `{"prompt":[1,2,151643]}`, [][]uint32{{1, 2, 151643}}, nil},
		{"batch of token ids", `{"prompt":[[5],[6,7]]}`, [][]uint32{{5}, {6, 7}}, nil},
		{"mixed batch", `{"prompt":["Hello, my dog is cute",[9]]}`, [][]uint32{ref[0], {9}}, nil},
		{"no special tokens", `{"prompt":"Hello, my dog is cute","add_special_tokens":false}`, ref[:1], nil},
		{"empty list", `{"prompt":[]}`, nil, ErrInvalidRequest},
		{"negative id", `{"prompt":[1,-2]}`, nil, ErrInvalidRequest},
		{"missing prompt", `{"model":"m"}`, nil, ErrInvalidRequest},
		{"prompt embeddings", `{"prompt_embeds":"AAAA"}`, nil, ErrUntokenizable},
	}
	for _, c := range cases {
		req, err := ParseRequest(PathCompletions, []byte(c.body))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		got, err := m.Tokenize(req)
		if !errors.Is(err, c.err) || (c.err == nil && !slices.EqualFunc(got, c.want, slices.Equal)) {
			t.Errorf("%s: got %v, %v; want %v, %v", c.name, got, err, c.want, c.err)
		}
	}
}

// TestRequestSurface covers what the router reads besides the prompt: LoRA
// adapters, cache_salt, the model default, and the requests it routes on
// load alone.
func TestRequestSurface(t *testing.T) {
	m, _ := loadFamily(t, "qwen3", Options{})
	cat := NewCatalog()
	cat.AddModel("qwen3", m)
	cat.AddAdapter("sql-lora", "qwen3")
	chat := `{"model":"sql-lora","cache_salt":"s3cr3t","messages":[{"role":"user","content":"hi"}]}`

	req, err := ParseRequest(PathChatCompletions, []byte(chat))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := cat.Tokenize(req)
	if err != nil {
		t.Fatal(err)
	}
	base, err := m.Tokenize(req)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Base != "qwen3" || tok.LoRA != "sql-lora" || tok.CacheSalt != "s3cr3t" || !slices.Equal(tok.Prompts[0], base[0]) {
		t.Errorf("adapter request: %+v", tok)
	}

	req, _ = ParseRequest(PathCompletions, []byte(`{"prompt":"x"}`))
	if tok, err := cat.Tokenize(req); err != nil || tok.Base != "qwen3" || tok.LoRA != "" {
		t.Errorf("request without model: %+v, %v", tok, err)
	}

	untokenizable := []struct{ path, body, reason string }{
		{"/v1/responses", `{"model":"qwen3","input":"hi"}`, "endpoint"},
		{"/v1/messages", `{"model":"qwen3","messages":[{"role":"user","content":"hi"}]}`, "endpoint"},
		{PathChatCompletions, `{"model":"qwen3","messages":[{"role":"user","content":[{"type":"text","text":"see"},{"type":"image_url","image_url":{"url":"data:,"}}]}]}`, "multimodal"},
		{PathChatCompletions, `{"model":"qwen3","messages":[{"role":"user","content":[{"input_audio":{"data":"AA","format":"wav"}}]}]}`, "multimodal"},
		{PathChatCompletions, `{"model":"other","messages":[]}`, "unknown_model"},
		{PathChatCompletions, `{"model":"qwen3","messages":[{"role":"user","content":"x"}],"tools":[{"type":"custom","custom":{"name":"c"}}]}`, "tool_type"},
	}
	for _, c := range untokenizable {
		req, err := ParseRequest(c.path, []byte(c.body))
		if err != nil {
			t.Fatalf("%s %s: %v", c.path, c.body, err)
		}
		_, err = cat.Tokenize(req)
		var u *UntokenizableError
		if !errors.As(err, &u) || u.Reason != c.reason || !errors.Is(err, ErrUntokenizable) {
			t.Errorf("%s %s: %v, want untokenizable %q", c.path, c.body, err, c.reason)
		}
		if c.path == "/v1/responses" && req.Model != "qwen3" {
			t.Errorf("model of an untokenizable request not read: %q", req.Model)
		}
	}

	for _, body := range []string{
		`{"cache_salt":"","messages":[]}`,
		`{"cache_salt":5,"messages":[]}`,
		`{"model":1,"messages":[]}`,
		`not json`,
		`[1]`,
	} {
		if _, err := ParseRequest(PathChatCompletions, []byte(body)); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%s: %v, want ErrInvalidRequest", body, err)
		}
	}

	for _, body := range []string{
		`{"messages":[{"role":"user","content":"x"}],"add_generation_prompt":true,"continue_final_message":true}`,
		`{"messages":[{"role":"user","content":[{"type":"nonsense"}]}]}`,
		`{"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"tokenize":true}}`,
		`{"messages":[{"content":"no role"}]}`,
	} {
		if _, err := m.RenderChat([]byte(body)); !errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%s: %v, want ErrInvalidRequest", body, err)
		}
	}
}

// TestLoneSurrogate checks that a lone UTF-16 surrogate escape, which
// Python keeps and the engine's tokenizer then refuses, is untokenizable
// here rather than silently replaced.
func TestLoneSurrogate(t *testing.T) {
	m, _ := loadFamily(t, "qwen3", Options{})
	_, err := m.RenderChat([]byte(`{"messages":[{"role":"user","content":"a\ud800b"}]}`))
	if err == nil {
		t.Fatal("a lone surrogate rendered")
	}
	if _, err := m.RenderChat([]byte(`{"messages":[{"role":"user","content":"\ud83d\ude00"}]}`)); err != nil {
		t.Fatalf("a surrogate pair was refused: %v", err)
	}
}

// TestMaxOutputTokens: the output bound vLLM applies to a request, its
// choices together, and none where vLLM's is the model's context length.
func TestMaxOutputTokens(t *testing.T) {
	for _, c := range []struct {
		path, body string
		want       int
	}{
		{PathCompletions, `{"prompt":"a"}`, 16},
		{PathCompletions, `{"prompt":"a","max_tokens":256}`, 256},
		{PathCompletions, `{"prompt":"a","max_tokens":256,"n":3}`, 768},
		{PathCompletions, `{"prompt":"a","max_tokens":null}`, 16},
		{PathCompletions, `{"prompt":"a","max_completion_tokens":9}`, 16}, // not a completion field
		{PathCompletions, `{"prompt":"a","max_tokens":0}`, 0},             // the engine refuses it
		{PathCompletions, `{"prompt":"a","max_tokens":"8"}`, 0},
		{PathChatCompletions, `{"messages":[]}`, 0},
		{PathChatCompletions, `{"messages":[],"max_tokens":100}`, 100},
		{PathChatCompletions, `{"messages":[],"max_tokens":100,"max_completion_tokens":50,"n":2}`, 100},
		{PathChatCompletions, `{"messages":[],"max_completion_tokens":50,"n":0}`, 50},
		{PathChatCompletions, `{"messages":[],"max_tokens":2.5}`, 0},
	} {
		req, err := ParseRequest(c.path, []byte(c.body))
		if err != nil {
			t.Fatalf("%s %s: %v", c.path, c.body, err)
		}
		if req.MaxOutputTokens != c.want {
			t.Errorf("%s %s: %d, want %d", c.path, c.body, req.MaxOutputTokens, c.want)
		}
	}
}
