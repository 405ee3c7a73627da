package chat

import (
	"fmt"
	"math"
	"strings"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat/jinja"
)

// Paths of the OpenAI-compatible endpoints the router tokenizes.
const (
	PathCompletions     = "/v1/completions"
	PathChatCompletions = "/v1/chat/completions"
)

// Request is what the router reads from an inference request before
// routing it: the model name (a base model or a LoRA adapter), the cache
// salt, and the prompt material to tokenize.
type Request struct {
	// Path is the endpoint path, e.g. PathChatCompletions.
	Path string
	// Model is the request's "model" field.
	Model string
	// CacheSalt is vLLM's cache_salt, mixed into the first block's key.
	CacheSalt string
	// Stream is the request's "stream" field: the engine answers with
	// server-sent events, and sends its headers before generating.
	Stream bool
	// MaxOutputTokens is the most tokens the request may generate, its
	// choices together: max_completion_tokens (chat), else max_tokens (16 for a
	// completion that sets neither, vLLM's CompletionRequest default),
	// times n. 0 when the body bounds none: a chat request without either
	// runs to the model's context length. A value the engine would refuse
	// (not a positive integer) counts as none; the engine answers it.
	MaxOutputTokens int
	// Untokenizable is set (wrapping ErrUntokenizable) for requests the
	// router routes on load alone: other endpoints, prompt embeddings.
	Untokenizable error
	body          *jinja.Dict
	raw           []byte
}

// Body returns the request body as received, for forwarding it to the
// engine's tokenizer.
func (r *Request) Body() []byte { return r.raw }

// ParseRequest reads a request body sent to path. A body vLLM would refuse
// is an error wrapping ErrInvalidRequest; a request the router cannot
// tokenize is returned with Untokenizable set.
func ParseRequest(path string, body []byte) (*Request, error) {
	r := &Request{Path: path, raw: body}
	switch path {
	case PathCompletions, PathChatCompletions:
	default:
		// /v1/responses, /v1/messages and anything else: vLLM renders these
		// through other code paths (Responses items, Anthropic blocks) that
		// the router does not mirror.
		r.Untokenizable = untokenizable("endpoint", "endpoint %s", path)
		if d, err := decodeBody(body); err == nil {
			r.Model, _ = get(d, "model").(string)
			r.Stream, _ = get(d, "stream").(bool)
		}
		return r, nil
	}
	d, err := decodeBody(body)
	if err != nil {
		return nil, err
	}
	r.body = d
	r.Stream, _ = get(d, "stream").(bool)
	switch m := get(d, "model").(type) {
	case nil:
	case string:
		r.Model = m
	default:
		return nil, fmt.Errorf("%w: model must be a string", ErrInvalidRequest)
	}
	switch s := get(d, "cache_salt").(type) {
	case nil:
	case string:
		if s == "" {
			return nil, fmt.Errorf("%w: Parameter 'cache_salt' must be a non-empty string if provided.", ErrInvalidRequest)
		}
		r.CacheSalt = s
	default:
		return nil, fmt.Errorf("%w: Parameter 'cache_salt' must be a non-empty string if provided.", ErrInvalidRequest)
	}
	r.MaxOutputTokens = maxOutputTokens(d, path)
	if path == PathCompletions {
		if _, ok := d.Get("prompt_embeds"); ok && get(d, "prompt_embeds") != nil {
			r.Untokenizable = untokenizable("prompt_embeds", "completion with prompt_embeds")
		}
	}
	return r, nil
}

// completionDefaultMaxTokens is vLLM's CompletionRequest.max_tokens default
// (vllm/entrypoints/openai/protocol.py); chat requests have none.
const completionDefaultMaxTokens = 16

// maxOutputTokens is Request.MaxOutputTokens of body d sent to path.
func maxOutputTokens(d *jinja.Dict, path string) int {
	positive := func(name string) int {
		if n, ok := get(d, name).(int64); ok && n > 0 && n <= math.MaxInt32 {
			return int(n)
		}
		return 0
	}
	out := 0
	if path == PathChatCompletions {
		out = positive("max_completion_tokens")
	}
	if out == 0 {
		out = positive("max_tokens")
	}
	if out == 0 && path == PathCompletions && get(d, "max_tokens") == nil {
		out = completionDefaultMaxTokens
	}
	if n := positive("n"); n > 1 {
		out = min(out*n, math.MaxInt32)
	}
	return out
}

// Tokenize returns the token ids of each prompt of the request, as the
// engine will see them: one for a chat request, one per batch element of a
// completion.
func (m *Model) Tokenize(r *Request) ([][]uint32, error) {
	if r.Untokenizable != nil {
		return nil, r.Untokenizable
	}
	if r.Path == PathChatCompletions {
		text, addSpecial, err := m.renderChat(r.body)
		if err != nil {
			return nil, err
		}
		if len(text) > MaxTokenizeBytes {
			return nil, tooLong(len(text))
		}
		ids, err := m.encode(text, addSpecial)
		if err != nil {
			return nil, fmt.Errorf("encoding rendered chat: %w", err)
		}
		return [][]uint32{ids}, nil
	}
	return m.completionIDs(r.body)
}

// completionIDs mirrors vLLM's prompt parsing for /v1/completions: a string,
// a list of strings (a batch), a list of token ids, or a list of such lists.
// Strings get the tokenizer's special tokens unless add_special_tokens is
// false; token ids are taken as they are.
func (m *Model) completionIDs(body *jinja.Dict) ([][]uint32, error) {
	addSpecial, err := boolField(body, "add_special_tokens", true)
	if err != nil {
		return nil, err
	}
	budget := MaxTokenizeBytes
	encode := func(s string) ([]uint32, error) {
		if budget -= len(s); budget < 0 {
			return nil, tooLong(MaxTokenizeBytes - budget)
		}
		ids, err := m.encode(s, addSpecial)
		if err != nil {
			return nil, fmt.Errorf("encoding prompt: %w", err)
		}
		return ids, nil
	}
	switch p := get(body, "prompt").(type) {
	case string:
		ids, err := encode(p)
		return [][]uint32{ids}, err
	case []any:
		if len(p) == 0 {
			return nil, fmt.Errorf("%w: prompt must not be an empty list", ErrInvalidRequest)
		}
		if _, isInt := p[0].(int64); isInt {
			ids, err := tokenList(p)
			return [][]uint32{ids}, err
		}
		if len(p) > MaxPrompts {
			return nil, overLimit("MaxPrompts", MaxPrompts, "prompts in the batch (%d)", len(p))
		}
		out := make([][]uint32, len(p))
		for i, e := range p {
			switch x := e.(type) {
			case string:
				out[i], err = encode(x)
			case []any:
				out[i], err = tokenList(x)
			default:
				err = fmt.Errorf("%w: prompt[%d] is neither a string nor a list of token ids", ErrInvalidRequest, i)
			}
			if err != nil {
				return nil, err
			}
		}
		return out, nil
	case nil:
		return nil, fmt.Errorf("%w: prompt is required", ErrInvalidRequest)
	}
	return nil, fmt.Errorf("%w: prompt must be a string, a list of strings or token ids", ErrInvalidRequest)
}

// tooLong is a prompt whose text is past MaxTokenizeBytes.
func tooLong(n int) error {
	return untokenizable("prompt_too_long", "%d bytes of prompt text, over the router's MaxTokenizeBytes = %d", n, MaxTokenizeBytes)
}

// tokenList reads a prompt given as token ids. Ids must fit the index's
// uint32 keys; a tighter check against the tokenizer's vocabulary would
// refuse ids the engine accepts (vLLM checks the model's embedding size,
// which for Qwen exceeds the tokenizer's by 271 ids and is not in the
// tokenizer files).
func tokenList(list []any) ([]uint32, error) {
	if len(list) > MaxPromptTokens {
		return nil, overLimit("MaxPromptTokens", MaxPromptTokens, "token ids in one prompt (%d)", len(list))
	}
	ids := make([]uint32, len(list))
	for i, e := range list {
		n, ok := e.(int64)
		if !ok || n < 0 || n > 1<<32-1 {
			return nil, fmt.Errorf("%w: token id %s at %d is not an integer in [0, 2^32)", ErrInvalidRequest, jinja.Str(e), i)
		}
		ids[i] = uint32(n)
	}
	return ids, nil
}

// Catalog maps the model names requests use to the base models the router
// tokenizes for, including LoRA adapters served on top of a base model.
type Catalog struct {
	models   map[string]*Model
	adapters map[string]string // adapter name -> base model name
}

// NewCatalog returns an empty catalog.
func NewCatalog() *Catalog {
	return &Catalog{models: map[string]*Model{}, adapters: map[string]string{}}
}

// AddModel registers a base model under the name requests use for it.
func (c *Catalog) AddModel(name string, m *Model) { c.models[name] = m }

// AddAdapter registers a LoRA adapter served on top of base. Its requests
// use the base model's tokenizer and template; their blocks are keyed apart
// because the engine caches them apart.
func (c *Catalog) AddAdapter(adapter, base string) { c.adapters[adapter] = base }

// Tokens is a tokenized request, with what keys its blocks besides the ids.
type Tokens struct {
	// Base is the base model's name.
	Base string
	// LoRA is the adapter name, empty for the base model.
	LoRA string
	// CacheSalt is the request's cache_salt.
	CacheSalt string
	// Prompts holds the ids of each prompt.
	Prompts [][]uint32
}

// Resolve returns the base model and adapter a model name stands for.
func (c *Catalog) Resolve(name string) (base string, lora string, m *Model, err error) {
	switch b, ok := c.adapters[name]; {
	case ok:
		base, lora = b, name
	case name == "" && len(c.models) == 1:
		// vLLM serves a request without "model" with its only model.
		for n := range c.models {
			base = n
		}
	default:
		base = name
	}
	if m = c.models[base]; m == nil {
		return "", "", nil, untokenizable("unknown_model", "model %q", strings.TrimSpace(name))
	}
	return base, lora, m, nil
}

// Tokenize tokenizes r for the model it names.
func (c *Catalog) Tokenize(r *Request) (*Tokens, error) {
	if r.Untokenizable != nil {
		return nil, r.Untokenizable
	}
	base, lora, m, err := c.Resolve(r.Model)
	if err != nil {
		return nil, err
	}
	ids, err := m.Tokenize(r)
	if err != nil {
		return nil, err
	}
	return &Tokens{Base: base, LoRA: lora, CacheSalt: r.CacheSalt, Prompts: ids}, nil
}
