//go:build linux

package chat

// Evaluation of an alternative engine, not a test of ours: issue 17 asks
// whether github.com/ardanlabs/jinja (v1.8.0, the last version for Go 1.26)
// could replace this package's Jinja engine. The rule is that it must pass
// the parity suite (the bodies of TestParityWithReferences against
// python3-jinja2) and render within 1.5x of our time. The figures and the
// decision are in BENCHMARKS.md ("ardanlabs/jinja v1.8.0 against
// router/chat's engine"); BenchmarkArdanParity and BenchmarkArdanCompare
// produce them, TestArdanlabsEvaluationSmoke keeps them from changing
// unnoticed.

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	ardan "github.com/ardanlabs/jinja"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat/jinja"
)

// ardanModel is a loaded family with each of its chat templates also
// compiled by ardanlabs/jinja, keyed by our compiled template.
type ardanModel struct {
	m         *Model
	files     string // tokenizer_config.json
	templates map[*template]*ardan.Template
}

func loadArdan(t testing.TB, family string) ardanModel {
	t.Helper()
	m, files := loadFamily(t, family, Options{})
	data, err := os.ReadFile(files.TokenizerConfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := parseConfig(data)
	if err != nil {
		t.Fatal(err)
	}
	am := ardanModel{m: m, files: files.TokenizerConfig, templates: map[*template]*ardan.Template{}}
	for name, src := range cfg.templates {
		jt, err := ardan.Compile(src)
		if err != nil {
			t.Fatalf("ardanlabs/jinja cannot compile the %s template %q: %v", family, name, err)
		}
		am.templates[m.templates[name]] = jt
	}
	return am
}

// toArdan converts a template value of ours into an ardanlabs/jinja value,
// keeping dict key order (FromGoValue would sort map keys). Integers past
// 64 bits have no ardanlabs type; they become their digits as a string.
func toArdan(v any) ardan.Value {
	switch v := v.(type) {
	case nil:
		return ardan.None()
	case bool:
		return ardan.NewBool(v)
	case int64:
		return ardan.NewInt(v)
	case jinja.BigInt:
		return ardan.NewString(string(v))
	case float64:
		return ardan.NewFloat(v)
	case string:
		return ardan.NewString(v)
	case []any:
		items := make([]ardan.Value, len(v))
		for i, x := range v {
			items[i] = toArdan(x)
		}
		return ardan.NewList(items)
	case *jinja.Dict:
		d := ardan.NewDict()
		for _, k := range v.Keys() {
			d.AsDict().Set(k, toArdan(get(v, k)))
		}
		return d
	}
	panic(fmt.Sprintf("toArdan: no conversion for %T", v))
}

func ardanVars(vars *jinja.Dict) map[string]ardan.Value {
	out := make(map[string]ardan.Value, len(vars.Keys()))
	for _, k := range vars.Keys() {
		out[k] = toArdan(get(vars, k))
	}
	return out
}

// renderChat renders a body as RenderChat does, with ardanlabs/jinja in
// place of our template engine: the same vLLM normalisation before it and
// the same continue_final_message cut after it. A body that the shared
// normalisation refuses is reported with frontEnd set: the two engines
// cannot differ on it.
func (am ardanModel) renderChat(body []byte) (text string, frontEnd bool, err error) {
	req, err := decodeBody(body)
	if err != nil {
		return "", true, err
	}
	call, err := am.m.prepareChat(req)
	if err != nil {
		return "", true, err
	}
	jt := am.templates[call.tmpl]
	if jt == nil {
		return "", true, errors.New("request template: not compiled for ardanlabs/jinja")
	}
	if text, err = jt.RenderValues(ardanVars(call.vars)); err != nil {
		return "", false, err
	}
	text, err = call.finish(text)
	return text, false, err
}

// ardanOutcome is the comparison of one family's parity bodies.
type ardanOutcome struct {
	identical, bothRefused, frontEnd int
	// divergences counts the differing bodies by category; first keeps
	// the first example of each.
	divergences map[string]int
	first       map[string]string
}

// compareArdan renders the first n parity bodies of a family (the same
// bodies, from the same seed, as TestParityWithReferences) with
// ardanlabs/jinja and compares them with python3-jinja2.
func compareArdan(t testing.TB, family string, n int) ardanOutcome {
	am := loadArdan(t, family)
	g := newBodyGen(uint64(len(family)))
	bodies := make([][]byte, n)
	for i := range bodies {
		bodies[i] = g.body()
	}
	ref := pythonRender(t, am.files, false, bodies)
	o := ardanOutcome{divergences: map[string]int{}, first: map[string]string{}}
	for i, b := range bodies {
		got, frontEnd, err := am.renderChat(b)
		want := ref[i]
		var cat, example string
		switch {
		case want.Text == nil && err != nil:
			o.bothRefused++
			if frontEnd {
				o.frontEnd++
			}
			continue
		case want.Text == nil:
			cat, example = "renders what jinja2 refuses", fmt.Sprintf("jinja2: %s%s", want.Error, want.Untokenizable)
		case err != nil:
			cat, example = "refuses what jinja2 renders: "+errorKind(err), err.Error()
		case got == *want.Text:
			o.identical++
			continue
		default:
			cat, example = diffCategory(got, *want.Text)
		}
		if o.divergences[cat]++; o.divergences[cat] == 1 {
			o.first[cat] = fmt.Sprintf("body %d: %s\nbody %s", i, example, clip(string(b)))
		}
	}
	return o
}

// errorKind is an error's message without the parts that vary by body.
func errorKind(err error) string {
	s := err.Error()
	if i := strings.IndexAny(s, "\"'"); i > 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

// diffCategory names how two renderings differ by what surrounds the first
// difference: the window of the reference text that the engines disagree
// on, with the common prefix and suffix cut.
func diffCategory(got, want string) (string, string) {
	p := 0
	for p < len(got) && p < len(want) && got[p] == want[p] {
		p++
	}
	s := 0
	for s < len(got)-p && s < len(want)-p && got[len(got)-1-s] == want[len(want)-1-s] {
		s++
	}
	g, w := got[p:len(got)-s], want[p:len(want)-s]
	// a short window groups the bodies that differ the same way
	short := func(x string) string {
		if len(x) > 16 {
			return x[:16] + "..."
		}
		return x
	}
	ctx := want[max(0, p-30):p]
	return fmt.Sprintf("text: %q where jinja2 has %q", short(g), short(w)),
		fmt.Sprintf("after %q: got %q, want %q", ctx, short(g), short(w))
}

// BenchmarkArdanParity is the evaluation's parity run: all 960 parity
// bodies through ardanlabs/jinja, compared with python3-jinja2. It reports
// the counts as metrics and logs the divergences by category.
//
//	HEAVY_EXCLUSIVE=1 heavy go test ./router/chat/ -run '^$' -bench ArdanParity -benchtime 1x -v
func BenchmarkArdanParity(b *testing.B) {
	for range b.N {
		total, identical := 0, 0
		for _, family := range []string{"qwen3", "llama3", "deepseek_v3"} {
			o := compareArdan(b, family, parityBodies)
			total += parityBodies
			identical += o.identical + o.bothRefused
			b.Logf("%s: %d of %d identical (%d rendered, %d refused by both, %d of those by the shared normalisation)",
				family, o.identical+o.bothRefused, parityBodies, o.identical, o.bothRefused, o.frontEnd)
			cats := make([]string, 0, len(o.divergences))
			for c := range o.divergences {
				cats = append(cats, c)
			}
			slices.SortFunc(cats, func(x, y string) int { return o.divergences[y] - o.divergences[x] })
			for _, c := range cats {
				b.Logf("  %4d  %s\n        first: %s", o.divergences[c], c, o.first[c])
			}
		}
		b.ReportMetric(float64(identical), "identical")
		b.ReportMetric(float64(total), "bodies")
	}
}

// BenchmarkArdanCompare renders the 2,176-token Qwen3 request of
// BenchmarkRenderOnly (unique last turns) with both engines in one run.
// "request" is the whole RenderChat path (JSON decoding, vLLM's
// normalisation, the template, continue_final_message) with each engine;
// "template" is the template step alone on the prepared variables, where
// ardanlabs/jinja gets values already converted to its own types, as it
// would if it were adopted and normalisation built them directly.
//
//	HEAVY_EXCLUSIVE=1 heavy go test ./router/chat/ -run '^$' -bench 'ArdanCompare|RenderOnly' -benchtime 3000x -cpu 1 -benchmem
func BenchmarkArdanCompare(b *testing.B) {
	am := loadArdan(b, "qwen3")
	gen := benchBody(b, am.m)
	bodies := func(b *testing.B) [][]byte {
		out := make([][]byte, b.N)
		for i := range out {
			out[i] = gen(i + 1)
		}
		return out
	}
	b.Run("request/ours", func(b *testing.B) {
		in := bodies(b)
		b.ReportAllocs()
		b.ResetTimer()
		measure(b, func(i int) {
			if _, err := am.m.RenderChat(in[i]); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("request/ardanlabs", func(b *testing.B) {
		in := bodies(b)
		b.ReportAllocs()
		b.ResetTimer()
		measure(b, func(i int) {
			if _, _, err := am.renderChat(in[i]); err != nil {
				b.Fatal(err)
			}
		})
	})
	prepared := func(b *testing.B) []chatCall {
		out := make([]chatCall, b.N)
		for i, body := range bodies(b) {
			req, err := decodeBody(body)
			if err != nil {
				b.Fatal(err)
			}
			if out[i], err = am.m.prepareChat(req); err != nil {
				b.Fatal(err)
			}
		}
		return out
	}
	b.Run("template/ours", func(b *testing.B) {
		calls := prepared(b)
		b.ReportAllocs()
		b.ResetTimer()
		measure(b, func(i int) {
			if _, err := calls[i].tmpl.Render(calls[i].vars); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("template/ardanlabs", func(b *testing.B) {
		calls := prepared(b)
		vars := make([]map[string]ardan.Value, len(calls))
		for i, c := range calls {
			vars[i] = ardanVars(c.vars)
		}
		jt := am.templates[calls[0].tmpl]
		b.ReportAllocs()
		b.ResetTimer()
		measure(b, func(i int) {
			if _, err := jt.RenderValues(vars[i]); err != nil {
				b.Fatal(err)
			}
		})
	})
}

// ardanSmokeBodies is how many parity bodies per family the smoke test
// compares: enough to meet the recorded divergences, few enough for
// make test.
const ardanSmokeBodies = 40

// TestArdanlabsEvaluationSmoke keeps the recorded evaluation honest: on the
// first parity bodies of each family, ardanlabs/jinja v1.8.0 must still
// agree with python3-jinja2 exactly as often as when BENCHMARKS.md was
// written. A change means the pinned version, the body generator or the
// reference moved: re-run BenchmarkArdanParity and revise the decision.
func TestArdanlabsEvaluationSmoke(t *testing.T) {
	recorded := map[string]int{"qwen3": 39, "llama3": 40, "deepseek_v3": 40}
	for family, want := range recorded {
		t.Run(family, func(t *testing.T) {
			o := compareArdan(t, family, ardanSmokeBodies)
			got := o.identical + o.bothRefused
			for c, n := range o.divergences {
				t.Logf("%d× %s\nfirst: %s", n, c, o.first[c])
			}
			if got != want {
				t.Errorf("ardanlabs/jinja now matches python3-jinja2 on %d of the first %d %s bodies, %d when the evaluation was recorded in BENCHMARKS.md: re-run BenchmarkArdanParity and revise it",
					got, ardanSmokeBodies, family, want)
			}
		})
	}
}
