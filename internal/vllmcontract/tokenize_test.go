package vllmcontract

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
	"github.com/llmd-dev/terraform-provider-llmd/router/chat/canary"
	"github.com/llmd-dev/terraform-provider-llmd/router/prompt"
)

// words are the pieces the generated texts are made of: what most often
// splits a tokenizer from another (spaces before words, runs of spaces and
// newlines, digits, contractions, accents, CJK, emoji with joiners, markup,
// code, and the chat template's own special tokens as plain text).
var words = []string{"the", " quick", "brown", "fox", "’s", "'ll", "don't", "  ", "\n", "\n\n", "\t", " 12345", "3.14",
	"Héllo", "naïve", "日本語", "中文", "한국어", "🦊", "👩‍💻", "<b>", "&amp;", "</tool_call>", "<|im_start|>", "{\"a\": 1}",
	"def f(x):\n    return x", "    ", "¿Qué?", "Ωμέγα", "ﬁ", "e\u0301", "tab\tbed", "EOF", "...", "—", "\u00a0"}

// text is a random text of up to n pieces.
func text(r *rand.Rand, n int) string {
	var b strings.Builder
	for i := r.IntN(n) + 1; i > 0; i-- {
		w := words[r.IntN(len(words))]
		if r.IntN(3) == 0 {
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
	return b.String()
}

// content is a message's content as a string or as text parts.
func content(r *rand.Rand) any {
	if r.IntN(4) != 0 {
		return text(r, 12)
	}
	parts := []map[string]any{}
	for i := r.IntN(3) + 1; i > 0; i-- {
		parts = append(parts, map[string]any{"type": "text", "text": text(r, 6)})
	}
	return parts
}

var tools = []map[string]any{
	{"type": "function", "function": map[string]any{"name": "get_weather", "description": "Weather <now> & 'later' in a city",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}}},
	{"type": "function", "function": map[string]any{"name": "search", "description": "Search the web: 日本 🦊",
		"parameters": map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}, "n": map[string]any{"type": "integer"}}}}},
}

// chatCase is one chat request: a system prompt or none, one to four
// turns (assistant turns with thinking or tool calls, tool answers),
// tools, the generation prompt on or off, thinking switched off.
func chatCase(r *rand.Rand) map[string]any {
	var msgs []map[string]any
	if r.IntN(2) == 0 {
		msgs = append(msgs, map[string]any{"role": "system", "content": text(r, 10)})
	}
	turns := r.IntN(4) + 1
	for i := 0; i < turns; i++ {
		msgs = append(msgs, map[string]any{"role": "user", "content": content(r)})
		if i == turns-1 && r.IntN(3) != 0 {
			break
		}
		switch r.IntN(3) {
		case 0:
			msgs = append(msgs, map[string]any{"role": "assistant", "content": "<think>\n" + text(r, 6) + "\n</think>\n\n" + text(r, 8)})
		case 1:
			msgs = append(msgs, map[string]any{"role": "assistant", "content": "", "tool_calls": []map[string]any{{"id": fmt.Sprintf("call_%d", i),
				"type": "function", "function": map[string]any{"name": "get_weather", "arguments": `{"city": "` + text(r, 2) + `"}`}}}},
				map[string]any{"role": "tool", "tool_call_id": fmt.Sprintf("call_%d", i), "content": text(r, 6)})
		default:
			msgs = append(msgs, map[string]any{"role": "assistant", "content": content(r)})
		}
	}
	body := map[string]any{"model": servedName, "messages": msgs}
	if r.IntN(3) == 0 {
		// A fleet without --enable-auto-tool-choice refuses the default
		// "auto" (vLLM answers 400); "none" still renders the tools into
		// the prompt unless --exclude-tools-when-tool-choice-none is set.
		body["tools"], body["tool_choice"] = tools[:r.IntN(2)+1], "none"
	}
	if msgs[len(msgs)-1]["role"] != "user" || r.IntN(5) == 0 {
		body["add_generation_prompt"] = r.IntN(2) == 0
	}
	if r.IntN(6) == 0 {
		body["chat_template_kwargs"] = map[string]any{"enable_thinking": false}
	}
	return body
}

// TestTokenIDsAreTheEngines tokenizes 320 requests (240 chats, 80
// completions) in process, as the router routes them, and compares the ids
// with the real engine's: its /tokenize (the canary's path) and its render
// endpoint (the ids vLLM would serve the same body with).
func TestTokenIDsAreTheEngines(t *testing.T) {
	e := engines(t)[0]
	p, err := prompt.ChatFromConfig(routerConfig(t, testFleet(), nil))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(35, 2))
	type tc struct {
		path string
		body map[string]any
	}
	var cases []tc
	for i := 0; i < 240; i++ {
		cases = append(cases, tc{chat.PathChatCompletions, chatCase(r)})
	}
	for i := 0; i < 80; i++ {
		cases = append(cases, tc{chat.PathCompletions, map[string]any{"model": servedName, "prompt": text(r, 40)}})
	}
	mismatches := 0
	for i, c := range cases {
		b, _ := json.Marshal(c.body)
		req, err := p.Prompt(c.path, b)
		if err != nil {
			t.Fatalf("case %d: the router cannot tokenize %s: %v", i, b, err)
		}
		rendered := engineRender(t, e.URL, c.path, c.body)
		tokenized := engineTokenize(t, e.URL, c.body)
		ours := make([]int, len(req.Tokens))
		for j, id := range req.Tokens {
			ours[j] = int(id)
		}
		if !slices.Equal(ours, rendered) || !slices.Equal(ours, tokenized) {
			mismatches++
			if mismatches <= 5 {
				t.Errorf("case %d %s %s:\n router %v\n render %v\n tokenize %v", i, c.path, b, ours, rendered, tokenized)
			}
		}
	}
	if mismatches > 0 {
		t.Errorf("%d of %d requests tokenized unlike vLLM %s", mismatches, len(cases), testenv.VLLMVersion)
	}
}

// engineRender asks the engine for the ids it would serve body with.
func engineRender(t *testing.T, url, path string, body map[string]any) []int {
	t.Helper()
	status, out := post(t, url+path+"/render", body)
	if status != http.StatusOK {
		t.Fatalf("render: %d %s", status, out)
	}
	if path == chat.PathCompletions {
		var batch []struct {
			TokenIDs []int `json:"token_ids"`
		}
		if err := json.Unmarshal(out, &batch); err != nil || len(batch) != 1 {
			t.Fatalf("render answer %s: %v", out, err)
		}
		return batch[0].TokenIDs
	}
	var one struct {
		TokenIDs []int `json:"token_ids"`
	}
	if err := json.Unmarshal(out, &one); err != nil {
		t.Fatalf("render answer %s: %v", out, err)
	}
	return one.TokenIDs
}

// engineTokenize asks the engine's /tokenize, which takes a completion's
// prompt or a chat's messages and template arguments.
func engineTokenize(t *testing.T, url string, body map[string]any) []int {
	t.Helper()
	status, out := post(t, url+"/tokenize", body)
	if status != http.StatusOK {
		t.Fatalf("tokenize: %d %s", status, out)
	}
	var got struct{ Tokens []int }
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("tokenize answer %s: %v", out, err)
	}
	return got.Tokens
}

// TestCanaryAgreesWithTheEngine runs the router's tokenizer parity canary
// against the real engine: it agrees with the model's own template, and a
// template one space away from the engine's is caught.
func TestCanaryAgreesWithTheEngine(t *testing.T) {
	e := engines(t)[0]
	model := testenv.VLLM(t).Model
	load := func(opts chat.Options) *canary.Guard {
		m, err := chat.LoadModel(filepath.Join(model, "tokenizer.json"), filepath.Join(model, "tokenizer_config.json"), opts)
		if err != nil {
			t.Fatal(err)
		}
		return canary.New(canary.Config{Model: servedName, Local: m, Pod: func() string { return e.URL }})
	}
	if res, err := load(chat.Options{}).Check(context.Background()); res != canary.Agree {
		t.Errorf("the canary with the model's own template: %s (%v), want %s", res, err, canary.Agree)
	}
	b, err := os.ReadFile(filepath.Join(model, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		ChatTemplate string `json:"chat_template"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	const genPrompt = `'<|im_start|>assistant\n'`
	if !strings.Contains(cfg.ChatTemplate, genPrompt) {
		t.Fatalf("the model's template has no %s to change", genPrompt)
	}
	off := strings.Replace(cfg.ChatTemplate, genPrompt, `'<|im_start|>assistant \n'`, 1)
	g := load(chat.Options{ChatTemplate: off})
	if res, _ := g.Check(context.Background()); res != canary.Mismatch || !g.OnEnginePath() {
		t.Errorf("the canary with a template unlike the engine's: %s (engine path %v), want %s and the engine path", res, g.OnEnginePath(), canary.Mismatch)
	}
}
