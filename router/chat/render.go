package chat

import (
	"encoding/json"
	"fmt"
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
func decodeBody(body []byte) (*Dict, error) {
	v, err := decodeJSON(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidRequest, err)
	}
	req, ok := v.(*Dict)
	if !ok {
		return nil, fmt.Errorf("%w: body is not a JSON object", ErrInvalidRequest)
	}
	return req, nil
}

// boolField reads an optional boolean request field.
func boolField(req *Dict, name string, def bool) (bool, error) {
	switch v := req.m[name].(type) {
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
func (m *Model) renderChat(req *Dict) (string, bool, error) {
	call, err := m.prepareChat(req)
	if err != nil {
		return "", false, err
	}
	text, err := call.tmpl.Render(call.vars)
	if err != nil {
		return "", false, err
	}
	text, err = call.finish(text)
	return text, call.addSpecial, err
}

// chatCall is a chat request ready for the template engine: the template
// vLLM picks and the variables transformers renders it with. Keeping it
// apart from the rendering lets a test feed the same input to another
// engine (ardanlabs_compare_test.go).
type chatCall struct {
	tmpl *Template
	vars *Dict
	// final is the last message when continue_final_message is set.
	final      *Dict
	addSpecial bool
}

// finish applies continue_final_message to the rendered text.
func (c chatCall) finish(text string) (string, error) {
	if c.final == nil {
		return text, nil
	}
	return applyContinue(text, c.final.m["content"])
}

// prepareChat runs vLLM's and transformers' steps before the template.
func (m *Model) prepareChat(req *Dict) (chatCall, error) {
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
	tools, err := normalizeTools(req.m["tools"])
	if err != nil {
		return chatCall{}, err
	}
	tmpl, err := m.template(req.m["chat_template"], tools != nil)
	if err != nil {
		return chatCall{}, err
	}
	conv, err := normalizeMessages(req.m["messages"], tmpl.format)
	if err != nil {
		return chatCall{}, err
	}

	// vLLM's kwargs: its own fields, then server defaults, then the
	// request's chat_template_kwargs, filtered by resolve_chat_template_kwargs.
	kw := NewDict()
	kw.Set("add_generation_prompt", addGen)
	kw.Set("continue_final_message", cont)
	kw.Set("tools", tools)
	kw.Set("documents", req.m["documents"])
	for _, k := range m.defaults.keys {
		kw.Set(k, m.defaults.m[k])
	}
	switch extra := req.m["chat_template_kwargs"].(type) {
	case nil:
	case *Dict:
		for _, k := range extra.keys {
			if k == "chat_template" || k == "tokenize" {
				return chatCall{}, fmt.Errorf("%w: Found unexpected chat template kwargs from request: %s", ErrInvalidRequest, k)
			}
			if k == "tools" {
				if extra.m[k], err = normalizeTools(extra.m[k]); err != nil {
					return chatCall{}, err
				}
			}
			kw.Set(k, extra.m[k])
		}
	default:
		return chatCall{}, fmt.Errorf("%w: chat_template_kwargs must be an object", ErrInvalidRequest)
	}
	if truthy(kw.m["add_generation_prompt"]) && truthy(kw.m["continue_final_message"]) {
		return chatCall{}, fmt.Errorf("%w: continue_final_message and add_generation_prompt are not compatible", ErrInvalidRequest)
	}

	// transformers renders with special_tokens_map, then the kwargs it does
	// not consume, then messages, tools, documents, add_generation_prompt.
	vars := NewDict()
	for _, k := range m.special.keys {
		vars.Set(k, m.special.m[k])
	}
	for _, k := range kw.keys {
		if !hfParams[k] && tmpl.Reads(k) {
			vars.Set(k, kw.m[k])
		}
	}
	vars.Set("messages", conv)
	vars.Set("tools", kw.m["tools"])
	vars.Set("documents", kw.m["documents"])
	vars.Set("add_generation_prompt", kw.m["add_generation_prompt"])
	call := chatCall{tmpl: tmpl, vars: vars, addSpecial: addSpecial}
	if truthy(kw.m["continue_final_message"]) && len(conv) > 0 {
		call.final = conv[len(conv)-1].(*Dict)
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
