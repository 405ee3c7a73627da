package scoring

import (
	"errors"
	"fmt"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
)

// Chat is the Prompter for the whole OpenAI surface vLLM serves, through
// package chat: completions (text, token ids, batches), chat messages
// rendered with the model's template, LoRA adapters by model name.
//
// Requests package chat cannot tokenize route on load alone, and so do two
// kinds it can, because the router cannot yet key their blocks as the
// engine does: a cache_salt (vLLM mixes it into the first block's extra
// keys) and a template error (vLLM answers those with 400 itself; the
// router must not refuse what the engine might accept).
type Chat struct {
	Catalog *chat.Catalog
}

var _ Prompter = (*Chat)(nil)

// Prompt implements Prompter. A body vLLM would refuse is an error wrapping
// chat.ErrInvalidRequest.
func (c *Chat) Prompt(path string, body []byte) (*Request, error) {
	r, err := chat.ParseRequest(path, body)
	if err != nil {
		return nil, fmt.Errorf("reading %s request: %w", path, err)
	}
	if r.CacheSalt != "" {
		return untokenizable("cache_salt")
	}
	toks, err := c.Catalog.Tokenize(r)
	switch {
	case errors.Is(err, chat.ErrUntokenizable):
		reason := err.Error()
		var ue *chat.UntokenizableError
		if errors.As(err, &ue) {
			reason = ue.Reason
		}
		return untokenizable(reason)
	case errors.Is(err, chat.ErrTemplate):
		return untokenizable("template_error")
	case err != nil:
		return nil, fmt.Errorf("tokenizing %s request: %w", path, err)
	case len(toks.Prompts) == 0 || len(toks.Prompts[0]) == 0:
		return untokenizable("empty_prompt")
	}
	// vLLM serves a completion batch on one engine: its first prompt routes it.
	return &Request{Tokens: toks.Prompts[0], LoRA: toks.LoRA}, nil
}

// ChatFromConfig builds the Chat prompter the configuration describes: the
// model's tokenizer files and its LoRA adapters. Without tokenizer files
// every request routes on load alone (reason "unknown_model").
func ChatFromConfig(cfg *config.Config) (*Chat, error) {
	cat := chat.NewCatalog()
	if cfg.Tokenizer.JSON != "" {
		m, err := chat.LoadModel(cfg.Tokenizer.JSON, cfg.Tokenizer.Config, chat.Options{})
		if err != nil {
			return nil, fmt.Errorf("loading the tokenizer of %s: %w", cfg.Model, err)
		}
		cat.AddModel(cfg.Model, m)
	}
	for _, a := range cfg.LoRAAdapters {
		cat.AddAdapter(a, cfg.Model)
	}
	return &Chat{Catalog: cat}, nil
}
