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

// streamChunk is a streamed event in vLLM's field order. Typed rather than
// a map: a live bench encodes one per token for every replica, on the CPU
// it shares with the router and the client.
type streamChunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []any  `json:"choices"`
	Usage   *usage `json:"usage,omitempty"`
}

// textChoice is a completion chunk's choice, chatChoice a chat chunk's.
type textChoice struct {
	Index        int    `json:"index"`
	Text         string `json:"text"`
	Logprobs     any    `json:"logprobs"`
	FinishReason any    `json:"finish_reason"`
	StopReason   any    `json:"stop_reason"`
}

type chatChoice struct {
	Index        int       `json:"index"`
	Delta        chatDelta `json:"delta"`
	Logprobs     any       `json:"logprobs"`
	FinishReason any       `json:"finish_reason"`
}

type chatDelta struct {
	Role    string `json:"role,omitempty"`
	Content string `json:"content"`
}

// chunk is one streamed token.
func (r *response) chunk(text string, last bool) streamChunk {
	if r.chat {
		return r.wrapChunk(chatChoice{Delta: chatDelta{Content: text}, FinishReason: finishReason(last)})
	}
	return r.wrapChunk(textChoice{Text: text, FinishReason: finishReason(last)})
}

// roleChunk opens a chat stream, as vLLM does when the first token is ready:
// the assistant role with empty content.
func (r *response) roleChunk() streamChunk {
	return r.wrapChunk(chatChoice{Delta: chatDelta{Role: "assistant"}})
}

func (r *response) wrapChunk(choice any) streamChunk {
	return streamChunk{ID: r.id, Object: r.object(true), Created: r.created, Model: r.model, Choices: []any{choice}}
}

// usageChunk is the final chunk stream_options.include_usage asks for.
func (r *response) usageChunk(n int) streamChunk {
	c, u := r.wrapChunk(nil), r.usage(n)
	c.Choices, c.Usage = []any{}, &u
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
