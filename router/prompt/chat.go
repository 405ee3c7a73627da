package prompt

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
	"github.com/llmd-dev/terraform-provider-llmd/router/chat/canary"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
	"github.com/llmd-dev/terraform-provider-llmd/router/objectfile"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
	"github.com/llmd-dev/terraform-provider-llmd/router/tokenizer"
)

// untokenizable builds the routable Request for a prompt without token ids.
func untokenizable(reason string) (*scoring.Request, error) {
	return &scoring.Request{Untokenizable: reason}, fmt.Errorf("%w: %s", scoring.ErrUntokenizable, reason)
}

// Chat is the Prompter for the whole OpenAI surface vLLM serves, through
// package chat: completions (text, token ids, batches), chat messages
// rendered with the model's template, LoRA adapters by model name.
//
// A request under an adapter keys its blocks from the adapter's root, and a
// cache_salt is the first block's extra key, as the index keys the engine's
// events (kvevents.SaltExtraKeys). Requests package chat cannot tokenize
// route on load alone, and so does a template error (vLLM answers those with
// 400 itself; the router must not refuse what the engine might accept).
//
// While the parity canary (Guard) finds the in-process ids differ from the
// engine's, requests are tokenized by a pod instead: a wrong id costs every
// prefix hit, an HTTP round trip costs milliseconds.
type Chat struct {
	Catalog *chat.Catalog
	// Guard is the served model's parity canary; nil keeps every request in process.
	Guard *canary.Guard
	// Cache is the served model's tokenizer prefix cache, for Collector;
	// nil when off.
	Cache *tokenizer.PrefixCache

	turns turns // ChatFromConfig's: one per core
}

// engineTokenizeTimeout bounds a request's wait for a pod's tokenizer on the
// engine path; past it the request routes on load alone.
const engineTokenizeTimeout = 2 * time.Second

var _ scoring.Prompter = (*Chat)(nil)

// Prompt implements Prompter. A body vLLM would refuse is an error wrapping
// chat.ErrInvalidRequest.
func (c *Chat) Prompt(path string, body []byte) (*scoring.Request, error) {
	release := c.turns.take()
	defer release()
	r, err := chat.ParseRequest(path, body)
	if err != nil {
		return nil, fmt.Errorf("reading %s request: %w", path, err)
	}
	req, err := c.prompt(path, r, release)
	if req != nil {
		req.Stream, req.MaxOutputTokens = r.Stream, r.MaxOutputTokens
	}
	return req, err
}

// prompt is Prompt after the body is read; release gives up the CPU turn.
func (c *Chat) prompt(path string, r *chat.Request, release func()) (*scoring.Request, error) {
	toks, err := c.tokenize(r, release)
	var limit *chat.LimitError
	switch {
	case errors.As(err, &limit):
		// Before the template case: a template nested past the router's
		// bound is refused, not routed, whoever wrote it.
		return nil, fmt.Errorf("tokenizing %s request: %w", path, err)
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
	req := &scoring.Request{Tokens: toks.Prompts[0], LoRA: toks.LoRA, Extra: kvevents.SaltExtraKeys(toks.CacheSalt)}
	if len(toks.Prompts) > 1 {
		req.More = toks.Prompts[1:]
	}
	return req, nil
}

// tokenize returns r's ids: in process, or from one pod while the canary
// holds the model on the engine path. An engine that cannot answer makes the
// request untokenizable rather than failing it. The engine path gives up
// the CPU turn (release) before it waits on the network.
func (c *Chat) tokenize(r *chat.Request, release func()) (*chat.Tokens, error) {
	if c.Guard == nil || !c.Guard.OnEnginePath() || r.Untokenizable != nil {
		return c.Catalog.Tokenize(r)
	}
	release()
	base, lora, _, err := c.Catalog.Resolve(r.Model)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), engineTokenizeTimeout)
	defer cancel()
	prompts, err := c.Guard.Tokenize(ctx, r)
	if err != nil {
		return nil, &chat.UntokenizableError{Reason: "engine_tokenize_failed", Detail: err.Error()}
	}
	return &chat.Tokens{Base: base, LoRA: lora, CacheSalt: r.CacheSalt, Prompts: prompts}, nil
}

// ChatFromConfig builds the Chat prompter the configuration describes: the
// model's tokenizer files, local paths or s3:// URIs (package objectfile),
// and its LoRA adapters. Without tokenizer files every request routes on
// load alone (reason "unknown_model").
func ChatFromConfig(cfg *config.Config) (*Chat, error) {
	c := &Chat{Catalog: chat.NewCatalog(), turns: newTurns(runtime.GOMAXPROCS(0))}
	if cfg.Tokenizer.JSON != "" {
		opts := chat.Options{TokenCacheBytes: config.DefaultTokenizerCacheBytes}
		if n := cfg.Tokenizer.CacheBytes; n != nil {
			opts.TokenCacheBytes = *n
		}
		m, err := loadModel(cfg.Tokenizer, opts)
		if err != nil {
			return nil, fmt.Errorf("loading the tokenizer of %s: %w", cfg.Model, err)
		}
		c.Catalog.AddModel(cfg.Model, m)
		c.Cache = m.TokenCache()
	}
	for _, a := range cfg.LoRAAdapters {
		c.Catalog.AddAdapter(a, cfg.Model)
	}
	return c, nil
}

// tokenizerFileLimit bounds each tokenizer file read; Qwen's tokenizer.json
// is about 11 MB.
const tokenizerFileLimit = 64 << 20

// tokenizerReadTimeout bounds reading both tokenizer files, S3 retries
// included.
const tokenizerReadTimeout = 2 * time.Minute

// loadModel reads the tokenizer files from disk or S3 and builds the model.
func loadModel(files config.Tokenizer, opts chat.Options) (*chat.Model, error) {
	ctx, cancel := context.WithTimeout(context.Background(), tokenizerReadTimeout)
	defer cancel()
	data, err := objectfile.Read(ctx, files.JSON, tokenizerFileLimit)
	if err != nil {
		return nil, fmt.Errorf("reading tokenizer.json: %w", err)
	}
	cfg, err := objectfile.Read(ctx, files.Config, tokenizerFileLimit)
	if err != nil {
		return nil, fmt.Errorf("reading tokenizer_config.json: %w", err)
	}
	m, err := chat.ParseModel(data, cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("loading %s with %s: %w", files.JSON, files.Config, err)
	}
	return m, nil
}
