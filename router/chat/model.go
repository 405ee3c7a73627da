package chat

import (
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat/jinja"
	"github.com/llmd-dev/terraform-provider-llmd/router/tokenizer"
)

// Options mirror the vLLM server flags that change how a chat request is
// rendered.
type Options struct {
	// ChatTemplate replaces the template of tokenizer_config.json
	// (vllm serve --chat-template, given as the template text).
	ChatTemplate string
	// DefaultKwargs are merged under each request's chat_template_kwargs
	// (--default-chat-template-kwargs).
	DefaultKwargs map[string]any
	// TrustRequestTemplate lets a request's chat_template replace the
	// model's (--trust-request-chat-template); without it vLLM refuses such
	// requests.
	TrustRequestTemplate bool
	// TokenCacheBytes is the router's own setting, not vLLM's: the byte
	// budget of the tokenizer's prefix cache (tokenizer.PrefixCache); 0
	// tokenizes every prompt from scratch.
	TokenCacheBytes int64
}

// Model renders and tokenizes requests for one served base model exactly as
// vLLM does. It is safe for concurrent use.
type Model struct {
	tok       *tokenizer.Tokenizer
	templates map[string]*template
	special   *jinja.Dict
	defaults  *jinja.Dict
	trust     bool
	// cache holds recent prompts' ids; nil when Options.TokenCacheBytes is 0.
	cache *tokenizer.PrefixCache
	// overrides caches compiled per-request templates by source text.
	overrides sync.Map
}

// maxOverrides bounds the cache of per-request templates.
const maxOverrides = 64

// LoadModel reads a model's tokenizer.json and tokenizer_config.json.
func LoadModel(tokenizerJSON, tokenizerConfig string, opts Options) (*Model, error) {
	tok, err := tokenizer.LoadWithConfig(tokenizerJSON, tokenizerConfig)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(tokenizerConfig)
	if err != nil {
		return nil, fmt.Errorf("reading tokenizer config: %w", err)
	}
	return NewModel(tok, data, opts)
}

// ParseModel is LoadModel on the contents of tokenizer.json and
// tokenizer_config.json, for files that do not come from disk.
func ParseModel(tokenizerJSON, tokenizerConfig []byte, opts Options) (*Model, error) {
	tok, err := tokenizer.ParseWithConfig(tokenizerJSON, tokenizerConfig)
	if err != nil {
		return nil, err
	}
	return NewModel(tok, tokenizerConfig, opts)
}

// NewModel builds a Model from a loaded tokenizer and the contents of
// tokenizer_config.json.
func NewModel(tok *tokenizer.Tokenizer, tokenizerConfig []byte, opts Options) (*Model, error) {
	cfg, err := parseConfig(tokenizerConfig)
	if err != nil {
		return nil, err
	}
	if opts.ChatTemplate != "" {
		cfg.templates = map[string]string{"default": opts.ChatTemplate}
	}
	m := &Model{tok: tok, templates: map[string]*template{}, special: cfg.special, defaults: jinja.NewDict(), trust: opts.TrustRequestTemplate}
	if opts.TokenCacheBytes > 0 {
		m.cache = tok.NewPrefixCache(opts.TokenCacheBytes)
	}
	for name, src := range cfg.templates {
		t, err := compile(src)
		if err != nil {
			return nil, fmt.Errorf("compiling chat template %q: %w", name, err)
		}
		m.templates[name] = t
	}
	for k, v := range opts.DefaultKwargs {
		val, err := fromGo(v)
		if err != nil {
			return nil, fmt.Errorf("default chat template kwarg %q: %w", k, err)
		}
		m.defaults.Set(k, val)
	}
	return m, nil
}

// Tokenizer returns the model's tokenizer.
func (m *Model) Tokenizer() *tokenizer.Tokenizer { return m.tok }

// TokenCache returns the model's prefix cache, nil when it has none.
func (m *Model) TokenCache() *tokenizer.PrefixCache { return m.cache }

// encode tokenizes prompt text, through the prefix cache when there is one
// (the same ids either way).
func (m *Model) encode(text string, addSpecial bool) ([]uint32, error) {
	if m.cache != nil {
		return m.cache.Encode(text, addSpecial)
	}
	return m.tok.Encode(text, addSpecial)
}

// template picks the template as transformers' get_chat_template does: a
// request template that names one of the model's templates selects it, any
// other request template is the template itself; otherwise "tool_use" when
// tools are given and the model has one, else "default".
func (m *Model) template(requested any, hasTools bool) (*template, error) {
	if requested != nil {
		src, ok := requested.(string)
		if !ok {
			return nil, fmt.Errorf("%w: chat_template must be a string", ErrInvalidRequest)
		}
		if !m.trust {
			return nil, fmt.Errorf("%w: chat_template in the request is refused without --trust-request-chat-template", ErrInvalidRequest)
		}
		if t, ok := m.templates[src]; ok {
			return t, nil
		}
		if t, ok := m.overrides.Load(src); ok {
			return t.(*template), nil
		}
		t, err := compile(src)
		if err != nil {
			return nil, err
		}
		if m.cachedOverrides() < maxOverrides {
			m.overrides.Store(src, t)
		}
		return t, nil
	}
	if t, ok := m.templates["tool_use"]; ok && hasTools {
		return t, nil
	}
	if t, ok := m.templates["default"]; ok {
		return t, nil
	}
	return nil, fmt.Errorf("%w: the model has no chat template", ErrInvalidRequest)
}

// template is a compiled chat template with the content format vLLM's
// "auto" resolves to for it.
type template struct {
	*jinja.Template
	format contentFormat
}

// compile compiles a chat template and resolves its content format.
func compile(src string) (*template, error) {
	t, err := jinja.Compile(src)
	if err != nil {
		return nil, invalidIfLimit(err)
	}
	return &template{Template: t, format: detectFormat(t)}, nil
}

func (m *Model) cachedOverrides() int {
	n := 0
	m.overrides.Range(func(any, any) bool { n++; return true })
	return n
}

// applyContinue mirrors transformers' continue_final_message: the rendered
// text is cut right after the final message's content, so the model goes on
// writing it instead of starting a new turn.
func applyContinue(rendered string, final any) (string, error) {
	content, ok := final.(string)
	if parts, isList := final.([]any); isList {
		for i := len(parts) - 1; i >= 0 && !ok; i-- {
			if d, isDict := parts[i].(*jinja.Dict); isDict {
				content, ok = get(d, "text").(string)
			}
		}
	}
	if !ok {
		return "", fmt.Errorf("%w: continue_final_message needs text in the final message", ErrInvalidRequest)
	}
	stripped := jinja.Strip(content, nil, true, true)
	at := strings.LastIndex(rendered, stripped)
	if at < 0 {
		return "", fmt.Errorf("%w: continue_final_message is set but the final message does not appear in the rendered chat", ErrTemplate)
	}
	// transformers keeps the message's trailing white space only when the
	// template printed the message exactly as given.
	end := min(len(rendered), at+len(jinja.Strip(content, nil, true, false)))
	if rendered[at:end] == content {
		return rendered[:end], nil
	}
	return rendered[:at+len(stripped)], nil
}
