package jinja

import (
	"errors"
	"testing"
)

// FuzzTemplate feeds arbitrary template source (a request's chat_template
// is untrusted input) to Compile and Render: they must not panic, and every
// failure must be a template error.
func FuzzTemplate(f *testing.F) {
	for _, c := range templateCases {
		f.Add(c.src)
	}
	f.Add(`{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}`)
	vars := NewDict()
	user, assistant := NewDict(), NewDict()
	user.Set("role", "user")
	user.Set("content", "hi")
	assistant.Set("role", "assistant")
	assistant.Set("content", nil)
	vars.Set("messages", []any{user, assistant})
	vars.Set("xs", []any{int64(1), "a", nil, 2.5})
	f.Fuzz(func(t *testing.T, src string) {
		tmpl, err := Compile(src)
		if err != nil {
			if !errors.Is(err, ErrTemplate) {
				t.Fatalf("compile error %v does not wrap ErrTemplate", err)
			}
			return
		}
		if _, err := tmpl.Render(vars); err != nil && !errors.Is(err, ErrTemplate) {
			t.Fatalf("render error %v does not wrap ErrTemplate", err)
		}
	})
}
