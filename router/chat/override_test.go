package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// partsTemplate loops over message content, so vLLM's "auto" content
// format resolves to "openai" for it: content arrives as a list of
// {"type": "text"} parts instead of a joined string.
const partsTemplate = `{%- set msgs = messages -%}
{%- for message in msgs -%}
<{{ message.role }}{% if message.name is defined %} name="{{ message.name }}"{% endif %}>
{%- if message.content is string %}{{ message.content }}{% else %}{% for part in message['content'] %}[{{ part.type }}]{{ part.text }}{% endfor %}{% endif %}
{%- if message.tool_calls is defined %}{% for c in message.tool_calls %}{{ c | tojson }}{% endfor %}{% endif %}
{%- if message.reasoning_content is defined %}(r:{{ message.reasoning_content }}){% endif %}
</{{ message.role }}>
{% endfor -%}
{%- if tools %}{{ tools | tojson(indent=2) }}{% endif -%}
{%- if add_generation_prompt %}<assistant>{% endif -%}`

// namedTemplates is a tokenizer_config.json whose chat_template is a list
// of named templates, as some models ship it.
const namedTemplates = `{"eos_token": {"content": "<|im_end|>"}, "chat_template": [
 {"name": "default", "template": "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"},
 {"name": "tool_use", "template": "TOOLS {{ tools | map(attribute='function') | map(attribute='name') | join(',') }}\n{% for m in messages %}{{ m.role }}: {{ m.content }}{{ eos_token }}\n{% endfor %}"}]}`

// TestRequestTemplates checks, against the Python reference, a request's
// chat_template (a template text whose content loops switch vLLM to the
// "openai" content format, or the name of one of the model's templates)
// and the selection among named templates (tool_use when tools are given).
func TestRequestTemplates(t *testing.T) {
	m, files := loadFamily(t, "qwen3", Options{TrustRequestTemplate: true})
	dir := t.TempDir()
	named := filepath.Join(dir, "tokenizer_config.json")
	if err := os.WriteFile(named, []byte(namedTemplates), 0o644); err != nil {
		t.Fatal(err)
	}
	nm, err := LoadModel(files.TokenizerJSON, named, Options{TrustRequestTemplate: true})
	if err != nil {
		t.Fatal(err)
	}
	g := newBodyGen(42)
	var overridden, plain [][]byte
	for i := range 120 {
		b := g.body()
		var req map[string]any
		if err := json.Unmarshal(b, &req); err != nil {
			t.Fatal(err)
		}
		plain = append(plain, b)
		if i%4 == 3 {
			req["chat_template"] = "tool_use"
		} else {
			req["chat_template"] = partsTemplate
		}
		o, _ := json.Marshal(req)
		overridden = append(overridden, o)
	}
	for _, c := range []struct {
		name   string
		model  *Model
		config string
		bodies [][]byte
	}{
		{"request template on qwen3", m, files.TokenizerConfig, overridden[:90]},
		{"named templates", nm, named, plain},
		{"request names a template", nm, named, overridden[90:]},
	} {
		ref := pythonRender(t, c.config, true, c.bodies)
		same := 0
		for i, b := range c.bodies {
			got, err := c.model.RenderChat(b)
			switch want := ref[i]; {
			case want.Text == nil && err == nil:
				t.Errorf("%s body %d: reference refused (%s), we rendered %q", c.name, i, want.Error, clip(got))
			case want.Text != nil && err != nil:
				t.Errorf("%s body %d: %v\n%s", c.name, i, err, b)
			case want.Text != nil && got != *want.Text:
				t.Errorf("%s body %d:\n got %q\nwant %q", c.name, i, clip(got), clip(*want.Text))
			case want.Text != nil:
				same++
			}
		}
		t.Logf("%s: %d of %d bodies rendered identically", c.name, same, len(c.bodies))
		if same < len(c.bodies)/2 {
			t.Errorf("%s: only %d bodies rendered", c.name, same)
		}
	}

	// Without --trust-request-chat-template vLLM refuses a request template.
	strict, _ := loadFamily(t, "qwen3", Options{})
	if _, err := strict.RenderChat(overridden[0]); err == nil {
		t.Error("a request chat_template was accepted without TrustRequestTemplate")
	}
}
