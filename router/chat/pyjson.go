package chat

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat/jinja"
	"github.com/llmd-dev/terraform-provider-llmd/router/tokenizer"
)

// decodeJSON parses a JSON document into template values as Python's
// json.loads does (the parser vLLM's HTTP layer and its tool-call argument
// parsing use): objects keep key order, a repeated key keeps its first place
// and its last value, integers stay integers, and NaN/Infinity are accepted.
// A lone surrogate escape, which Python keeps but the tokenizer refuses, is
// an error wrapping tokenizer.ErrUntokenizable. Nesting beyond MaxJSONDepth
// and more than MaxJSONValues values are a LimitError.
func decodeJSON(data []byte) (any, error) {
	d := jsonDecoder{s: data}
	d.space()
	v, err := d.value()
	if err != nil {
		return nil, err
	}
	d.space()
	if d.i != len(d.s) {
		return nil, d.errorf("extra data")
	}
	return v, nil
}

type jsonDecoder struct {
	s      []byte
	i      int
	depth  int // open arrays and objects
	values int // values decoded so far
}

func (d *jsonDecoder) errorf(format string, args ...any) error {
	return fmt.Errorf("JSON at byte %d: %s", d.i, fmt.Sprintf(format, args...))
}

func (d *jsonDecoder) space() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

func (d *jsonDecoder) literal(word string) bool {
	if strings.HasPrefix(string(d.s[d.i:min(len(d.s), d.i+len(word))]), word) {
		d.i += len(word)
		return true
	}
	return false
}

func (d *jsonDecoder) value() (any, error) {
	if d.i >= len(d.s) {
		return nil, d.errorf("unexpected end")
	}
	if d.values++; d.values > MaxJSONValues {
		return nil, overLimit("MaxJSONValues", MaxJSONValues, "JSON value count at byte %d", d.i)
	}
	switch c := d.s[d.i]; {
	case c == '{' || c == '[':
		// Bounded here, before recursing: a body of nested brackets would
		// otherwise grow the stack until the runtime aborts the process.
		if d.depth >= MaxJSONDepth {
			return nil, overLimit("MaxJSONDepth", MaxJSONDepth, "JSON nesting at byte %d", d.i)
		}
		d.depth++
		defer func() { d.depth-- }()
		if c == '{' {
			return d.object()
		}
		return d.array()
	case c == '"':
		return d.str()
	case d.literal("null"):
		return nil, nil
	case d.literal("true"):
		return true, nil
	case d.literal("false"):
		return false, nil
	case d.literal("NaN"):
		return math.NaN(), nil
	case d.literal("Infinity"):
		return math.Inf(1), nil
	case d.literal("-Infinity"):
		return math.Inf(-1), nil
	case c == '-' || (c >= '0' && c <= '9'):
		return d.number()
	}
	return nil, d.errorf("unexpected character %q", d.s[d.i])
}

func (d *jsonDecoder) object() (any, error) {
	d.i++
	obj := jinja.NewDict()
	d.space()
	if d.i < len(d.s) && d.s[d.i] == '}' {
		d.i++
		return obj, nil
	}
	for {
		d.space()
		if d.i >= len(d.s) || d.s[d.i] != '"' {
			return nil, d.errorf("expecting property name")
		}
		k, err := d.str()
		if err != nil {
			return nil, err
		}
		d.space()
		if d.i >= len(d.s) || d.s[d.i] != ':' {
			return nil, d.errorf("expecting ':'")
		}
		d.i++
		d.space()
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		obj.Set(k, v)
		d.space()
		if d.i < len(d.s) && d.s[d.i] == ',' {
			d.i++
			continue
		}
		if d.i < len(d.s) && d.s[d.i] == '}' {
			d.i++
			return obj, nil
		}
		return nil, d.errorf("expecting ',' or '}'")
	}
}

func (d *jsonDecoder) array() (any, error) {
	d.i++
	arr := []any{}
	d.space()
	if d.i < len(d.s) && d.s[d.i] == ']' {
		d.i++
		return arr, nil
	}
	for {
		d.space()
		v, err := d.value()
		if err != nil {
			return nil, err
		}
		arr = append(arr, v)
		d.space()
		if d.i < len(d.s) && d.s[d.i] == ',' {
			d.i++
			continue
		}
		if d.i < len(d.s) && d.s[d.i] == ']' {
			d.i++
			return arr, nil
		}
		return nil, d.errorf("expecting ',' or ']'")
	}
}

func (d *jsonDecoder) number() (any, error) {
	start := d.i
	if d.s[d.i] == '-' {
		d.i++
	}
	digits := func() int {
		n := 0
		for d.i < len(d.s) && d.s[d.i] >= '0' && d.s[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	if d.i < len(d.s) && d.s[d.i] == '0' {
		d.i++
	} else if digits() == 0 {
		return nil, d.errorf("invalid number")
	}
	isFloat := false
	if d.i+1 < len(d.s) && d.s[d.i] == '.' && d.s[d.i+1] >= '0' && d.s[d.i+1] <= '9' {
		d.i++
		digits()
		isFloat = true
	}
	if d.i < len(d.s) && (d.s[d.i] == 'e' || d.s[d.i] == 'E') {
		save := d.i
		d.i++
		if d.i < len(d.s) && (d.s[d.i] == '+' || d.s[d.i] == '-') {
			d.i++
		}
		if digits() == 0 {
			d.i = save // Python stops the number before a bare 'e'
		} else {
			isFloat = true
		}
	}
	text := string(d.s[start:d.i])
	if isFloat {
		f, err := strconv.ParseFloat(text, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return nil, d.errorf("invalid number %q", text)
		}
		return f, nil // out of range is ±inf or 0, as in Python
	}
	if n, err := strconv.ParseInt(text, 10, 64); err == nil {
		return n, nil
	}
	return jinja.BigInt(text), nil
}

func (d *jsonDecoder) str() (string, error) {
	start := d.i + 1
	end := d.stringEnd(start)
	if end < 0 {
		d.i = len(d.s)
		return "", d.errorf("unterminated string")
	}
	raw := d.s[start:end]
	for i, c := range raw {
		if c < 0x20 {
			d.i = start + i
			return "", d.errorf("invalid control character in string")
		}
	}
	k := bytes.IndexByte(raw, '\\')
	if k < 0 {
		d.i = end + 1
		s := string(raw)
		return s, d.checkUTF8(s)
	}
	// Built once; String() hands over the builder's bytes without the copy
	// string([]byte) would make.
	var b strings.Builder
	b.Grow(len(raw))
	for d.i = start; k >= 0; k = bytes.IndexByte(d.s[d.i:end], '\\') {
		b.Write(d.s[d.i : d.i+k])
		d.i += k
		if err := d.escape(&b); err != nil {
			return "", err
		}
	}
	b.Write(d.s[d.i:end])
	d.i = end + 1
	s := b.String()
	return s, d.checkUTF8(s)
}

// stringEnd returns the index of the quote that closes a string whose text
// starts at from, or -1: the first quote after an even run of backslashes
// (each pair is one escape, and only a backslash starts an escape).
func (d *jsonDecoder) stringEnd(from int) int {
	for i := from; ; {
		k := bytes.IndexByte(d.s[i:], '"')
		if k < 0 {
			return -1
		}
		q := i + k
		n := 0
		for q-1-n >= from && d.s[q-1-n] == '\\' {
			n++
		}
		if n%2 == 0 {
			return q
		}
		i = q + 1
	}
}

func (d *jsonDecoder) checkUTF8(s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%w: invalid UTF-8 in JSON string", tokenizer.ErrUntokenizable)
	}
	return nil
}

// escape decodes the escape at d.i (a backslash) onto b.
func (d *jsonDecoder) escape(b *strings.Builder) error {
	if d.i+1 >= len(d.s) {
		return d.errorf("unterminated escape")
	}
	c := d.s[d.i+1]
	d.i += 2
	switch c {
	case '"', '\\', '/':
		return b.WriteByte(c)
	case 'b':
		return b.WriteByte('\b')
	case 'f':
		return b.WriteByte('\f')
	case 'n':
		return b.WriteByte('\n')
	case 'r':
		return b.WriteByte('\r')
	case 't':
		return b.WriteByte('\t')
	case 'u':
		r, ok := d.hex4()
		if !ok {
			return d.errorf("invalid \\u escape")
		}
		if utf16.IsSurrogate(r) {
			if r <= 0xdbff && d.i+1 < len(d.s) && d.s[d.i] == '\\' && d.s[d.i+1] == 'u' {
				save := d.i
				d.i += 2
				if lo, ok := d.hex4(); ok && lo >= 0xdc00 && lo <= 0xdfff {
					b.WriteRune(utf16.DecodeRune(r, lo))
					return nil
				}
				d.i = save
			}
			return fmt.Errorf("%w: lone surrogate \\u%04x in JSON", tokenizer.ErrUntokenizable, r)
		}
		b.WriteRune(r)
		return nil
	}
	return d.errorf("invalid escape \\%c", c)
}

func (d *jsonDecoder) hex4() (rune, bool) {
	if d.i+4 > len(d.s) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(d.s[d.i:d.i+4]), 16, 32)
	if err != nil {
		return 0, false
	}
	d.i += 4
	return rune(v), true
}
