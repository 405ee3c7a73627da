package jinja

import (
	"fmt"
	"strings"
	"sync/atomic"
	"time"
)

// Template is a compiled chat template. It renders as transformers renders
// chat templates: Jinja2's ImmutableSandboxedEnvironment with trim_blocks,
// lstrip_blocks and the loop-controls extension, plus transformers' tojson
// filter and its raise_exception and strftime_now globals. A Template is
// immutable and safe for concurrent use.
type Template struct {
	body []node
	// names are the variables the template reads, the analogue of
	// jinja2.meta.find_undeclared_variables that vLLM uses to decide which
	// chat_template_kwargs reach the template.
	names map[string]bool
	// sizeHint is the length of the last rendering, to size the next one.
	sizeHint atomic.Int64
}

// Compile parses template source. Its errors wrap ErrTemplate.
func Compile(src string) (*Template, error) {
	toks, err := lex(src, lexerOptions{trimBlocks: true, lstripBlocks: true})
	if err != nil {
		return nil, err
	}
	body, err := parse(toks)
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, t := range toks {
		if t.kind == tName {
			names[t.val] = true
		}
	}
	return &Template{body: body, names: names}, nil
}

// Reads reports whether the template mentions the variable name: a
// superset of jinja2.meta.find_undeclared_variables, whose extra names the
// template assigns before reading or uses only as attribute, filter or test
// names.
func (t *Template) Reads(name string) bool { return t.names[name] }

// Render renders the template with the given variables. Its errors wrap
// ErrTemplate.
func (t *Template) Render(vars *Dict) (string, error) {
	global := newFrame(nil)
	for name, fn := range globals {
		global.vars[name] = fn
	}
	for _, k := range vars.Keys() {
		global.vars[k] = vars.m[k]
	}
	var out strings.Builder
	out.Grow(int(t.sizeHint.Load()) + 256)
	ev := &evaluator{}
	if _, err := ev.run(t.body, newFrame(global), &out); err != nil {
		return "", err
	}
	t.sizeHint.Store(int64(out.Len()))
	return out.String(), nil
}

var globals = map[string]callable{
	"raise_exception": func(_ *evaluator, args []any, _ *Dict) (any, error) {
		return nil, fmt.Errorf("%w: TemplateError: %s", ErrTemplate, Str(argOrNil(args)))
	},
	"strftime_now": func(_ *evaluator, args []any, _ *Dict) (any, error) {
		return strftime(time.Now(), Str(argOrNil(args))), nil
	},
	"namespace": func(_ *evaluator, args []any, kw *Dict) (any, error) {
		ns := &namespace{attrs: NewDict()}
		if len(args) > 0 {
			d, ok := args[0].(*Dict)
			if !ok {
				return nil, errorString("TypeError: namespace() argument must be a mapping")
			}
			for _, k := range d.keys {
				ns.attrs.Set(k, d.m[k])
			}
		}
		if kw != nil {
			for _, k := range kw.keys {
				ns.attrs.Set(k, kw.m[k])
			}
		}
		return ns, nil
	},
	"dict": func(_ *evaluator, _ []any, kw *Dict) (any, error) {
		d := NewDict()
		if kw != nil {
			for _, k := range kw.keys {
				d.Set(k, kw.m[k])
			}
		}
		return d, nil
	},
	"range": func(ev *evaluator, args []any, _ *Dict) (any, error) {
		var b [3]int64
		b[2] = 1
		switch len(args) {
		case 1:
			b[1], _ = args[0].(int64)
		case 2, 3:
			for i, a := range args {
				b[i], _ = a.(int64)
			}
		default:
			return nil, errorString("TypeError: range expected 1 to 3 arguments")
		}
		if b[2] == 0 {
			return nil, errorString("ValueError: range() arg 3 must not be zero")
		}
		var out []any
		for i := b[0]; (b[2] > 0 && i < b[1]) || (b[2] < 0 && i > b[1]); i += b[2] {
			if err := ev.spend(1); err != nil {
				return nil, err
			}
			out = append(out, i)
		}
		if out == nil {
			out = []any{}
		}
		return out, nil
	},
}

// strftime formats t with the C strftime directives Python supports on
// glibc, for the date lines some templates print.
func strftime(t time.Time, format string) string {
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		if format[i] != '%' || i+1 >= len(format) {
			b.WriteByte(format[i])
			continue
		}
		i++
		switch format[i] {
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case '-':
			if i+1 < len(format) && format[i+1] == 'd' {
				i++
				fmt.Fprintf(&b, "%d", t.Day())
			}
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'Y':
			fmt.Fprintf(&b, "%d", t.Year())
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'B':
			b.WriteString(t.Month().String())
		case 'b':
			b.WriteString(t.Month().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(format[i])
		}
	}
	return b.String()
}
