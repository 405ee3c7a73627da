package chat

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat/jinja"
	"github.com/llmd-dev/terraform-provider-llmd/router/tokenizer"
)

// TestJSONStrings decodes string literals the way encoding/json does (an
// independent decoder; the two differ only on lone surrogates and invalid
// UTF-8, which are not among these), and refuses the malformed ones.
func TestJSONStrings(t *testing.T) {
	long := strings.Repeat(`line of prose \"quoted\"\n\tand \\ a path\/to\u00e9 `, 2000)
	for _, lit := range []string{
		`""`, `"plain"`, `"\n"`, `"a\\"`, `"\\\\"`, `"\\\""`, `"a\"b\"\\"`, `"\/\b\f\n\r\t"`,
		`"\u00e9\u4e2d\ud83d\ude00x"`, `"é中😀"`, `"` + long + `"`, `"\\u0041"`,
	} {
		var want string
		if err := json.Unmarshal([]byte(lit), &want); err != nil {
			t.Fatalf("%.40s: encoding/json: %v", lit, err)
		}
		got, err := decodeJSON([]byte(lit))
		if err != nil || got != want {
			t.Errorf("%.40s: got %.40q, %v; want %.40q", lit, got, err, want)
		}
		// The same literal inside an object, followed by more input.
		doc := `{"k": ` + lit + `, "n": "\"x\""}`
		v, err := decodeJSON([]byte(doc))
		if err != nil {
			t.Errorf("%.40s in an object: %v", lit, err)
			continue
		}
		if d := v.(*jinja.Dict); get(d, "k") != want || get(d, "n") != `"x"` {
			t.Errorf("%.40s in an object: got %.40q and %q", lit, get(d, "k"), get(d, "n"))
		}
	}
	for lit, msg := range map[string]string{
		`"ab\"`:       "unterminated string",
		`"ab\\\"`:     "unterminated string",
		"\"a\x01b\"":  "invalid control character",
		`"a\x"`:       `invalid escape \x`,
		`"\u12"`:      `invalid \u escape`,
		`"\ud800"`:    "lone surrogate",
		`"\ud800\u"`:  "lone surrogate",
		`{"k": "a\"}`: "unterminated string",
	} {
		if v, err := decodeJSON([]byte(lit)); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: got %v, %v; want an error saying %q", lit, v, err, msg)
		}
	}
}

// FuzzJSONString decodes arbitrary string literals against encoding/json:
// where both accept, the strings are equal; where only encoding/json
// accepts, the literal is one the tokenizer refuses (invalid UTF-8 or a
// lone surrogate, which encoding/json replaces by U+FFFD); nothing else
// may differ.
func FuzzJSONString(f *testing.F) {
	for _, s := range []string{`plain`, `a\"b`, `\\`, `\\\"`, `\u00e9\ud83d\ude00`, `\ud800`, "tab\there", `\x`, `\u12`, "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		lit := []byte(`"` + s + `"`)
		got, err := decodeJSON(lit)
		var want string
		werr := json.Unmarshal(lit, &want)
		switch {
		case err == nil && werr == nil:
			if got != want {
				t.Fatalf("%q: got %q, encoding/json %q", lit, got, want)
			}
		case err == nil:
			t.Fatalf("%q: accepted as %q, encoding/json refuses it: %v", lit, got, werr)
		case werr == nil && !errors.Is(err, tokenizer.ErrUntokenizable):
			t.Fatalf("%q: %v, encoding/json accepts it as %q", lit, err, want)
		}
	})
}
