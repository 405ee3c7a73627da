package jinja

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// templateCases exercise the Jinja2 features chat templates use, each
// rendered by Python's jinja2 with the Hugging Face environment and by
// Compile/Render. Vars are JSON objects.
var templateCases = []struct{ name, src, vars string }{
	{"namespace", `{% set ns = namespace(n=0, s='') %}{% for x in xs %}{% set ns.n = ns.n + x %}{% set ns.s = ns.s ~ x %}{% endfor %}{{ ns.n }} {{ ns.s }}`, `{"xs":[1,2,3]}`},
	{"loop vars", `{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.cycle('a','b') }}{% if not loop.first %}{{ loop.previtem }}{% endif %}{% if not loop.last %}{{ loop.nextitem }}{% endif %}|{% endfor %}`, `{"xs":["p","q","r"]}`},
	{"loop else filter break continue", `{% for x in xs if x > 1 %}{% if x == 3 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% else %}none{% endfor %}{% for y in [] %}{% else %}empty{% endfor %}`, `{"xs":[1,2,3,4,5,6]}`},
	{"loop scope", `{% set a = 1 %}{% for x in xs %}{{ a }}{% set a = x %}{{ a }}{% endfor %}{{ a }}`, `{"xs":[5,6]}`},
	{"slicing", `{{ xs[::-1] }}{{ xs[1:] }}{{ xs[:-1] }}{{ xs[::2] }}{{ xs[-1] }}{{ xs[10] }}{{ s[::-1] }}{{ s[1:3] }}{{ s[-2:] }}{{ xs[5:1:-2] }}`, `{"xs":[0,1,2,3,4,5,6],"s":"héllo"}`},
	{"filters", `{{ xs|length }} {{ '  a b  '|trim }} {{ 'x'|upper }}{{ 'Ab cD'|lower }} {{ 'hello world-x'|title }} {{ 'hELLO'|capitalize }} {{ u|default('d') }} {{ ''|default('e', true) }} {{ xs|first }}{{ xs|last }} {{ xs|join('-') }} {{ 'ab'|list }} {{ d|items|map('first')|list }} {{ 'aaa'|replace('a','b',2) }} {{ '3.7'|int }} {{ 'x'|int(5) }} {{ '2.5'|float }} {{ xs|reverse|list }} {{ [3,1,2]|sort }} {{ ['b','A','a']|unique|list }} {{ -3|abs }} {{ 2.567|round(2) }} {{ xs|sum }} {{ xs|min }}{{ xs|max }} {{ 'a b  c'|wordcount }} {{ '<&>'|e }} {{ 12|string ~ 'x' }}`, `{"xs":[4,2,9],"d":{"k":1,"j":[2]}}`},
	{"attr filters", `{{ ms|selectattr('role','equalto','user')|map(attribute='c')|join(',') }} {{ ms|rejectattr('role','eq','user')|list|length }} {{ ms|map(attribute='missing', default='z')|join }} {{ [0,1,2,'']|select|list }} {{ [1,2,3,4]|reject('odd')|list }} {{ ms|selectattr('c')|list|length }} {{ ms|sort(attribute='c', reverse=true)|map(attribute='c')|join }}`, `{"ms":[{"role":"user","c":"a"},{"role":"bot","c":"b"},{"role":"user","c":""}]}`},
	{"tojson", `{{ v|tojson }}|{{ v|tojson(indent=2) }}|{{ v|tojson(sort_keys=true) }}|{{ v|tojson(ensure_ascii=true) }}|{{ v|tojson(separators=[',',':']) }}|{{ {}|tojson(indent=2) }}{{ []|tojson }}|{{ 'a'|tojson(indent='\t') }}`, `{"v":{"z":"<&'\"é😀\n\u0001","a":[1,2.5,1e-7,1e21,123456789.0,true,null,{}],"m":{"q":[]}}}`},
	{"str methods", `{{ s.startswith('He') }}{{ s.startswith(('x','H')) }}{{ s.endswith('!') }} {{ s.split() }} {{ s.split('l') }} {{ s.split('l', 1) }} {{ s.rsplit('l', 1) }} {{ '..a..'.strip('.') }}{{ '..a..'.lstrip('.') }}{{ '..a..'.rstrip('.') }} {{ s.replace('l','L',1) }} {{ s.find('o') }} {{ s.rfind('o') }} {{ s.find('zz') }} {{ s.count('l') }} {{ '-'.join(['a','b']) }} {{ s.upper() }}{{ s.lower() }} {{ '12'.isdigit() }}{{ 'a1'.isdigit() }} {{ '{} {x} {{}}'.format(1, x=2) }} {{ s.title() }} {{ ' \t\n'.isspace() }} {{ 'a\nb\r\nc'.splitlines() }}`, `{"s":"Hello wörld, hello!"}`},
	{"dict methods", `{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{{ d.keys()|list }}{{ d.values()|list }}{{ d.get('a') }}{{ d.get('zz') }}{{ d.get('zz', 7) }}{{ d.a }}{{ d['b'] }}{{ d.zz is defined }}`, `{"d":{"b":2,"a":1}}`},
	{"tests", `{{ u is defined }}{{ n is none }}{{ s is string }}{{ 1 is number }}{{ 1.5 is integer }}{{ 1.5 is float }}{{ d is mapping }}{{ xs is iterable }}{{ s is sequence }}{{ t is boolean }}{{ t is true }}{{ t is false }}{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}{{ s is eq 'ab' }}{{ 'a' is in s }}{{ 'ab' is lower }}{{ 'AB' is upper }}{{ n is not none }}{{ t is sameas true }}`, `{"n":null,"s":"ab","d":{},"xs":[],"t":true}`},
	{"operators", `{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7 / 2 }} {{ 6 / 3 }} {{ 1 + 2.5 }} {{ 'a' ~ 1 ~ none }} {{ 'ab' * 2 }} {{ [1] + [2] }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' in 'cat' }} {{ 2 not in [1] }} {{ 'k' in {'k':1} }} {{ 'x' if f else 'y' }} {{ 'x' if f }}| {{ 1 == 1.0 }} {{ true == 1 }} {{ none or 'd' }} {{ 0 and 1 }} {{ not '' }} {{ -(2) }} {{ (1, 2)|list }} {{ 0.1 + 0.2 }} {{ 1e100 }} {{ 10000000000000000.0 }} {{ 0.0001 }} {{ 0.00001 }}`, `{"f":false}`},
	{"printing", `{{ none }}|{{ true }}|{{ [1, 'a', none, 1.0, {'k': "it's"}] }}|{{ d }}|{{ u }}|{{ 'tab\tquote\'' }}|{{ ["é\u00a0\u200b\x01"] }}`, `{"d":{"x":[true,null]}}`},
	{"whitespace", "a\n  {% if true %}\n    b\n  {% endif %}\nc {%- if true %} d {% endif -%} e\n{# comment #}\nf {{- ' g ' -}} h\n  {%+ if true %}i{% endif %}\n\t{% for x in [1] %}\n{{ x }}\n\t{%- endfor %}\nend\n\n", `{}`},
	{"trailing newline and CRLF", "line1\r\nline2\r\n  {% if true %}x{% endif %}\r\n", `{}`},
	{"macros", `{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('a') }} {{ greet('b', '?') }} {{ greet(name='c', punct='.') }}{% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %} {{ rec(3) }}`, `{}`},
	{"set block and unpack", `{% set body %}x{{ 1 + 1 }}y{% endset %}{{ body }}{% set a, b = [1, 2] %}{{ a }}{{ b }}{% set t = (3, 4) %}{% for p, q in [t] %}{{ p }}{{ q }}{% endfor %}`, `{}`},
	{"literals", `{{ 'a\nb' }}|{{ "\u00e9\x41\\d" }}|{{ 'it''s' }}|{{ 1_000 }}|{{ {'a': [1, {'b': none}]}['a'][1].b }}|{{ [1,2,][1] }}`, `{}`},
	{"raw generation filter", `{% raw %}{{ not rendered }}{% endraw %}{% generation %}gen{{ 1 }}{% endgeneration %}{% filter upper %}up {{ 'x' }}{% endfilter %}`, `{}`},
	{"raise_exception", `{% if xs|length > 1 %}{{ raise_exception('too many: ' ~ xs|length) }}{% endif %}`, `{"xs":[1,2]}`},
	{"undefined attribute errors", `{{ u.x }}`, `{}`},
	{"none attribute is undefined", `{{ n.x }}|{{ n.x is defined }}`, `{"n":null}`},
	{"type error", `{{ 'a' + 1 }}`, `{}`},
	{"immutable list", `{{ xs.append(1) }}`, `{"xs":[]}`},
	{"missing endif", `{% if true %}x`, `{}`},
	{"index out of range is undefined", `[{{ xs[5] }}]{{ xs[5] is defined }}`, `{"xs":[1]}`},
	{"content loops", `{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}{% for p in m.content %}[{{ p.type }}:{{ p.text }}]{% endfor %}{% endif %}{% endfor %}`, `{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]},{"role":"user","content":"b"}]}`},
	{"strftime format", `{{ strftime_now('%Y')|length }}`, `{}`},
	{"plus chains printed", `{{ 'a' + s + '\n' + s }}|{{ 1 + 2 + 3 }}|{{ [1] + xs + [3] }}|{{ s + 'x' ~ 1 }}|{{ ('a' + 'b') + s }}|{{ n + 1.5 }}|{{ '' + '' }}|{% for m in ms %}{{ '<' + m.role + '>' + m.content }}{% endfor %}`, `{"s":"é\n\"q\"\\\/\ud83d\ude00\t","xs":[2],"n":1,"ms":[{"role":"u","content":"x\u0001y"},{"role":"a","content":""}]}`},
}

// TestTemplateFeatures requires identical output (or an error from both)
// for every case.
func TestTemplateFeatures(t *testing.T) {
	py := testenv.Python(t, "jinja2")
	inputs := make([][]byte, len(templateCases))
	for i, c := range templateCases {
		b, err := json.Marshal(map[string]any{"template": c.src, "vars": json.RawMessage(c.vars)})
		if err != nil {
			t.Fatal(err)
		}
		inputs[i] = b
	}
	cmd := exec.Command(py, filepath.Join("testdata", "render_template.py"))
	cmd.Env = append(cmd.Environ(), "PYTHONPATH=testdata")
	cmd.Stdin = bytes.NewReader(append(bytes.Join(inputs, []byte("\n")), '\n'))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", cmd.Path, err, stderr.String())
	}
	lines := bytes.Split(bytes.TrimSuffix(out, []byte("\n")), []byte("\n"))
	if len(lines) != len(inputs) {
		t.Fatalf("%s answered %d lines for %d cases", cmd.Path, len(lines), len(inputs))
	}
	errors := 0
	for i, c := range templateCases {
		var want struct {
			Text  *string `json:"text"`
			Error string  `json:"error"`
		}
		if err := json.Unmarshal(lines[i], &want); err != nil {
			t.Fatal(err)
		}
		got, err := renderCase(c.src, c.vars)
		switch {
		case want.Text == nil && err == nil:
			t.Errorf("%s: python raised %s, we rendered %q", c.name, want.Error, got)
		case want.Text == nil:
			errors++
			t.Logf("%s: both refuse (python %s; go %v)", c.name, want.Error, err)
		case err != nil:
			t.Errorf("%s: %v (python rendered %q)", c.name, err, *want.Text)
		case got != *want.Text:
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, *want.Text)
		}
	}
	if errors != 5 {
		t.Errorf("%d cases refused by both, want the 5 error cases", errors)
	}
}

func renderCase(src, vars string) (string, error) {
	tmpl, err := Compile(src)
	if err != nil {
		return "", err
	}
	dec := json.NewDecoder(strings.NewReader(vars))
	dec.UseNumber()
	v, err := jsonValue(dec)
	if err != nil {
		return "", err
	}
	return tmpl.Render(v.(*Dict))
}

// jsonValue reads the next JSON value from dec as a template value,
// keeping object key order (the order tojson prints) and telling integers
// from floats as Python's json.loads does.
func jsonValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch x := tok.(type) {
	case json.Delim:
		if x == '[' {
			list := []any{}
			for dec.More() {
				v, err := jsonValue(dec)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
			_, err := dec.Token()
			return list, err
		}
		d := NewDict()
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			v, err := jsonValue(dec)
			if err != nil {
				return nil, err
			}
			d.Set(k.(string), v)
		}
		_, err := dec.Token()
		return d, err
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n, nil
		}
		return x.Float64()
	}
	return tok, nil
}
