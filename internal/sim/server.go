package sim

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
)

// maxModelLen is Qwen2.5-7B-Instruct's max_position_embeddings, reported
// where vLLM reports max_model_len.
const maxModelLen = 32768

// Handler serves the replica's OpenAI-compatible HTTP surface
// (PROTOCOLS.md section 4) and its /metrics.
func (rp *Replica) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/completions", rp.completions)
	mux.HandleFunc("POST /v1/chat/completions", rp.chatCompletions)
	mux.HandleFunc("POST /v1/completions/render", rp.completionRender)
	mux.HandleFunc("POST /v1/chat/completions/render", rp.chatRender)
	mux.HandleFunc("POST /tokenize", rp.tokenize)
	mux.HandleFunc("GET /v1/models", rp.models)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	mux.HandleFunc("POST /reset_prefix_cache", func(w http.ResponseWriter, _ *http.Request) {
		rp.resetPrefixCache()
		w.WriteHeader(http.StatusOK)
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(rp.metrics.reg, promhttp.HandlerOpts{}))
	return mux
}

// models lists the base model and, as vLLM does, each adapter with the base
// model as its parent.
func (rp *Replica) models(w http.ResponseWriter, _ *http.Request) {
	now := time.Now().Unix()
	data := []map[string]any{{"id": rp.cfg.Model, "object": "model", "created": now, "owned_by": "vllm",
		"root": rp.cfg.Model, "parent": nil, "max_model_len": maxModelLen}}
	for _, a := range rp.cfg.Adapters {
		data = append(data, map[string]any{"id": a, "object": "model", "created": now, "owned_by": "vllm",
			"root": a, "parent": rp.cfg.Model, "max_model_len": maxModelLen})
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": data})
}

// encode tokenizes text, or explains that this replica runs without a tokenizer.
func (rp *Replica) encode(text string, addSpecial bool) ([]uint32, error) {
	if rp.tok == nil {
		return nil, badRequest("this simulated replica has no tokenizer (start it with --tokenizer): send prompts as token ids")
	}
	ids, err := rp.tok.Encode(text, addSpecial)
	if err != nil {
		return nil, badRequest("tokenizing prompt: %v", err)
	}
	return ids, nil
}

// chatTokens renders a chat request body (of /v1/chat/completions, its
// render endpoint or chat-form /tokenize) with the model's template and
// tokenizes it, as vLLM does.
func (rp *Replica) chatTokens(body []byte) ([]uint32, error) {
	if rp.cfg.Chat == nil {
		return nil, badRequest("this simulated replica has no chat template (start it with --tokenizer-config)")
	}
	req, err := chat.ParseRequest(chat.PathChatCompletions, body)
	if err != nil {
		return nil, badRequest("%v", err)
	}
	ids, err := rp.cfg.Chat.Tokenize(req)
	if err != nil {
		return nil, badRequest("rendering chat: %v", err)
	}
	return ids[0], nil
}

// adapter returns the LoRA adapter a request's model names ("" for the
// base model), or vLLM's 404 for a model it does not serve.
func (rp *Replica) adapter(model string) (string, error) {
	if model == "" || model == rp.cfg.Model {
		return "", nil
	}
	if slices.Contains(rp.cfg.Adapters, model) {
		return model, nil
	}
	return "", &httpError{status: http.StatusNotFound, msg: "The model `" + model + "` does not exist."}
}

// readPrompt reads a completions request (chat false) or a chat request and
// its prompt's token ids. It answers a bad request itself and then reports
// false.
func (rp *Replica) readPrompt(w http.ResponseWriter, r *http.Request, chat bool) (g genRequest, body []byte, ids []uint32, ok bool) {
	body, err := readBody(r, &g)
	if err == nil {
		g.lora, err = rp.adapter(g.Model)
	}
	if err == nil && g.CacheSalt != nil && *g.CacheSalt == "" {
		err = badRequest("Parameter 'cache_salt' must be a non-empty string if provided.")
	}
	if err == nil && chat {
		ids, err = rp.chatTokens(body)
	} else if err == nil {
		ids, err = rp.promptTokens(g.Prompt)
	}
	if err != nil {
		writeError(w, err)
		return g, nil, nil, false
	}
	return g, body, ids, true
}

func (rp *Replica) completions(w http.ResponseWriter, r *http.Request) {
	if g, _, ids, ok := rp.readPrompt(w, r, false); ok {
		rp.generate(w, r, &g, ids, false)
	}
}

func (rp *Replica) chatCompletions(w http.ResponseWriter, r *http.Request) {
	if g, _, ids, ok := rp.readPrompt(w, r, true); ok {
		rp.generate(w, r, &g, ids, true)
	}
}

// completionRender answers /v1/completions/render: the prompt's token ids
// as /v1/completions would run them.
func (rp *Replica) completionRender(w http.ResponseWriter, r *http.Request) {
	if _, _, ids, ok := rp.readPrompt(w, r, false); ok {
		writeJSON(w, http.StatusOK, map[string]any{"prompt_token_ids": ids})
	}
}

// promptTokens is a completion prompt's ids: given, or tokenized with the
// special tokens vLLM adds for completions.
func (rp *Replica) promptTokens(p *prompt) ([]uint32, error) {
	switch {
	case p == nil:
		return nil, badRequest("prompt is required")
	case p.isText:
		return rp.encode(p.text, true)
	}
	return p.tokens, nil
}

// chatRender answers /v1/chat/completions/render: the rendered prompt and its ids.
func (rp *Replica) chatRender(w http.ResponseWriter, r *http.Request) {
	_, body, ids, ok := rp.readPrompt(w, r, true)
	if !ok {
		return
	}
	text, err := rp.cfg.Chat.RenderChat(body)
	if err != nil {
		writeError(w, badRequest("rendering chat: %v", err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"prompt": text, "prompt_token_ids": ids})
}

func (rp *Replica) tokenize(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Prompt           *string         `json:"prompt"`
		Messages         json.RawMessage `json:"messages"`
		AddSpecialTokens *bool           `json:"add_special_tokens"`
	}
	raw, err := readBody(r, &body)
	if err != nil {
		writeError(w, err)
		return
	}
	var ids []uint32
	switch {
	case body.Prompt != nil:
		ids, err = rp.encode(*body.Prompt, body.AddSpecialTokens == nil || *body.AddSpecialTokens)
	case body.Messages != nil:
		ids, err = rp.chatTokens(raw)
	default:
		err = badRequest("tokenize needs a prompt or messages")
	}
	if err != nil {
		writeError(w, err)
		return
	}
	if ids == nil {
		ids = []uint32{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"count": len(ids), "max_model_len": maxModelLen, "tokens": ids, "token_strs": nil})
}

// generate runs one request on the engine and answers it, streamed as
// server-sent events or whole.
func (rp *Replica) generate(w http.ResponseWriter, r *http.Request, g *genRequest, ids []uint32, chat bool) {
	n, err := g.maxTokens()
	if err == nil && len(ids) == 0 {
		err = badRequest("prompt must not be empty")
	}
	if err != nil {
		writeError(w, err)
		return
	}
	var salt string
	if g.CacheSalt != nil {
		salt = *g.CacheSalt
	}
	lr := rp.submit(ids, n, g.lora, salt, g.Priority)
	resp := response{chat: chat, model: rp.cfg.Model, created: time.Now().Unix(), promptTokens: len(ids)}
	if chat {
		resp.id = completionID("chatcmpl-", lr.r.ID)
	} else {
		resp.id = completionID("cmpl-", lr.r.ID)
	}
	if g.Stream {
		rp.stream(w, r, lr, &resp, g.StreamOptions != nil && g.StreamOptions.IncludeUsage)
		return
	}
	var out []uint32
	for {
		more, done, err := lr.wait(r.Context(), len(out))
		if errors.Is(err, errClientGone) {
			rp.abort(lr)
			return
		}
		out = append(out, more...)
		if err != nil {
			writeError(w, requestError(err))
			return
		}
		if done {
			break
		}
	}
	writeJSON(w, http.StatusOK, resp.whole(out))
}

// stream answers a request as server-sent events. Like vLLM it sends the
// headers as soon as the engine took the request, long before the first
// token of a queued one; a refused request gets a plain error.
func (rp *Replica) stream(w http.ResponseWriter, r *http.Request, lr *liveReq, resp *response, includeUsage bool) {
	if err := lr.waitAdmitted(r.Context()); err != nil {
		if errors.Is(err, errClientGone) {
			rp.abort(lr)
			return
		}
		writeError(w, requestError(err))
		return
	}
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush()
	}
	have := 0
	for {
		more, done, err := lr.wait(r.Context(), have)
		if errors.Is(err, errClientGone) {
			rp.abort(lr)
			return
		}
		if err != nil {
			// Headers are gone: the error travels as an event, as vLLM sends it.
			writeEvent(w, errorBody(requestError(err)))
			includeUsage = false
			break
		}
		if have == 0 && len(more) > 0 && resp.chat {
			writeEvent(w, resp.roleChunk())
		}
		for i, id := range more {
			writeEvent(w, resp.chunk(tokenText(id), done && i == len(more)-1))
		}
		have += len(more)
		if flusher != nil {
			flusher.Flush()
		}
		if done {
			break
		}
	}
	if includeUsage {
		writeEvent(w, resp.usageChunk(have))
	}
	_, _ = w.Write([]byte("data: [DONE]\n\n"))
	if flusher != nil {
		flusher.Flush()
	}
}

func writeEvent(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	_, _ = w.Write(append(append([]byte("data: "), b...), "\n\n"...))
}
