package chat

import (
	"encoding/json"
	"strings"
	"testing"
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
		if d := v.(*Dict); d.m["k"] != want || d.m["n"] != `"x"` {
			t.Errorf("%.40s in an object: got %.40q and %q", lit, d.m["k"], d.m["n"])
		}
	}
	for lit, msg := range map[string]string{
		`"ab\"`:        "unterminated string",
		`"ab\\\"`:      "unterminated string",
		"\"a\x01b\"":   "invalid control character",
		`"a\x"`:        `invalid escape \x`,
		`"\u12"`:       `invalid \u escape`,
		`"\ud800"`:     "lone surrogate",
		`"\ud800\u"`:   "lone surrogate",
		`{"k": "a\"}`: "unterminated string",
	} {
		if v, err := decodeJSON([]byte(lit)); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: got %v, %v; want an error saying %q", lit, v, err, msg)
		}
	}
}
