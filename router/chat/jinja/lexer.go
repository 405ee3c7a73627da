package jinja

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// tokKind is the kind of a lexer token.
type tokKind int

const (
	tData tokKind = iota
	tVarBegin
	tVarEnd
	tBlockBegin
	tBlockEnd
	tName
	tString
	tInt
	tFloat
	tOp
	tEOF
)

type token struct {
	kind tokKind
	val  string
	line int
}

// lexerOptions are the two whitespace settings transformers turns on.
type lexerOptions struct{ trimBlocks, lstripBlocks bool }

// normalizeSource applies what Jinja2 does to a template before lexing:
// every line break Python's str.splitlines knows becomes "\n", and one
// trailing line break is dropped (keep_trailing_newline=False).
func normalizeSource(src string) string {
	var lines []string
	start := 0
	for i := 0; i < len(src); {
		r, n := utf8.DecodeRuneInString(src[i:])
		switch r {
		case '\r':
			lines = append(lines, src[start:i])
			if i+1 < len(src) && src[i+1] == '\n' {
				n = 2
			}
			start = i + n
		case '\n', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
			lines = append(lines, src[start:i])
			start = i + n
		}
		i += n
	}
	if start < len(src) {
		lines = append(lines, src[start:])
	}
	return strings.Join(lines, "\n")
}

// lexer splits template source into tokens with Jinja2's rules for
// whitespace control ("-" and "+" modifiers, trim_blocks, lstrip_blocks).
type lexer struct {
	src          string
	pos          int
	line         int
	opt          lexerOptions
	lineStarting bool // the previous match ended with a newline
	toks         []token
}

func lex(src string, opt lexerOptions) ([]token, error) {
	lx := &lexer{src: normalizeSource(src), line: 1, opt: opt, lineStarting: true}
	if err := lx.run(); err != nil {
		return nil, err
	}
	lx.toks = append(lx.toks, token{kind: tEOF, line: lx.line})
	return lx.toks, nil
}

func (lx *lexer) emit(kind tokKind, val string) {
	lx.toks = append(lx.toks, token{kind: kind, val: val, line: lx.line})
}

// advance moves past n bytes, counting lines.
func (lx *lexer) advance(n int) {
	lx.line += strings.Count(lx.src[lx.pos:lx.pos+n], "\n")
	lx.pos += n
}

// nextTag finds the next "{{", "{%" or "{#" at or after pos.
func (lx *lexer) nextTag() int {
	for i := lx.pos; ; {
		j := strings.IndexByte(lx.src[i:], '{')
		if j < 0 || i+j+1 >= len(lx.src) {
			return -1
		}
		if c := lx.src[i+j+1]; c == '{' || c == '%' || c == '#' {
			return i + j
		}
		i += j + 1
	}
}

func (lx *lexer) run() error {
	for lx.pos < len(lx.src) {
		at := lx.nextTag()
		if at < 0 {
			lx.emitData(lx.src[lx.pos:])
			lx.advance(len(lx.src) - lx.pos)
			return nil
		}
		kind := lx.src[at+1]
		sign := byte(0)
		if at+2 < len(lx.src) && (lx.src[at+2] == '-' || lx.src[at+2] == '+') {
			sign = lx.src[at+2]
		}
		text := lx.src[lx.pos:at]
		switch {
		case sign == '-':
			text = strings.TrimRightFunc(text, pyIsSpace)
		case sign != '+' && lx.opt.lstripBlocks && kind != '{':
			l := strings.LastIndexByte(text, '\n') + 1
			if (l > 0 || lx.lineStarting) && l < len(text) && strings.TrimLeftFunc(text[l:], pyIsSpace) == "" {
				text = text[:l]
			}
		}
		lx.emitData(text)
		lx.advance(at - lx.pos)
		open := 2
		if sign != 0 {
			open = 3
		}
		var err error
		switch kind {
		case '#':
			err = lx.comment(open)
		case '{':
			lx.emit(tVarBegin, "")
			lx.advance(open)
			err = lx.inside("}}", tVarEnd)
		default:
			if lx.raw(open) {
				continue
			}
			lx.emit(tBlockBegin, "")
			lx.advance(open)
			err = lx.inside("%}", tBlockEnd)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (lx *lexer) emitData(s string) {
	if s != "" {
		lx.emit(tData, s)
	}
}

// closeTag consumes an end delimiter of length n preceded by "-" or not,
// then the whitespace the modifier or trim_blocks removes.
func (lx *lexer) closeTag(n int, dash, block bool) {
	lx.advance(n)
	consumed := ""
	switch {
	case dash:
		rest := lx.src[lx.pos:]
		ws := len(rest) - len(strings.TrimLeftFunc(rest, pyIsSpace))
		consumed = rest[:ws]
		lx.advance(ws)
	case block && lx.opt.trimBlocks && strings.HasPrefix(lx.src[lx.pos:], "\n"):
		consumed = "\n"
		lx.advance(1)
	}
	if consumed != "" {
		lx.lineStarting = strings.HasSuffix(consumed, "\n")
	} else {
		lx.lineStarting = false
	}
}

func (lx *lexer) comment(open int) error {
	line := lx.line
	lx.advance(open)
	end := strings.Index(lx.src[lx.pos:], "#}")
	if end < 0 {
		return templateError(line, "missing end of comment tag")
	}
	dash := end > 0 && lx.src[lx.pos+end-1] == '-'
	lx.advance(end)
	lx.closeTag(2, dash, true)
	return nil
}

// raw handles {% raw %}...{% endraw %}, emitting its body as data.
func (lx *lexer) raw(open int) bool {
	rest := lx.src[lx.pos+open:]
	body := strings.TrimLeftFunc(rest, pyIsSpace)
	if !strings.HasPrefix(body, "raw") {
		return false
	}
	body = strings.TrimLeftFunc(body[3:], pyIsSpace)
	dash := strings.HasPrefix(body, "-%}")
	if !dash && !strings.HasPrefix(body, "%}") {
		return false
	}
	startTag := len(lx.src) - len(body)
	lx.advance(startTag - lx.pos)
	n := 2
	if dash {
		n = 3
	}
	lx.closeTag(n, dash, true)
	for i := lx.pos; ; {
		j := strings.Index(lx.src[i:], "{%")
		if j < 0 {
			lx.emitData(lx.src[lx.pos:])
			lx.advance(len(lx.src) - lx.pos)
			return true
		}
		tag := lx.src[i+j+2:]
		sign := byte(0)
		if tag != "" && (tag[0] == '-' || tag[0] == '+') {
			sign, tag = tag[0], tag[1:]
		}
		t := strings.TrimLeftFunc(tag, pyIsSpace)
		if strings.HasPrefix(t, "endraw") {
			t = strings.TrimLeftFunc(t[6:], pyIsSpace)
			endDash := strings.HasPrefix(t, "-%}")
			if endDash || strings.HasPrefix(t, "%}") {
				data := lx.src[lx.pos : i+j]
				if sign == '-' {
					data = strings.TrimRightFunc(data, pyIsSpace)
				}
				lx.emitData(data)
				lx.advance(len(lx.src) - len(t) - lx.pos)
				m := 2
				if endDash {
					m = 3
				}
				lx.closeTag(m, endDash, true)
				return true
			}
		}
		i += j + 2
	}
}

// inside lexes expression tokens up to the end delimiter.
func (lx *lexer) inside(end string, endKind tokKind) error {
	depth := 0
	for {
		rest := lx.src[lx.pos:]
		trimmed := strings.TrimLeftFunc(rest, unicode.IsSpace)
		lx.advance(len(rest) - len(trimmed))
		rest = trimmed
		if rest == "" {
			return templateError(lx.line, "unexpected end of template, expected %q", end)
		}
		if depth == 0 {
			if strings.HasPrefix(rest, "-"+end) {
				lx.emit(endKind, "")
				lx.closeTag(len(end)+1, true, endKind == tBlockEnd)
				return nil
			}
			if strings.HasPrefix(rest, "+"+end) && endKind == tBlockEnd {
				lx.emit(endKind, "")
				lx.closeTag(len(end)+1, false, false)
				return nil
			}
			if strings.HasPrefix(rest, end) {
				lx.emit(endKind, "")
				lx.closeTag(len(end), false, endKind == tBlockEnd)
				return nil
			}
		}
		c := rest[0]
		switch {
		case c == '\'' || c == '"':
			s, n, err := lexString(rest)
			if err != nil {
				return templateError(lx.line, "%v", err)
			}
			lx.emit(tString, s)
			lx.advance(n)
		case c >= '0' && c <= '9':
			n, isFloat := lexNumber(rest)
			kind := tInt
			if isFloat {
				kind = tFloat
			}
			lx.emit(kind, strings.ReplaceAll(rest[:n], "_", ""))
			lx.advance(n)
		case c == '_' || unicode.IsLetter(rune(c)) || c >= 0x80:
			n := 0
			for n < len(rest) {
				r, size := utf8.DecodeRuneInString(rest[n:])
				if r != '_' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
					break
				}
				n += size
			}
			if n == 0 {
				return templateError(lx.line, "unexpected character %q", rest[:1])
			}
			lx.emit(tName, rest[:n])
			lx.advance(n)
		default:
			op := lexOperator(rest)
			if op == "" {
				return templateError(lx.line, "unexpected character %q", rest[:1])
			}
			switch op {
			case "(", "[", "{":
				depth++
			case ")", "]", "}":
				depth--
			}
			lx.emit(tOp, op)
			lx.advance(len(op))
		}
	}
}

var operators = []string{"//", "**", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "=", "(", ")", "[", "]", "{", "}", ",", ".", ":", "|", ";"}

func lexOperator(s string) string {
	for _, op := range operators {
		if strings.HasPrefix(s, op) {
			return op
		}
	}
	return ""
}

// lexNumber returns the length of the number at the start of s.
func lexNumber(s string) (int, bool) {
	i := 0
	digits := func() {
		for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '_') {
			i++
		}
	}
	digits()
	isFloat := false
	if i+1 < len(s) && s[i] == '.' && s[i+1] >= '0' && s[i+1] <= '9' {
		i++
		digits()
		isFloat = true
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j < len(s) && s[j] >= '0' && s[j] <= '9' {
			i = j
			digits()
			isFloat = true
		}
	}
	return i, isFloat
}

// lexString decodes a quoted literal with Python's unicode-escape rules, as
// Jinja2 does; an unknown escape keeps its backslash.
func lexString(s string) (string, int, error) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); {
		c := s[i]
		if c == q {
			return b.String(), i + 1, nil
		}
		if c != '\\' || i+1 >= len(s) {
			r, n := utf8.DecodeRuneInString(s[i:])
			b.WriteRune(r)
			i += n
			continue
		}
		e := s[i+1]
		i += 2
		switch e {
		case '\n':
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'a':
			b.WriteByte('\a')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte('\v')
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if i+n > len(s) {
				return "", 0, errorString("truncated escape in string literal")
			}
			var r rune
			for _, h := range s[i : i+n] {
				d := strings.IndexRune("0123456789abcdef", unicode.ToLower(h))
				if d < 0 {
					return "", 0, errorString("invalid escape in string literal")
				}
				r = r*16 + rune(d)
			}
			b.WriteRune(r)
			i += n
		case '0', '1', '2', '3', '4', '5', '6', '7':
			r := rune(e - '0')
			for k := 0; k < 2 && i < len(s) && s[i] >= '0' && s[i] <= '7'; k++ {
				r = r*8 + rune(s[i]-'0')
				i++
			}
			b.WriteRune(r)
		default:
			b.WriteByte('\\')
			i-- // the escaped character is ordinary text
		}
	}
	return "", 0, errorString("unterminated string literal")
}

type errorString string

func (e errorString) Error() string { return string(e) }
