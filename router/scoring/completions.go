package scoring

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/llmd-dev/terraform-provider-llmd/router/tokenizer"
)

// Completions is the Prompter for POST /v1/completions: a prompt given as a
// string, a list of token ids, or a batch of either (vLLM serves a batch on
// one engine, so it is routed by its first prompt). Everything else package
// chat covers is refused as untokenizable until it replaces this type: chat
// messages, cache_salt (which vLLM mixes into the first block's hash) and
// add_special_tokens overrides other than the default.
type Completions struct {
	// Tokenizer encodes text prompts; nil makes them untokenizable.
	Tokenizer *tokenizer.Tokenizer
	// BaseModel is the served model name; any other "model" is a LoRA
	// adapter, whose name goes into the block keys.
	BaseModel string
}

var _ Prompter = (*Completions)(nil)

// completionsBody is the part of a completions body routing reads.
type completionsBody struct {
	Model            string          `json:"model"`
	Prompt           json.RawMessage `json:"prompt"`
	CacheSalt        *string         `json:"cache_salt"`
	AddSpecialTokens *bool           `json:"add_special_tokens"`
}

// Prompt implements Prompter.
func (c *Completions) Prompt(path string, body []byte) (*Request, error) {
	if path != "/v1/completions" {
		return untokenizable("only /v1/completions is tokenized until package chat lands, not "+path, "")
	}
	var b completionsBody
	if err := json.Unmarshal(body, &b); err != nil {
		return nil, fmt.Errorf("decoding completions request: %w", err)
	}
	lora := ""
	if b.Model != "" && b.Model != c.BaseModel {
		lora = b.Model
	}
	if b.CacheSalt != nil {
		return untokenizable("cache_salt changes the engine's block hashes", "")
	}
	text, ids, err := firstPrompt(b.Prompt)
	if err != nil {
		return nil, err
	}
	if ids != nil {
		return &Request{Tokens: ids, LoRA: lora}, nil
	}
	if err := tokenizer.CheckJSONText(body); err != nil {
		return untokenizable(err.Error(), "")
	}
	addSpecial := b.AddSpecialTokens == nil || *b.AddSpecialTokens
	if c.Tokenizer == nil {
		return untokenizable("no tokenizer loaded", text)
	}
	toks, err := c.Tokenizer.Encode(text, addSpecial)
	if err != nil {
		if errors.Is(err, tokenizer.ErrUntokenizable) {
			return untokenizable(err.Error(), "")
		}
		return nil, fmt.Errorf("tokenizing prompt: %w", err)
	}
	return &Request{Tokens: toks, LoRA: lora, Text: text}, nil
}

// firstPrompt reads the prompt as text or token ids, taking the first of a
// batch.
func firstPrompt(raw json.RawMessage) (text string, ids []uint32, err error) {
	if len(raw) == 0 {
		return "", nil, errors.New("completions request has no prompt")
	}
	if json.Unmarshal(raw, &text) == nil {
		return text, nil, nil
	}
	if json.Unmarshal(raw, &ids) == nil && len(ids) > 0 {
		return "", ids, nil
	}
	var texts []string
	if json.Unmarshal(raw, &texts) == nil && len(texts) > 0 {
		return texts[0], nil, nil
	}
	var batch [][]uint32
	if json.Unmarshal(raw, &batch) == nil && len(batch) > 0 && len(batch[0]) > 0 {
		return "", batch[0], nil
	}
	return "", nil, errors.New("completions prompt is neither text, token ids, nor a non-empty batch of them")
}
