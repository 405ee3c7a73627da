package chat

import (
	"encoding/json"
	"fmt"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat/jinja"
)

// hfParams are the parameters of transformers' apply_chat_template. vLLM
// lets chat_template_kwargs through when they are one of these or a
// variable the template reads; apply_chat_template consumes them instead of
// passing them to the template, except the four it renders with.
var hfParams = map[string]bool{
	"conversation": true, "tools": true, "documents": true, "chat_template": true,
	"add_generation_prompt": true, "continue_final_message": true, "tokenize": true,
	"padding": true, "truncation": true, "max_length": true, "return_tensors": true,
	"return_dict": true, "return_assistant_tokens_mask": true, "tokenizer_kwargs": true,
}

// RenderChat returns the prompt text vLLM renders for a raw
// /v1/chat/completions (or chat-form /tokenize) request body.
func (m *Model) RenderChat(body []byte) (string, error) {
	req, err := decodeBody(body)
	if err != nil {
		return "", err
	}
	text, _, err := m.renderChat(req)
	return text, err
}

// decodeBody decodes a request body that must be a JSON object.
func decodeBody(body []byte) (*jinja.Dict, error) {
	v, err := decodeJSON(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	req, ok := v.(*jinja.Dict)
	if !ok {
		return nil, fmt.Errorf("%w: body is not a JSON object", ErrInvalidRequest)
	}
	return req, nil
}

// get returns the value under k, nil when d has no such key.
func get(d *jinja.Dict, k string) any {
	v, _ := d.Get(k)
	return v
}

// boolField reads an optional boolean request field.
func boolField(req *jinja.Dict, name string, def bool) (bool, error) {
	switch v := get(req, name).(type) {
	case nil:
		return def, nil
	case bool:
		return v, nil
	}
	return false, fmt.Errorf("%w: %s must be a boolean", ErrInvalidRequest, name)
}

// renderChat renders a decoded chat request and reports whether vLLM would
// add the tokenizer's special tokens when encoding it (add_special_tokens,
// false by default for chat).
func (m *Model) renderChat(req *jinja.Dict) (string, bool, error) {
	call, err := m.prepareChat(req)
	if err != nil {
		return "", false, err
	}
	text, err := call.tmpl.Render(call.vars)
	if err != nil {
		return "", false, invalidIfLimit(err)
	}
	text, err = call.finish(text)
	return text, call.addSpecial, err
}

// chatCall is a chat request ready for the template engine: the template
// vLLM picks and the variables transformers renders it with. Keeping it
// apart from the rendering lets a test feed the same input to another
// engine (ardanlabs_compare_test.go).
type chatCall struct {
	tmpl *template
	vars *jinja.Dict
	// final is the last message when continue_final_message is set.
	final      *jinja.Dict
	addSpecial bool
}

// finish applies continue_final_message to the rendered text.
func (c chatCall) finish(text string) (string, error) {
	if c.final == nil {
		return text, nil
	}
	return applyContinue(text, get(c.final, "content"))
}

// prepareChat runs vLLM's and transformers' steps before the template.
func (m *Model) prepareChat(req *jinja.Dict) (chatCall, error) {
	addGen, err := boolField(req, "add_generation_prompt", true)
	if err != nil {
		return chatCall{}, err
	}
	cont, err := boolField(req, "continue_final_message", false)
	if err != nil {
		return chatCall{}, err
	}
	addSpecial, err := boolField(req, "add_special_tokens", false)
	if err != nil {
		return chatCall{}, err
	}
	if addGen && cont {
		return chatCall{}, fmt.Errorf("%w: Cannot set both `continue_final_message` and `add_generation_prompt` to True.", ErrInvalidRequest)
	}
	tools, err := normalizeTools(get(req, "tools"))
	if err != nil {
		return chatCall{}, err
	}
	tmpl, err := m.template(get(req, "chat_template"), tools != nil)
	if err != nil {
		return chatCall{}, err
	}
	conv, err := normalizeMessages(get(req, "messages"), tmpl.format)
	if err != nil {
		return chatCall{}, err
	}

	// vLLM's kwargs: its own fields, then server defaults, then the
	// request's chat_template_kwargs, filtered by resolve_chat_template_kwargs.
	kw := jinja.NewDict()
	kw.Set("add_generation_prompt", addGen)
	kw.Set("continue_final_message", cont)
	kw.Set("tools", tools)
	kw.Set("documents", get(req, "documents"))
	for _, k := range m.defaults.Keys() {
		kw.Set(k, get(m.defaults, k))
	}
	switch extra := get(req, "chat_template_kwargs").(type) {
	case nil:
	case *jinja.Dict:
		for _, k := range extra.Keys() {
			if k == "chat_template" || k == "tokenize" {
				return chatCall{}, fmt.Errorf("%w: Found unexpected chat template kwargs from request: %s", ErrInvalidRequest, k)
			}
			if k == "tools" {
				extraTools, err := normalizeTools(get(extra, k))
				if err != nil {
					return chatCall{}, err
				}
				extra.Set(k, extraTools)
			}
			kw.Set(k, get(extra, k))
		}
	default:
		return chatCall{}, fmt.Errorf("%w: chat_template_kwargs must be an object", ErrInvalidRequest)
	}
	if jinja.Truthy(get(kw, "add_generation_prompt")) && jinja.Truthy(get(kw, "continue_final_message")) {
		return chatCall{}, fmt.Errorf("%w: continue_final_message and add_generation_prompt are not compatible", ErrInvalidRequest)
	}

	// transformers renders with special_tokens_map, then the kwargs it does
	// not consume, then messages, tools, documents, add_generation_prompt.
	vars := jinja.NewDict()
	for _, k := range m.special.Keys() {
		vars.Set(k, get(m.special, k))
	}
	for _, k := range kw.Keys() {
		if !hfParams[k] && tmpl.Reads(k) {
			vars.Set(k, get(kw, k))
		}
	}
	vars.Set("messages", conv)
	vars.Set("tools", get(kw, "tools"))
	vars.Set("documents", get(kw, "documents"))
	vars.Set("add_generation_prompt", get(kw, "add_generation_prompt"))
	call := chatCall{tmpl: tmpl, vars: vars, addSpecial: addSpecial}
	if jinja.Truthy(get(kw, "continue_final_message")) && len(conv) > 0 {
		call.final = conv[len(conv)-1].(*jinja.Dict)
	}
	return call, nil
}

// fromGo converts a Go value (as encoding/json decodes it) into a template
// value.
func fromGo(v any) (any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return decodeJSON(data)
}
