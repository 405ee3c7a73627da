package chat

import (
	"fmt"
	"strings"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat/jinja"
)

// This file turns a raw /v1/chat/completions body into the conversation
// and template variables vLLM hands to transformers' apply_chat_template.
// Each rule names the vLLM behaviour it mirrors (vllm/entrypoints/
// chat_utils.py, vllm/renderers/hf.py and the OpenAI protocol models, 2025-2026).

// contentFormat is vLLM's chat_template_content_format after resolving
// "auto": "string" joins text parts, "openai" keeps them as a list.
type contentFormat int

const (
	formatString contentFormat = iota
	formatOpenAI
)

// textPartTypes are the part types vLLM treats as text
// (MM_PARSER_MAP in chat_utils.py); tool_reference passes its name through.
var textPartTypes = map[string]string{
	"text": "text", "input_text": "text", "output_text": "text",
	"refusal": "refusal", "thinking": "thinking", "tool_reference": "name",
}

// mediaPartKeys are the keys by which vLLM recognises a media part without a
// "type"; any of them makes the request untokenizable for the router.
var mediaPartKeys = []string{"image_url", "image_pil", "image_embeds", "audio_embeds", "prompt_embeds", "audio_url", "input_audio", "video_url"}

// normalizeMessages mirrors parse_chat_messages: each message is rebuilt
// with only the keys vLLM copies, content resolved per the content format,
// then _postprocess_messages parses tool-call arguments.
func normalizeMessages(raw any, format contentFormat) ([]any, error) {
	list, ok := raw.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: messages must be a list", ErrInvalidRequest)
	}
	if len(list) > MaxMessages {
		return nil, overLimit("MaxMessages", MaxMessages, "messages (%d)", len(list))
	}
	conv := make([]any, 0, len(list))
	for i, m := range list {
		msg, ok := m.(*jinja.Dict)
		if !ok {
			return nil, fmt.Errorf("%w: messages[%d] is not an object", ErrInvalidRequest, i)
		}
		out, err := normalizeMessage(msg, format)
		if err != nil {
			return nil, fmt.Errorf("messages[%d]: %w", i, err)
		}
		conv = append(conv, out)
	}
	return conv, nil
}

func normalizeMessage(msg *jinja.Dict, format contentFormat) (*jinja.Dict, error) {
	role, ok := get(msg, "role").(string)
	if !ok {
		return nil, fmt.Errorf("%w: role must be a string", ErrInvalidRequest)
	}
	content, err := normalizeContent(get(msg, "content"), format)
	if err != nil {
		return nil, err
	}
	out := jinja.NewDict()
	out.Set("role", role)
	out.Set("content", content)
	switch role {
	case "assistant":
		// _parse_chat_message_content: tool_calls copied when present and
		// not None; "reasoning" copied twice, as reasoning and as the older
		// reasoning_content name templates read.
		if tc, ok := msg.Get("tool_calls"); ok && tc != nil {
			calls, err := normalizeToolCalls(tc)
			if err != nil {
				return nil, err
			}
			out.Set("tool_calls", calls)
		}
		if r, ok := msg.Get("reasoning"); ok && r != nil {
			out.Set("reasoning", r)
			out.Set("reasoning_content", r)
		}
	case "tool":
		if id, ok := msg.Get("tool_call_id"); ok {
			out.Set("tool_call_id", id)
		}
		// Tool results sent as a list of text parts become one string even in
		// the "openai" format, because most templates print tool content.
		if parts, ok := content.([]any); ok && allText(parts) {
			texts := make([]string, len(parts))
			for i, p := range parts {
				texts[i], _ = get(p.(*jinja.Dict), "text").(string)
			}
			out.Set("content", strings.Join(texts, "\n"))
		}
	}
	if name, ok := get(msg, "name").(string); ok {
		out.Set("name", name)
	}
	if task, ok := get(msg, "task").(string); ok {
		out.Set("task", task)
	}
	if role == "developer" {
		out.Set("tools", get(msg, "tools"))
	}
	postprocessToolCalls(out)
	return out, nil
}

func allText(parts []any) bool {
	for _, p := range parts {
		if d, ok := p.(*jinja.Dict); ok && get(d, "type") != "text" {
			return false
		}
	}
	return true
}

// normalizeContent mirrors _parse_chat_message_content_parts: None is no
// parts, a string is one text part; in the "string" format the texts are
// joined with "\n", in the "openai" format each becomes {"type": "text",
// "text": ...}. A part whose text is None is skipped. Media parts make the
// request untokenizable: the engine expands them into placeholder tokens
// the router cannot predict.
func normalizeContent(c any, format contentFormat) (any, error) {
	var parts []any
	switch x := c.(type) {
	case nil:
	case string:
		parts = []any{x}
	case []any:
		parts = x
	default:
		return nil, fmt.Errorf("%w: content must be a string, a list of parts or null", ErrInvalidRequest)
	}
	if len(parts) > MaxContentParts {
		return nil, overLimit("MaxContentParts", MaxContentParts, "content parts (%d)", len(parts))
	}
	var texts []string
	var wrapped []any
	for i, p := range parts {
		text, skip, err := partText(p)
		if err != nil {
			return nil, fmt.Errorf("content[%d]: %w", i, err)
		}
		if skip {
			continue
		}
		if name, ok := isToolReference(p); ok && format == formatOpenAI {
			d := jinja.NewDict()
			d.Set("type", "tool_reference")
			d.Set("name", name)
			wrapped = append(wrapped, d)
			continue
		}
		texts = append(texts, text)
		d := jinja.NewDict()
		d.Set("type", "text")
		d.Set("text", text)
		wrapped = append(wrapped, d)
	}
	if format == formatOpenAI {
		if wrapped == nil {
			wrapped = []any{}
		}
		return wrapped, nil
	}
	return strings.Join(texts, "\n"), nil
}

func isToolReference(p any) (any, bool) {
	d, ok := p.(*jinja.Dict)
	if !ok || get(d, "type") != "tool_reference" {
		return nil, false
	}
	return get(d, "name"), true
}

// partText returns the text of one content part (_parse_chat_message_content_part).
func partText(p any) (text string, skip bool, err error) {
	if s, ok := p.(string); ok {
		return s, false, nil
	}
	d, ok := p.(*jinja.Dict)
	if !ok {
		return "", false, fmt.Errorf("%w: content part is not an object", ErrInvalidRequest)
	}
	typ, hasType := d.Get("type")
	uuid := get(d, "uuid")
	ts, isStr := typ.(string)
	if field, known := textPartTypes[ts]; isStr && known && uuid == nil {
		v := get(d, field)
		if v == nil && (ts == "text" || ts == "refusal") {
			return "", true, nil // vLLM logs and skips the part
		}
		s, ok := v.(string)
		if !ok {
			return "", false, fmt.Errorf("%w: %s part has no string %q", ErrInvalidRequest, ts, field)
		}
		return s, false, nil
	}
	if !hasType || typ == nil || uuid != nil {
		for _, k := range mediaPartKeys {
			if _, ok := d.Get(k); ok {
				return "", false, untokenizable("multimodal", "content part %q", k)
			}
		}
		if _, ok := d.Get("tool_reference"); ok {
			return "", false, untokenizable("content_part", "untyped tool_reference part")
		}
		return "", false, fmt.Errorf("%w: Missing 'type' field in multimodal part.", ErrInvalidRequest)
	}
	if !isStr {
		return "", false, fmt.Errorf("%w: Invalid 'type' field in multimodal part.", ErrInvalidRequest)
	}
	switch ts {
	case "image_url", "input_image", "image_pil", "image_embeds", "audio_embeds", "prompt_embeds", "audio_url", "input_audio", "video_url":
		return "", false, untokenizable("multimodal", "content part %q", ts)
	}
	return "", false, fmt.Errorf("%w: Unsupported chat content part type: %q", ErrInvalidRequest, ts)
}

// normalizeToolCalls mirrors pydantic's validation of the OpenAI tool-call
// TypedDicts: each call keeps id, function {arguments, name} and type, in
// that declared order, and drops any other key.
func normalizeToolCalls(v any) (any, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: tool_calls must be a list", ErrInvalidRequest)
	}
	out := make([]any, len(list))
	for i, c := range list {
		call, ok := c.(*jinja.Dict)
		if !ok {
			return nil, fmt.Errorf("%w: tool_calls[%d] is not an object", ErrInvalidRequest, i)
		}
		fn, ok := get(call, "function").(*jinja.Dict)
		if !ok {
			return nil, fmt.Errorf("%w: tool_calls[%d].function is not an object", ErrInvalidRequest, i)
		}
		id, okID := get(call, "id").(string)
		name, okName := get(fn, "name").(string)
		args, okArgs := get(fn, "arguments").(string)
		if !okID || !okName || !okArgs {
			return nil, fmt.Errorf("%w: tool_calls[%d] needs string id, function.name and function.arguments", ErrInvalidRequest, i)
		}
		if t, ok := call.Get("type"); ok && t != "function" {
			return nil, fmt.Errorf("%w: tool_calls[%d].type must be \"function\"", ErrInvalidRequest, i)
		}
		f := jinja.NewDict()
		f.Set("arguments", args)
		f.Set("name", name)
		d := jinja.NewDict()
		d.Set("id", id)
		d.Set("function", f)
		d.Set("type", "function")
		out[i] = d
	}
	return out, nil
}

// postprocessToolCalls mirrors _postprocess_messages: an empty tool_calls
// list is dropped, and string arguments are parsed with json.loads (an
// unparsable string becomes {}), because templates expect arguments as
// objects. Validation has already made every arguments value a string.
func postprocessToolCalls(msg *jinja.Dict) {
	calls, ok := get(msg, "tool_calls").([]any)
	if !ok {
		return
	}
	if len(calls) == 0 {
		msg.Delete("tool_calls")
		return
	}
	for _, c := range calls {
		fn := get(c.(*jinja.Dict), "function").(*jinja.Dict)
		parsed, err := decodeJSON([]byte(get(fn, "arguments").(string)))
		if err != nil {
			parsed = jinja.NewDict()
		}
		fn.Set("arguments", parsed)
	}
}

// normalizeTools mirrors ChatCompletionToolsParam.model_dump(): type
// (default "function") then function {name, description, parameters, then
// any extra keys in request order}, then the tool's extra keys. Missing
// description and parameters become None.
func normalizeTools(v any) (any, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: tools must be a list", ErrInvalidRequest)
	}
	out := make([]any, len(list))
	for i, t := range list {
		tool, ok := t.(*jinja.Dict)
		if !ok {
			return nil, fmt.Errorf("%w: tools[%d] is not an object", ErrInvalidRequest, i)
		}
		typ := any("function")
		if x, ok := tool.Get("type"); ok {
			typ = x
		}
		if typ != "function" {
			return nil, untokenizable("tool_type", "tools[%d].type %s", i, jinja.Str(typ))
		}
		fn, ok := get(tool, "function").(*jinja.Dict)
		if !ok {
			return nil, fmt.Errorf("%w: tools[%d].function is not an object", ErrInvalidRequest, i)
		}
		if _, ok := get(fn, "name").(string); !ok {
			return nil, fmt.Errorf("%w: tools[%d].function.name is not a string", ErrInvalidRequest, i)
		}
		if p, ok := fn.Get("parameters"); ok && p != nil {
			if _, isDict := p.(*jinja.Dict); !isDict {
				return nil, fmt.Errorf("%w: tools[%d].function.parameters is not an object", ErrInvalidRequest, i)
			}
		}
		if d, ok := fn.Get("description"); ok && d != nil {
			if _, isStr := d.(string); !isStr {
				return nil, fmt.Errorf("%w: tools[%d].function.description is not a string", ErrInvalidRequest, i)
			}
		}
		f := withDeclared(fn, []string{"name", "description", "parameters"})
		d := jinja.NewDict()
		d.Set("type", "function")
		d.Set("function", f)
		for _, k := range tool.Keys() {
			if k != "type" && k != "function" {
				d.Set(k, get(tool, k))
			}
		}
		out[i] = d
	}
	return out, nil
}

// withDeclared copies d with the declared fields first (None when absent)
// and the remaining keys after them, as pydantic dumps a model with
// extra="allow".
func withDeclared(d *jinja.Dict, declared []string) *jinja.Dict {
	out := jinja.NewDict()
	for _, k := range declared {
		out.Set(k, get(d, k))
	}
	for _, k := range d.Keys() {
		if _, ok := out.Get(k); !ok {
			out.Set(k, get(d, k))
		}
	}
	return out
}
