package chat

import (
	"fmt"
	"math/rand/v2"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat/jinja"
)

// bodyGen generates raw OpenAI chat request bodies covering what vLLM's
// normalisation and the templates branch on: system, user, assistant and
// tool turns; list-of-parts content (with null and input_text parts); tool
// calls with unsorted, invalid or empty JSON arguments; reasoning; tools
// whose schemas hold <&', non-ASCII text, unsorted keys and Python-sensitive
// numbers; generation prompt on, off or absent; continue_final_message; and
// chat_template_kwargs.
type bodyGen struct{ r *rand.Rand }

func newBodyGen(seed uint64) *bodyGen { return &bodyGen{rand.New(rand.NewPCG(seed, 7))} }

var genWords = []string{
	"hello", "world", "Qu'est-ce", "naïve", "日本語のテキスト", "emoji 🙂🚀", "<&'\">", "tab\there",
	"line\nbreak", "  padded  ", "x=1; y=2", "ÆØÅ", "Ελληνικά", "<|im_end|>", "</think>", "100%",
	"{\"json\": true}", "back\\slash", "\u00a0nbsp", "ZWJ 👩‍💻", "trailing\n\n", "Ünïcödé",
}

func (g *bodyGen) text() string {
	n := 1 + g.r.IntN(6)
	s := ""
	for i := range n {
		if i > 0 {
			s += " "
		}
		s += genWords[g.r.IntN(len(genWords))]
	}
	return s
}

func (g *bodyGen) chance(p float64) bool { return g.r.Float64() < p }

// content returns a string or a list of parts.
func (g *bodyGen) content() any {
	if g.chance(0.7) {
		return g.text()
	}
	var parts []any
	for range 1 + g.r.IntN(3) {
		p := jinja.NewDict()
		switch g.r.IntN(5) {
		case 0:
			p.Set("type", "input_text")
			p.Set("text", g.text())
		case 1:
			p.Set("text", g.text()) // key order differs from the usual
			p.Set("type", "text")
		case 2:
			if g.chance(0.3) {
				p.Set("type", "text")
				p.Set("text", nil) // skipped by vLLM
				break
			}
			fallthrough
		default:
			p.Set("type", "text")
			p.Set("text", g.text())
		}
		parts = append(parts, p)
	}
	return parts
}

func (g *bodyGen) value(depth int) any {
	switch g.r.IntN(9) {
	case 0:
		return g.text()
	case 1:
		return int64(g.r.IntN(2000) - 1000)
	case 2:
		return []float64{0.5, 1e-7, 1e21, 2.5, 123456789.0, -0.0001, 1e16, 3.14159}[g.r.IntN(8)]
	case 3:
		return g.chance(0.5)
	case 4:
		return nil
	case 5, 6:
		if depth > 0 {
			return g.object(depth - 1)
		}
		return "leaf"
	default:
		if depth > 0 {
			return []any{g.value(depth - 1), g.value(depth - 1)}
		}
		return []any{}
	}
}

var genKeys = []string{"zeta", "alpha", "Mid", "clé", "b", "a", "_x", "数", "type", "enum"}

func (g *bodyGen) object(depth int) *jinja.Dict {
	d := jinja.NewDict()
	for range g.r.IntN(4) {
		d.Set(genKeys[g.r.IntN(len(genKeys))], g.value(depth))
	}
	return d
}

func (g *bodyGen) tool(i int) *jinja.Dict {
	fn := jinja.NewDict()
	if g.chance(0.5) {
		fn.Set("parameters", g.object(2)) // before name: dump order must fix it
	}
	fn.Set("name", fmt.Sprintf("tool_%d", i))
	if g.chance(0.7) {
		fn.Set("description", "Gets <&'> "+g.text())
	}
	if g.chance(0.2) {
		fn.Set("strict", true)
	}
	t := jinja.NewDict()
	if g.chance(0.2) {
		t.Set("x_extra", g.text())
	}
	t.Set("function", fn)
	if g.chance(0.8) {
		t.Set("type", "function")
	}
	return t
}

func (g *bodyGen) toolCalls() []any {
	var calls []any
	for i := range 1 + g.r.IntN(2) {
		fn := jinja.NewDict()
		switch g.r.IntN(6) {
		case 0:
			fn.Set("arguments", "not json")
		case 1:
			fn.Set("arguments", "")
		default:
			fn.Set("arguments", pyDumps(g.object(1), false))
		}
		fn.Set("name", fmt.Sprintf("tool_%d", i))
		c := jinja.NewDict()
		c.Set("type", "function")
		c.Set("function", fn)
		c.Set("id", fmt.Sprintf("call_%d", g.r.IntN(1000)))
		calls = append(calls, c)
	}
	return calls
}

func msg(role string, content any) *jinja.Dict {
	d := jinja.NewDict()
	d.Set("role", role)
	d.Set("content", content)
	return d
}

// body returns one request body as JSON.
func (g *bodyGen) body() []byte {
	var msgs []any
	if g.chance(0.6) {
		msgs = append(msgs, msg("system", g.content()))
	}
	for turn := range 1 + g.r.IntN(4) {
		u := msg("user", g.content())
		if g.chance(0.1) {
			u.Set("name", "alice")
		}
		msgs = append(msgs, u)
		if turn > 0 && g.chance(0.2) {
			msgs = append(msgs, msg("user", "<tool_response>"+g.text()+"</tool_response>"))
		}
		switch g.r.IntN(5) {
		case 0:
			a := msg("assistant", nil)
			if g.chance(0.4) {
				a.Set("content", g.text())
			}
			calls := g.toolCalls()
			a.Set("tool_calls", calls)
			msgs = append(msgs, a)
			for i := range calls {
				t := msg("tool", g.content())
				t.Set("tool_call_id", fmt.Sprintf("call_%d", i))
				msgs = append(msgs, t)
			}
		case 1:
			msgs = append(msgs, msg("assistant", "<think>\n"+g.text()+"\n</think>\n\n"+g.text()))
		case 2:
			a := msg("assistant", g.text())
			a.Set("reasoning", g.text())
			msgs = append(msgs, a)
		default:
			a := msg("assistant", g.content())
			if g.chance(0.2) {
				a.Set("tool_calls", []any{})
			}
			msgs = append(msgs, a)
		}
	}
	if g.chance(0.7) {
		msgs = append(msgs, msg("user", g.content()))
	}
	req := jinja.NewDict()
	req.Set("model", "m")
	req.Set("messages", msgs)
	last := msgs[len(msgs)-1].(*jinja.Dict)
	switch g.r.IntN(3) {
	case 0:
		req.Set("add_generation_prompt", true)
	case 1:
		req.Set("add_generation_prompt", false)
		if get(last, "role") == "assistant" && g.chance(0.6) {
			req.Set("continue_final_message", true)
		}
	}
	if g.chance(0.4) {
		var tools []any
		for i := range 1 + g.r.IntN(3) {
			tools = append(tools, g.tool(i))
		}
		req.Set("tools", tools)
	}
	if g.chance(0.3) {
		kw := jinja.NewDict()
		kw.Set("enable_thinking", g.chance(0.5))
		kw.Set("unused_kwarg", int64(1))
		req.Set("chat_template_kwargs", kw)
	}
	return []byte(pyDumps(req, g.chance(0.3))) // \u escapes, surrogate pairs included
}

// dumpsTemplate is Python's json.dumps(v, ensure_ascii=a), through the
// engine's tojson filter (transformers' tojson, whose other defaults are
// json.dumps's).
var dumpsTemplate = func() *jinja.Template {
	t, err := jinja.Compile("{{ v|tojson(ensure_ascii=a) }}")
	if err != nil {
		panic(err)
	}
	return t
}()

// pyDumps is json.dumps(v, ensure_ascii=ensureASCII) of a template value.
func pyDumps(v any, ensureASCII bool) string {
	vars := jinja.NewDict()
	vars.Set("v", v)
	vars.Set("a", ensureASCII)
	s, err := dumpsTemplate.Render(vars)
	if err != nil {
		panic(err)
	}
	return s
}
