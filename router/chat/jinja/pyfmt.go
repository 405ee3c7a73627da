package jinja

import (
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Str is Python's str(v), which Jinja2 applies to every {{ }} output.
func Str(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case undefined:
		return ""
	}
	var b strings.Builder
	writeRepr(&b, v)
	return b.String()
}

// writeRepr writes Python's repr(v): lists and dicts print their items with
// repr, so a list of strings shows quotes.
func writeRepr(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("None")
	case bool:
		if x {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case BigInt:
		b.WriteString(string(x))
	case float64:
		b.WriteString(floatRepr(x))
	case string:
		writeStrRepr(b, x)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			writeRepr(b, e)
		}
		b.WriteByte(']')
	case *Dict:
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			writeStrRepr(b, k)
			b.WriteString(": ")
			writeRepr(b, x.m[k])
		}
		b.WriteByte('}')
	case undefined:
		b.WriteString("Undefined")
	case *namespace:
		b.WriteString("<Namespace ")
		writeRepr(b, x.attrs)
		b.WriteByte('>')
	default:
		b.WriteString("<" + typeName(v) + ">")
	}
}

// writeStrRepr quotes s as Python's repr does: single quotes unless s holds
// a single quote and no double quote; non-printable characters escaped.
func writeStrRepr(b *strings.Builder, s string) {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			b.WriteString(`\x` + hex2(r))
		case r < 0x7f || unicode.IsPrint(r):
			// Go's IsPrint admits only the ASCII space among separators, as
			// Python's str.isprintable does.
			b.WriteRune(r)
		case r < 0x100:
			b.WriteString(`\x` + hex2(r))
		case r < 0x10000:
			b.WriteString(`\u` + leftPad(strconv.FormatInt(int64(r), 16), 4))
		default:
			b.WriteString(`\U` + leftPad(strconv.FormatInt(int64(r), 16), 8))
		}
	}
	b.WriteByte(q)
}

func hex2(r rune) string { return leftPad(strconv.FormatInt(int64(r), 16), 2) }

func leftPad(s string, n int) string {
	for len(s) < n {
		s = "0" + s
	}
	return s
}

// floatRepr is Python's repr(float): the shortest digits that round-trip,
// positional between 1e-4 and 1e16, always with a fraction or an exponent.
func floatRepr(f float64) string {
	switch {
	case math.IsNaN(f):
		return "nan"
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	neg := strings.HasPrefix(mant, "-")
	mant = strings.TrimPrefix(mant, "-")
	digits := strings.Replace(mant, ".", "", 1)
	var out string
	if exp < -4 || exp >= 16 {
		out = digits[:1]
		if len(digits) > 1 {
			out += "." + digits[1:]
		}
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		out += "e" + sign + leftPad(strconv.Itoa(exp), 2)
	} else {
		point := exp + 1 // digits before the decimal point
		switch {
		case point <= 0:
			out = "0." + strings.Repeat("0", -point) + digits
		case point >= len(digits):
			out = digits + strings.Repeat("0", point-len(digits)) + ".0"
		default:
			out = digits[:point] + "." + digits[point:]
		}
	}
	if neg {
		out = "-" + out
	}
	return out
}

// pyIsSpace is Python's str.isspace for one rune (the \s of Python's re).
func pyIsSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0x1c, 0x1d, 0x1e, 0x1f, 0x85, 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// Strip is Python's str.strip/lstrip/rstrip: whitespace when chars is
// nil, else any rune in *chars.
func Strip(s string, chars *string, left, right bool) string {
	in := pyIsSpace
	if chars != nil {
		set := *chars
		in = func(r rune) bool { return strings.ContainsRune(set, r) }
	}
	if left {
		s = strings.TrimLeftFunc(s, in)
	}
	if right {
		s = strings.TrimRightFunc(s, in)
	}
	return s
}

// runeLen is Python's len(str).
func runeLen(s string) int { return utf8.RuneCountInString(s) }
