package chat

import (
	"fmt"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat/jinja"
)

// config is what transformers reads from tokenizer_config.json for chat:
// the template(s) and the special tokens every template sees.
type config struct {
	// templates by name; a plain string template is named "default", as
	// transformers names it.
	templates map[string]string
	// special is transformers' special_tokens_map: only the tokens that are
	// set, as strings, in its attribute order.
	special *jinja.Dict
}

// specialNames are the special-token attributes of a transformers
// tokenizer, in the order special_tokens_map lists them.
var specialNames = []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token", "additional_special_tokens"}

func parseConfig(data []byte) (*config, error) {
	v, err := decodeJSON(data)
	if err != nil {
		return nil, fmt.Errorf("decoding tokenizer_config.json: %w", err)
	}
	root, ok := v.(*jinja.Dict)
	if !ok {
		return nil, fmt.Errorf("tokenizer_config.json is not an object")
	}
	c := &config{templates: map[string]string{}, special: jinja.NewDict()}
	switch t := get(root, "chat_template").(type) {
	case nil:
	case string:
		c.templates["default"] = t
	case []any:
		for i, e := range t {
			d, ok := e.(*jinja.Dict)
			name, ok1 := get(d, "name").(string)
			src, ok2 := get(d, "template").(string)
			if !ok || !ok1 || !ok2 {
				return nil, fmt.Errorf("chat_template[%d] is not an object with string name and template", i)
			}
			c.templates[name] = src
		}
	default:
		return nil, fmt.Errorf("chat_template is neither a string nor a list of named templates")
	}
	for _, name := range specialNames {
		switch t := get(root, name).(type) {
		case nil:
		case string:
			c.special.Set(name, t)
		case *jinja.Dict: // a serialised AddedToken: str() of it is its content
			if s, ok := get(t, "content").(string); ok {
				c.special.Set(name, s)
			}
		case []any:
			list := make([]any, 0, len(t))
			for _, e := range t {
				if d, ok := e.(*jinja.Dict); ok {
					e = get(d, "content")
				}
				if s, ok := e.(string); ok {
					list = append(list, s)
				}
			}
			c.special.Set(name, list)
		}
	}
	return c, nil
}
