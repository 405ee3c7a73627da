package jinja

import (
	"strconv"
	"strings"
)

// parser builds the statement tree from tokens, following Jinja2's grammar
// and operator precedence (lowest first): conditional, or, and, not,
// comparison, + -, ~, * / // %, **, unary, postfix, filters and tests.
type parser struct {
	toks []token
	i    int
	// depth is the depth of the tree being built, bounded by
	// MaxTemplateDepth: evaluation recurses along it, and chains such as
	// a+a+a... or x|f|f|f... deepen it without recursing here.
	depth int
}

// deeper counts one more level of the tree; the caller restores the depth
// with defer p.restore(p.depth) taken before.
func (p *parser) deeper() error {
	if p.depth++; p.depth > MaxTemplateDepth {
		return templateLimit(p.peek().line)
	}
	return nil
}

func (p *parser) restore(depth int) { p.depth = depth }

func parse(toks []token) ([]node, error) {
	p := &parser{toks: toks}
	body, end, err := p.block()
	if err != nil {
		return nil, err
	}
	if end != "" {
		return nil, templateError(p.peek().line, "unexpected {%% %s %%}", end)
	}
	return body, nil
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token { t := p.toks[p.i]; p.i++; return t }

func (p *parser) isOp(op string) bool {
	t := p.peek()
	return t.kind == tOp && t.val == op
}

func (p *parser) isName(name string) bool {
	t := p.peek()
	return t.kind == tName && t.val == name
}

func (p *parser) expectOp(op string) error {
	if !p.isOp(op) {
		return p.unexpected("'" + op + "'")
	}
	p.i++
	return nil
}

func (p *parser) unexpected(want string) error {
	t := p.peek()
	got := t.val
	if t.kind == tBlockEnd || t.kind == tVarEnd {
		got = "end of tag"
	} else if t.kind == tEOF {
		got = "end of template"
	}
	return templateError(t.line, "expected %s, got %q", want, got)
}

func (p *parser) ident() (string, error) {
	t := p.peek()
	if t.kind != tName {
		return "", p.unexpected("a name")
	}
	p.i++
	return t.val, nil
}

func (p *parser) blockEnd() error {
	if p.peek().kind != tBlockEnd {
		return p.unexpected("end of statement block")
	}
	p.i++
	return nil
}

// block parses statements until an end tag it does not own (endfor, else,
// ...) or the end of the template, and returns that tag's keyword with the
// parser positioned after the keyword.
func (p *parser) block() ([]node, string, error) {
	var body []node
	for {
		t := p.next()
		switch t.kind {
		case tEOF:
			p.i--
			return body, "", nil
		case tData:
			body = append(body, &dataNode{t.val})
		case tVarBegin:
			e, err := p.expression(true)
			if err != nil {
				return nil, "", err
			}
			if p.peek().kind != tVarEnd {
				return nil, "", p.unexpected("end of print statement")
			}
			p.i++
			body = append(body, &outputNode{e})
		case tBlockBegin:
			kw, err := p.ident()
			if err != nil {
				return nil, "", err
			}
			switch kw {
			case "endif", "elif", "else", "endfor", "endmacro", "endset", "endgeneration", "endfilter":
				return body, kw, nil
			}
			n, err := p.statement(kw, t.line)
			if err != nil {
				return nil, "", err
			}
			body = append(body, n)
		default:
			return nil, "", templateError(t.line, "unexpected token %q", t.val)
		}
	}
}

func (p *parser) statement(kw string, line int) (node, error) {
	defer p.restore(p.depth)
	if err := p.deeper(); err != nil {
		return nil, err
	}
	switch kw {
	case "if":
		return p.ifStmt()
	case "for":
		return p.forStmt(line)
	case "set":
		return p.setStmt(line)
	case "macro":
		return p.macroStmt()
	case "break", "continue":
		if err := p.blockEnd(); err != nil {
			return nil, err
		}
		if kw == "break" {
			return &breakNode{}, nil
		}
		return &continueNode{}, nil
	case "generation":
		// transformers' AssistantTracker tag: marks assistant text for
		// return_assistant_tokens_mask and renders its body unchanged.
		if err := p.blockEnd(); err != nil {
			return nil, err
		}
		body, err := p.closedBody("endgeneration")
		if err != nil {
			return nil, err
		}
		return &ifNode{conds: []expr{&constExpr{true}}, bodies: [][]node{body}}, nil
	case "filter":
		return p.filterStmt(line)
	}
	return nil, templateError(line, "unknown tag %q", kw)
}

// closedBody parses a body that must end with the given tag.
func (p *parser) closedBody(end string) ([]node, error) {
	body, got, err := p.block()
	if err != nil {
		return nil, err
	}
	if got != end {
		return nil, templateError(p.peek().line, "expected {%% %s %%}, got %q", end, got)
	}
	return body, p.blockEnd()
}

func (p *parser) ifStmt() (node, error) {
	n := &ifNode{}
	for {
		cond, err := p.expression(true)
		if err != nil {
			return nil, err
		}
		if err := p.blockEnd(); err != nil {
			return nil, err
		}
		body, end, err := p.block()
		if err != nil {
			return nil, err
		}
		n.conds = append(n.conds, cond)
		n.bodies = append(n.bodies, body)
		switch end {
		case "elif":
			continue
		case "else":
			if err := p.blockEnd(); err != nil {
				return nil, err
			}
			body, err := p.closedBody("endif")
			if err != nil {
				return nil, err
			}
			n.bodies = append(n.bodies, body)
			return n, nil
		case "endif":
			return n, p.blockEnd()
		}
		return nil, templateError(p.peek().line, "expected endif, got %q", end)
	}
}

func (p *parser) targets() ([]string, error) {
	var names []string
	paren := p.isOp("(")
	if paren {
		p.i++
	}
	for {
		name, err := p.ident()
		if err != nil {
			return nil, err
		}
		names = append(names, name)
		if !p.isOp(",") {
			break
		}
		p.i++
		if paren && p.isOp(")") {
			break
		}
	}
	if paren {
		return names, p.expectOp(")")
	}
	return names, nil
}

func (p *parser) forStmt(line int) (node, error) {
	targets, err := p.targets()
	if err != nil {
		return nil, err
	}
	if !p.isName("in") {
		return nil, p.unexpected("'in'")
	}
	p.i++
	iter, err := p.expression(false)
	if err != nil {
		return nil, err
	}
	n := &forNode{targets: targets, iter: iter, line: line}
	if p.isName("if") {
		p.i++
		if n.filter, err = p.expression(false); err != nil {
			return nil, err
		}
	}
	if p.isName("recursive") {
		return nil, templateError(line, "recursive loops are not supported")
	}
	if err := p.blockEnd(); err != nil {
		return nil, err
	}
	body, end, err := p.block()
	if err != nil {
		return nil, err
	}
	n.body = body
	if end == "else" {
		if err := p.blockEnd(); err != nil {
			return nil, err
		}
		if n.orElse, err = p.closedBody("endfor"); err != nil {
			return nil, err
		}
		return n, nil
	}
	if end != "endfor" {
		return nil, templateError(line, "expected endfor, got %q", end)
	}
	return n, p.blockEnd()
}

func (p *parser) setStmt(line int) (node, error) {
	n := &setNode{line: line}
	first, err := p.ident()
	if err != nil {
		return nil, err
	}
	n.targets = []string{first}
	switch {
	case p.isOp("."):
		p.i++
		if n.attr, err = p.ident(); err != nil {
			return nil, err
		}
	case p.isOp(","):
		for p.isOp(",") {
			p.i++
			name, err := p.ident()
			if err != nil {
				return nil, err
			}
			n.targets = append(n.targets, name)
		}
	}
	if p.peek().kind == tBlockEnd && n.attr == "" && len(n.targets) == 1 {
		p.i++
		body, err := p.closedBody("endset")
		if err != nil {
			return nil, err
		}
		n.body = body
		return n, nil
	}
	if err := p.expectOp("="); err != nil {
		return nil, err
	}
	if n.value, err = p.expression(true); err != nil {
		return nil, err
	}
	return n, p.blockEnd()
}

func (p *parser) macroStmt() (node, error) {
	name, err := p.ident()
	if err != nil {
		return nil, err
	}
	n := &macroNode{name: name}
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	for !p.isOp(")") {
		param, err := p.ident()
		if err != nil {
			return nil, err
		}
		n.params = append(n.params, param)
		if p.isOp("=") {
			p.i++
			d, err := p.expression(true)
			if err != nil {
				return nil, err
			}
			n.defaults = append(n.defaults, d)
		} else if len(n.defaults) > 0 {
			return nil, templateError(p.peek().line, "non-default argument follows default argument")
		}
		if !p.isOp(",") {
			break
		}
		p.i++
	}
	if err := p.expectOp(")"); err != nil {
		return nil, err
	}
	if err := p.blockEnd(); err != nil {
		return nil, err
	}
	if n.body, err = p.closedBody("endmacro"); err != nil {
		return nil, err
	}
	return n, nil
}

// filterStmt parses {% filter name(args) %}...{% endfilter %} into a set of
// a hidden variable followed by its filtered output.
func (p *parser) filterStmt(line int) (node, error) {
	f, err := p.filterCall(nil)
	if err != nil {
		return nil, err
	}
	if err := p.blockEnd(); err != nil {
		return nil, err
	}
	body, err := p.closedBody("endfilter")
	if err != nil {
		return nil, err
	}
	const hidden = " filter body"
	f.obj = &nameExpr{name: hidden, line: line}
	return &ifNode{conds: []expr{&constExpr{true}}, bodies: [][]node{{
		&setNode{targets: []string{hidden}, body: body, line: line},
		&outputNode{f},
	}}}, nil
}

// expression parses a full expression; withCond allows "a if b else c".
func (p *parser) expression(withCond bool) (expr, error) {
	defer p.restore(p.depth)
	if err := p.deeper(); err != nil {
		return nil, err
	}
	e, err := p.or()
	if err != nil || !withCond {
		return e, err
	}
	for p.isName("if") {
		p.i++
		if err := p.deeper(); err != nil {
			return nil, err
		}
		cond, err := p.or()
		if err != nil {
			return nil, err
		}
		c := &condExpr{cond: cond, yes: e}
		if p.isName("else") {
			p.i++
			if c.no, err = p.expression(true); err != nil {
				return nil, err
			}
		}
		e = c
	}
	return e, nil
}

func (p *parser) or() (expr, error) {
	defer p.restore(p.depth)
	l, err := p.and()
	for err == nil && p.isName("or") {
		line := p.next().line
		if err = p.deeper(); err != nil {
			break
		}
		var r expr
		if r, err = p.and(); err == nil {
			l = &binExpr{op: "or", l: l, r: r, line: line}
		}
	}
	return l, err
}

func (p *parser) and() (expr, error) {
	defer p.restore(p.depth)
	l, err := p.not()
	for err == nil && p.isName("and") {
		line := p.next().line
		if err = p.deeper(); err != nil {
			break
		}
		var r expr
		if r, err = p.not(); err == nil {
			l = &binExpr{op: "and", l: l, r: r, line: line}
		}
	}
	return l, err
}

func (p *parser) not() (expr, error) {
	if p.isName("not") {
		defer p.restore(p.depth)
		line := p.next().line
		if err := p.deeper(); err != nil {
			return nil, err
		}
		x, err := p.not()
		return &unaryExpr{op: "not", x: x, line: line}, err
	}
	return p.compare()
}

func (p *parser) compare() (expr, error) {
	first, err := p.math1()
	if err != nil {
		return nil, err
	}
	c := &compareExpr{first: first, line: p.peek().line}
	for {
		t := p.peek()
		var op string
		switch {
		case t.kind == tOp && (t.val == "==" || t.val == "!=" || t.val == "<" || t.val == "<=" || t.val == ">" || t.val == ">="):
			op = t.val
			p.i++
		case p.isName("in"):
			op = "in"
			p.i++
		case p.isName("not") && p.toks[p.i+1].kind == tName && p.toks[p.i+1].val == "in":
			op = "notin"
			p.i += 2
		default:
			if len(c.ops) == 0 {
				return first, nil
			}
			return c, nil
		}
		r, err := p.math1()
		if err != nil {
			return nil, err
		}
		c.ops = append(c.ops, op)
		c.rest = append(c.rest, r)
	}
}

// binary parses a left-associative level of operators over next.
func (p *parser) binary(ops []string, next func() (expr, error)) (expr, error) {
	defer p.restore(p.depth)
	l, err := next()
	for err == nil {
		t := p.peek()
		found := false
		for _, op := range ops {
			if t.kind == tOp && t.val == op {
				found = true
			}
		}
		if !found {
			break
		}
		p.i++
		if err = p.deeper(); err != nil {
			break
		}
		var r expr
		if r, err = next(); err == nil {
			l = &binExpr{op: t.val, l: l, r: r, line: t.line}
		}
	}
	return l, err
}

func (p *parser) math1() (expr, error)  { return p.binary([]string{"+", "-"}, p.concat) }
func (p *parser) concat() (expr, error) { return p.binary([]string{"~"}, p.math2) }
func (p *parser) math2() (expr, error) {
	return p.binary([]string{"*", "/", "//", "%"}, p.pow)
}
func (p *parser) pow() (expr, error) {
	return p.binary([]string{"**"}, func() (expr, error) { return p.unary(true) })
}

// unary parses a signed operand. As in Jinja2, filters after a sign apply
// to the signed value: -3|abs is (-3)|abs.
func (p *parser) unary(withFilters bool) (expr, error) {
	var x expr
	var err error
	defer p.restore(p.depth)
	if p.isOp("-") || p.isOp("+") {
		t := p.next()
		if err := p.deeper(); err != nil {
			return nil, err
		}
		if x, err = p.unary(false); err != nil {
			return nil, err
		}
		x = &unaryExpr{op: t.val, x: x, line: t.line}
	} else {
		if x, err = p.primary(); err != nil {
			return nil, err
		}
		if x, err = p.postfix(x); err != nil {
			return nil, err
		}
	}
	if !withFilters {
		return x, nil
	}
	return p.filters(x)
}

func (p *parser) primary() (expr, error) {
	t := p.next()
	switch t.kind {
	case tName:
		switch t.val {
		case "true", "True":
			return &constExpr{true}, nil
		case "false", "False":
			return &constExpr{false}, nil
		case "none", "None":
			return &constExpr{nil}, nil
		}
		return &nameExpr{name: t.val, line: t.line}, nil
	case tString:
		if p.peek().kind != tString {
			return &constExpr{t.val}, nil
		}
		var b strings.Builder // adjacent literals concatenate, in linear time
		b.WriteString(t.val)
		for p.peek().kind == tString {
			b.WriteString(p.next().val)
		}
		return &constExpr{b.String()}, nil
	case tInt:
		n, err := strconv.ParseInt(t.val, 10, 64)
		if err != nil {
			return nil, templateError(t.line, "integer literal %s out of range", t.val)
		}
		return &constExpr{n}, nil
	case tFloat:
		f, err := strconv.ParseFloat(t.val, 64)
		if err != nil {
			return nil, templateError(t.line, "bad float literal %s", t.val)
		}
		return &constExpr{f}, nil
	case tOp:
		switch t.val {
		case "(":
			return p.tupleOrParen()
		case "[":
			items, err := p.items("]")
			return &listExpr{items}, err
		case "{":
			return p.dict()
		}
	}
	p.i--
	return nil, p.unexpected("an expression")
}

func (p *parser) tupleOrParen() (expr, error) {
	if p.isOp(")") {
		p.i++
		return &listExpr{}, nil
	}
	e, err := p.expression(true)
	if err != nil {
		return nil, err
	}
	if p.isOp(")") {
		p.i++
		return e, nil
	}
	items := []expr{e}
	for p.isOp(",") {
		p.i++
		if p.isOp(")") {
			break
		}
		x, err := p.expression(true)
		if err != nil {
			return nil, err
		}
		items = append(items, x)
	}
	// Tuples behave as lists for every use chat templates make of them.
	return &listExpr{items}, p.expectOp(")")
}

func (p *parser) items(closing string) ([]expr, error) {
	var items []expr
	for !p.isOp(closing) {
		x, err := p.expression(true)
		if err != nil {
			return nil, err
		}
		items = append(items, x)
		if !p.isOp(",") {
			break
		}
		p.i++
	}
	return items, p.expectOp(closing)
}

func (p *parser) dict() (expr, error) {
	d := &dictExpr{}
	for !p.isOp("}") {
		k, err := p.expression(true)
		if err != nil {
			return nil, err
		}
		if err := p.expectOp(":"); err != nil {
			return nil, err
		}
		v, err := p.expression(true)
		if err != nil {
			return nil, err
		}
		d.keys = append(d.keys, k)
		d.values = append(d.values, v)
		if !p.isOp(",") {
			break
		}
		p.i++
	}
	return d, p.expectOp("}")
}

func (p *parser) postfix(x expr) (expr, error) {
	defer p.restore(p.depth)
	for {
		t := p.peek()
		if err := p.deeper(); err != nil {
			return nil, err
		}
		switch {
		case t.kind == tOp && t.val == ".":
			p.i++
			n := p.next()
			switch n.kind {
			case tName:
				x = &getattrExpr{obj: x, attr: n.val, line: n.line}
			case tInt:
				idx, _ := strconv.ParseInt(n.val, 10, 64)
				x = &getitemExpr{obj: x, key: &constExpr{idx}, line: n.line}
			default:
				p.i--
				return nil, p.unexpected("an attribute name")
			}
		case t.kind == tOp && t.val == "[":
			p.i++
			key, err := p.subscript()
			if err != nil {
				return nil, err
			}
			x = &getitemExpr{obj: x, key: key, line: t.line}
		case t.kind == tOp && t.val == "(":
			p.i++
			c := &callExpr{fn: x, line: t.line}
			var err error
			if c.args, c.kwargs, err = p.callArgs(); err != nil {
				return nil, err
			}
			x = c
		default:
			return x, nil
		}
	}
}

func (p *parser) subscript() (expr, error) {
	var parts [3]expr
	n := 0
	for {
		if !p.isOp(":") && !p.isOp("]") {
			e, err := p.expression(true)
			if err != nil {
				return nil, err
			}
			parts[n] = e
		}
		if p.isOp("]") {
			p.i++
			break
		}
		if !p.isOp(":") || n == 2 {
			return nil, p.unexpected("']'")
		}
		p.i++
		n++
	}
	if n == 0 {
		return parts[0], nil
	}
	return &sliceExpr{parts[0], parts[1], parts[2]}, nil
}

// callArgs parses arguments after "(" up to and including ")".
func (p *parser) callArgs() ([]expr, []kwarg, error) {
	var args []expr
	var kwargs []kwarg
	for !p.isOp(")") {
		if p.peek().kind == tName && p.toks[p.i+1].kind == tOp && p.toks[p.i+1].val == "=" {
			name := p.next().val
			p.i++
			v, err := p.expression(true)
			if err != nil {
				return nil, nil, err
			}
			kwargs = append(kwargs, kwarg{name, v})
		} else {
			if len(kwargs) > 0 {
				return nil, nil, templateError(p.peek().line, "positional argument follows keyword argument")
			}
			v, err := p.expression(true)
			if err != nil {
				return nil, nil, err
			}
			args = append(args, v)
		}
		if !p.isOp(",") {
			break
		}
		p.i++
	}
	return args, kwargs, p.expectOp(")")
}

func (p *parser) filterCall(obj expr) (*filterExpr, error) {
	t := p.peek()
	name, err := p.ident()
	if err != nil {
		return nil, err
	}
	for p.isOp(".") { // dotted filter names
		p.i++
		part, err := p.ident()
		if err != nil {
			return nil, err
		}
		name += "." + part
	}
	f := &filterExpr{obj: obj, name: name, line: t.line}
	if p.isOp("(") {
		p.i++
		if f.args, f.kwargs, err = p.callArgs(); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// filters parses "| filter" chains and "is test" after a postfix expression.
func (p *parser) filters(x expr) (expr, error) {
	defer p.restore(p.depth)
	for {
		if err := p.deeper(); err != nil {
			return nil, err
		}
		switch {
		case p.isOp("|"):
			p.i++
			f, err := p.filterCall(x)
			if err != nil {
				return nil, err
			}
			x = f
		case p.isName("is"):
			t := p.next()
			te := &testExpr{obj: x, line: t.line}
			if p.isName("not") {
				p.i++
				te.negate = true
			}
			name, err := p.ident()
			if err != nil {
				return nil, err
			}
			te.name = name
			if p.isOp("(") {
				p.i++
				args, _, err := p.callArgs()
				if err != nil {
					return nil, err
				}
				te.args = args
			} else if p.startsTestArg() {
				arg, err := p.primary()
				if err != nil {
					return nil, err
				}
				if arg, err = p.postfix(arg); err != nil {
					return nil, err
				}
				te.args = []expr{arg}
			}
			x = te
		default:
			return x, nil
		}
	}
}

// startsTestArg reports whether the next token starts the bare argument of
// a test such as "is divisibleby 3" or "is sameas false".
func (p *parser) startsTestArg() bool {
	t := p.peek()
	switch t.kind {
	case tString, tInt, tFloat:
		return true
	case tName:
		switch t.val {
		case "else", "or", "and", "if", "in", "not", "is":
			return false
		}
		return true
	case tOp:
		return t.val == "(" || t.val == "[" || t.val == "{"
	}
	return false
}
