package jinja

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// dumpOptions are the arguments of Python's json.dumps that transformers'
// tojson filter exposes.
type dumpOptions struct {
	ensureASCII bool
	indent      *string // nil: one line
	itemSep     string
	keySep      string
	sortKeys    bool
}

// newDumpOptions applies json.dumps defaults: ", " between items on one line,
// "," when indenting, ": " after keys.
func newDumpOptions(indent *string, separators []string) dumpOptions {
	o := dumpOptions{indent: indent, itemSep: ", ", keySep: ": "}
	if indent != nil {
		o.itemSep = ","
	}
	if separators != nil {
		o.itemSep, o.keySep = separators[0], separators[1]
	}
	return o
}

// pyDumps is Python's json.dumps(v, ...) with the given options.
func pyDumps(v any, o dumpOptions) (string, error) {
	var b strings.Builder
	if err := o.write(&b, v, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

func (o dumpOptions) newline(b *strings.Builder, depth int) {
	b.WriteByte('\n')
	for range depth {
		b.WriteString(*o.indent)
	}
}

func (o dumpOptions) write(b *strings.Builder, v any, depth int) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case BigInt:
		b.WriteString(string(x))
	case float64:
		switch {
		case math.IsNaN(x):
			b.WriteString("NaN")
		case math.IsInf(x, 1):
			b.WriteString("Infinity")
		case math.IsInf(x, -1):
			b.WriteString("-Infinity")
		default:
			b.WriteString(floatRepr(x))
		}
	case string:
		o.writeString(b, x)
	case []any:
		if len(x) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			if o.indent != nil {
				o.newline(b, depth+1)
			}
			if err := o.write(b, e, depth+1); err != nil {
				return err
			}
		}
		if o.indent != nil {
			o.newline(b, depth)
		}
		b.WriteByte(']')
	case *Dict:
		if x.Len() == 0 {
			b.WriteString("{}")
			return nil
		}
		keys := x.keys
		if o.sortKeys {
			keys = x.sortedKeys()
		}
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteString(o.itemSep)
			}
			if o.indent != nil {
				o.newline(b, depth+1)
			}
			o.writeString(b, k)
			b.WriteString(o.keySep)
			if err := o.write(b, x.m[k], depth+1); err != nil {
				return err
			}
		}
		if o.indent != nil {
			o.newline(b, depth)
		}
		b.WriteByte('}')
	case *namespace:
		return o.write(b, x.attrs, depth)
	default:
		return fmt.Errorf("TypeError: Object of type %s is not JSON serializable", typeName(v))
	}
	return nil
}

// writeString quotes s as json.dumps does: only '"', '\\' and control
// characters are escaped unless ensure_ascii is set.
func (o dumpOptions) writeString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20 || (o.ensureASCII && r > 0x7f):
			if r > 0xffff {
				r -= 0x10000
				fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			} else {
				fmt.Fprintf(b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}
