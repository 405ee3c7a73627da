package sim

import "strings"

// response builds the JSON bodies of one completion in vLLM's shapes.
type response struct {
	chat         bool
	id, model    string
	created      int64
	promptTokens int
}

func (r *response) usage(n int) usage {
	return usage{PromptTokens: r.promptTokens, CompletionTokens: n, TotalTokens: r.promptTokens + n}
}

func (r *response) object(stream bool) string {
	switch {
	case r.chat && stream:
		return "chat.completion.chunk"
	case r.chat:
		return "chat.completion"
	}
	return "text_completion"
}

func finishReason(last bool) any {
	if last {
		return "length" // every request runs to max_tokens
	}
	return nil
}

// chunk is one streamed token.
func (r *response) chunk(text string, last bool) map[string]any {
	choice := map[string]any{"index": 0, "logprobs": nil, "finish_reason": finishReason(last)}
	if r.chat {
		choice["delta"] = map[string]any{"content": text}
	} else {
		choice["text"] = text
		choice["stop_reason"] = nil
	}
	return r.wrapChunk(choice)
}

// roleChunk opens a chat stream, as vLLM does when the first token is ready:
// the assistant role with empty content.
func (r *response) roleChunk() map[string]any {
	return r.wrapChunk(map[string]any{"index": 0, "logprobs": nil, "finish_reason": nil,
		"delta": map[string]any{"role": "assistant", "content": ""}})
}

func (r *response) wrapChunk(choice map[string]any) map[string]any {
	return map[string]any{"id": r.id, "object": r.object(true), "created": r.created, "model": r.model,
		"choices": []any{choice}}
}

// usageChunk is the final chunk stream_options.include_usage asks for.
func (r *response) usageChunk(n int) map[string]any {
	c := r.wrapChunk(nil)
	c["choices"], c["usage"] = []any{}, r.usage(n)
	return c
}

// whole is the non-streamed response for output ids.
func (r *response) whole(ids []uint32) map[string]any {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(tokenText(id))
	}
	choice := map[string]any{"index": 0, "logprobs": nil, "finish_reason": "length"}
	if r.chat {
		choice["message"] = map[string]any{"role": "assistant", "content": b.String()}
	} else {
		choice["text"] = b.String()
		choice["stop_reason"] = nil
	}
	return map[string]any{"id": r.id, "object": r.object(false), "created": r.created, "model": r.model,
		"choices": []any{choice}, "usage": r.usage(len(ids))}
}
