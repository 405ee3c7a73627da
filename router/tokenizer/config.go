package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// LoadWithConfig loads tokenizer.json as Load does, then applies what
// transformers' AutoTokenizer (the tokenizer vLLM runs) takes from
// tokenizer_config.json on top of it. Only one setting changes ids: the Llama
// tokenizer classes rebuild the post-processor from add_bos_token (default
// true) and add_eos_token (default false). DeepSeek V3 depends on it: its
// tokenizer.json adds nothing, while its config asks for
// <｜begin▁of▁sentence｜>. Other classes keep tokenizer.json's post-processor.
func LoadWithConfig(tokenizerJSON, tokenizerConfig string) (*Tokenizer, error) {
	data, err := os.ReadFile(tokenizerJSON)
	if err != nil {
		return nil, fmt.Errorf("reading tokenizer: %w", err)
	}
	cfg, err := os.ReadFile(tokenizerConfig)
	if err != nil {
		return nil, fmt.Errorf("reading tokenizer config: %w", err)
	}
	t, err := ParseWithConfig(data, cfg)
	if err != nil {
		return nil, fmt.Errorf("loading %s with %s: %w", tokenizerJSON, tokenizerConfig, err)
	}
	return t, nil
}

// ParseWithConfig is LoadWithConfig on the contents of tokenizer.json and
// tokenizer_config.json, for files that do not come from disk.
func ParseWithConfig(tokenizerJSON, tokenizerConfig []byte) (*Tokenizer, error) {
	t, err := Parse(tokenizerJSON)
	if err != nil {
		return nil, err
	}
	if err := t.applyConfig(tokenizerConfig); err != nil {
		return nil, fmt.Errorf("applying tokenizer_config.json: %w", err)
	}
	return t, nil
}

// templateClasses are the transformers tokenizer classes (without "Fast")
// whose constructor rewrites the post-processor from add_bos_token and
// add_eos_token.
var templateClasses = map[string]bool{"LlamaTokenizer": true, "CodeLlamaTokenizer": true}

type configSpec struct {
	TokenizerClass string   `json:"tokenizer_class"`
	AddBOS         *bool    `json:"add_bos_token"`
	AddEOS         *bool    `json:"add_eos_token"`
	BOS            tokenRef `json:"bos_token"`
	EOS            tokenRef `json:"eos_token"`
}

// tokenRef is a special token in tokenizer_config.json: null, its content as
// a string, or an AddedToken object with a content field.
type tokenRef string

func (r *tokenRef) UnmarshalJSON(data []byte) error {
	switch {
	case string(data) == "null":
		*r = ""
	case len(data) > 0 && data[0] == '"':
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		*r = tokenRef(s)
	default:
		var obj struct{ Content string }
		if err := json.Unmarshal(data, &obj); err != nil {
			return fmt.Errorf("special token is neither a string nor an object with content: %w", err)
		}
		*r = tokenRef(obj.Content)
	}
	return nil
}

func (t *Tokenizer) applyConfig(data []byte) error {
	var cfg configSpec
	if err := json.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("decoding tokenizer_config.json: %w", err)
	}
	if !templateClasses[strings.TrimSuffix(cfg.TokenizerClass, "Fast")] {
		return nil
	}
	var tmpl template
	if cfg.AddBOS == nil || *cfg.AddBOS {
		id, err := t.configToken("bos_token", cfg.BOS)
		if err != nil {
			return err
		}
		tmpl.prefix = []uint32{id}
	}
	if cfg.AddEOS != nil && *cfg.AddEOS {
		id, err := t.configToken("eos_token", cfg.EOS)
		if err != nil {
			return err
		}
		tmpl.suffix = []uint32{id}
	}
	t.template = tmpl
	return nil
}

func (t *Tokenizer) configToken(field string, tok tokenRef) (uint32, error) {
	if tok == "" {
		return 0, fmt.Errorf("%s is not set but add_%s is true", field, field)
	}
	id, ok := t.TokenToID(string(tok))
	if !ok {
		return 0, fmt.Errorf("%s %q is not in the vocabulary", field, string(tok))
	}
	return id, nil
}
