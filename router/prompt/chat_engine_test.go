package prompt_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
	"github.com/llmd-dev/terraform-provider-llmd/router/chat/canary"
	"github.com/llmd-dev/terraform-provider-llmd/router/prompt"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// standInEngine answers POST /tokenize as vLLM does, with ids from the real
// Qwen3 model, optionally off by one in the last id. It stands in for a vLLM
// pod whose tokenizer disagrees with ours, which no real part here can do.
type standInEngine struct {
	model    *chat.Model
	disagree atomic.Bool
	calls    atomic.Int64
}

func (e *standInEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/tokenize" {
		http.NotFound(w, r)
		return
	}
	e.calls.Add(1)
	body, _ := io.ReadAll(r.Body)
	var probe struct {
		Messages json.RawMessage `json:"messages"`
	}
	_ = json.Unmarshal(body, &probe)
	path := chat.PathCompletions
	if probe.Messages != nil {
		path = chat.PathChatCompletions
	}
	req, err := chat.ParseRequest(path, body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	ids, err := e.model.Tokenize(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	tokens := slices.Clone(ids[0])
	if e.disagree.Load() {
		tokens[len(tokens)-1]++
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"tokens": tokens, "count": len(tokens)})
}

// TestChatEnginePath: while the parity canary finds the engine's ids differ
// from ours, the prompter routes with the engine's ids (one tokenize call per
// request); when a later round agrees it is back in process; an engine that
// cannot answer on the engine path makes requests route on load alone.
func TestChatEnginePath(t *testing.T) {
	cat := qwenCatalog(t)
	_, _, qwen, err := cat.Resolve("qwen")
	if err != nil {
		t.Fatal(err)
	}
	engine := &standInEngine{model: qwen}
	srv := httptest.NewServer(engine)
	defer srv.Close()
	guard := canary.New(canary.Config{Model: "qwen", Local: qwen, Pod: func() string { return srv.URL }})
	p := &prompt.Chat{Catalog: cat, Guard: guard}
	body := []byte(`{"model":"qwen","messages":[{"role":"user","content":"Hello, my dog is cute"}]}`)
	local, err := p.Prompt(chat.PathChatCompletions, body)
	if err != nil {
		t.Fatal(err)
	}

	engine.disagree.Store(true)
	if res, err := guard.Check(t.Context()); res != canary.Mismatch {
		t.Fatalf("canary round with a disagreeing engine: %s, %v", res, err)
	}
	before := engine.calls.Load()
	viaEngine, err := p.Prompt(chat.PathChatCompletions, body)
	if err != nil {
		t.Fatal(err)
	}
	want := slices.Clone(local.Tokens)
	want[len(want)-1]++
	if !slices.Equal(viaEngine.Tokens, want) || engine.calls.Load() != before+1 {
		t.Fatalf("engine path: ids %v after %d calls, want the engine's %v after one call", viaEngine.Tokens, engine.calls.Load()-before, want)
	}

	engine.disagree.Store(false)
	if res, err := guard.Check(t.Context()); res != canary.Agree {
		t.Fatalf("canary round with an agreeing engine: %s, %v", res, err)
	}
	before = engine.calls.Load()
	back, err := p.Prompt(chat.PathChatCompletions, body)
	if err != nil || !slices.Equal(back.Tokens, local.Tokens) || engine.calls.Load() != before {
		t.Fatalf("after agreement: %v, %v, %d engine calls; want in-process ids and no call", back, err, engine.calls.Load()-before)
	}

	engine.disagree.Store(true)
	if res, _ := guard.Check(t.Context()); res != canary.Mismatch {
		t.Fatal("canary did not switch to the engine path again")
	}
	srv.Close()
	r, err := p.Prompt(chat.PathChatCompletions, body)
	if !errors.Is(err, scoring.ErrUntokenizable) || r == nil || r.Untokenizable != "engine_tokenize_failed" {
		t.Fatalf("engine gone on the engine path: %+v, %v; want untokenizable engine_tokenize_failed", r, err)
	}
}
