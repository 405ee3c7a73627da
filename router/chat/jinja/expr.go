package jinja

import (
	"fmt"
	"math"
	"strings"
)

func (ev *evaluator) eval(e expr, f *frame) (any, error) {
	switch e := e.(type) {
	case *constExpr:
		return e.v, nil
	case *nameExpr:
		if v, ok := f.lookup(e.name); ok {
			return v, nil
		}
		return undefined{e.name}, nil
	case *getattrExpr:
		obj, err := ev.eval(e.obj, f)
		if err != nil {
			return nil, err
		}
		return getAttr(obj, e.attr, e.line)
	case *getitemExpr:
		obj, err := ev.eval(e.obj, f)
		if err != nil {
			return nil, err
		}
		if s, ok := e.key.(*sliceExpr); ok {
			return ev.slice(obj, s, f, e.line)
		}
		key, err := ev.eval(e.key, f)
		if err != nil {
			return nil, err
		}
		return getItem(obj, key, e.line)
	case *callExpr:
		return ev.call(e, f)
	case *filterExpr:
		return ev.filter(e, f)
	case *testExpr:
		return ev.test(e, f)
	case *binExpr:
		return ev.binary(e, f)
	case *unaryExpr:
		x, err := ev.eval(e.x, f)
		if err != nil {
			return nil, err
		}
		return unary(e.op, x, e.line)
	case *compareExpr:
		return ev.compare(e, f)
	case *condExpr:
		c, err := ev.eval(e.cond, f)
		if err != nil {
			return nil, err
		}
		if Truthy(c) {
			return ev.eval(e.yes, f)
		}
		if e.no == nil {
			return undefined{"conditional expression"}, nil
		}
		return ev.eval(e.no, f)
	case *listExpr:
		items := make([]any, len(e.items))
		for i, it := range e.items {
			v, err := ev.eval(it, f)
			if err != nil {
				return nil, err
			}
			items[i] = v
		}
		return items, nil
	case *dictExpr:
		d := NewDict()
		for i, k := range e.keys {
			kv, err := ev.eval(k, f)
			if err != nil {
				return nil, err
			}
			ks, ok := kv.(string)
			if !ok {
				return nil, templateError(0, "dict literal keys must be strings, got %s", typeName(kv))
			}
			v, err := ev.eval(e.values[i], f)
			if err != nil {
				return nil, err
			}
			d.Set(ks, v)
		}
		return d, nil
	}
	return nil, templateError(0, "unknown expression %T", e)
}

// evalArgs evaluates call arguments.
func (ev *evaluator) evalArgs(args []expr, kwargs []kwarg, f *frame) ([]any, *Dict, error) {
	vals := make([]any, len(args))
	for i, a := range args {
		v, err := ev.eval(a, f)
		if err != nil {
			return nil, nil, err
		}
		vals[i] = v
	}
	var kw *Dict
	if len(kwargs) > 0 {
		kw = NewDict()
		for _, k := range kwargs {
			v, err := ev.eval(k.value, f)
			if err != nil {
				return nil, nil, err
			}
			kw.Set(k.name, v)
		}
	}
	return vals, kw, nil
}

func (ev *evaluator) call(e *callExpr, f *frame) (any, error) {
	fn, err := ev.eval(e.fn, f)
	if err != nil {
		return nil, err
	}
	c, ok := fn.(callable)
	if !ok {
		if u, isU := fn.(undefined); isU {
			return nil, templateError(e.line, "UndefinedError: '%s' is undefined", u.name)
		}
		return nil, templateError(e.line, "TypeError: '%s' object is not callable", typeName(fn))
	}
	args, kwargs, err := ev.evalArgs(e.args, e.kwargs, f)
	if err != nil {
		return nil, err
	}
	v, err := c(ev, args, kwargs)
	if err != nil {
		return nil, wrapTemplate(err, e.line)
	}
	return v, nil
}

// wrapTemplate makes an error from a builtin a template error at line.
func wrapTemplate(err error, line int) error {
	if isTemplateError(err) {
		return err
	}
	return wrapAt(line, err)
}

// wrapAt makes err a template error at line, keeping it in the chain so a
// LimitError inside stays one.
func wrapAt(line int, err error) error {
	return fmt.Errorf("%w: line %d: %w", ErrTemplate, line, err)
}

func (ev *evaluator) binary(e *binExpr, f *frame) (any, error) {
	if e.op == "+" {
		return ev.plus(e, f)
	}
	l, err := ev.eval(e.l, f)
	if err != nil {
		return nil, err
	}
	switch e.op {
	case "and":
		if !Truthy(l) {
			return l, nil
		}
		return ev.eval(e.r, f)
	case "or":
		if Truthy(l) {
			return l, nil
		}
		return ev.eval(e.r, f)
	}
	r, err := ev.eval(e.r, f)
	if err != nil {
		return nil, err
	}
	v, err := arith(e.op, l, r)
	if err != nil {
		return nil, wrapAt(e.line, err)
	}
	return v, nil
}

// plus evaluates a chain a + b + c ... left to right as Python does, but
// joins a run of strings with one allocation instead of copying the
// growing prefix at every "+": chat templates print each turn that way.
func (ev *evaluator) plus(e *binExpr, f *frame) (any, error) {
	v, _, err := ev.plusInto(e, f, nil)
	return v, err
}

// plusInto is plus; given an output and a chain of strings only (what
// `{{ '<|im_start|>' + message.role + '\n' + message.content }}` is), it
// writes the strings there instead of joining them first, and says so.
func (ev *evaluator) plusInto(e *binExpr, f *frame, out *strings.Builder) (any, bool, error) {
	var operands []expr // rightmost first
	n := e
	for {
		operands = append(operands, n.r)
		l, ok := n.l.(*binExpr)
		if !ok || l.op != "+" {
			operands = append(operands, n.l)
			break
		}
		n = l
	}
	var acc any
	var parts []string // the pending run of strings, acc not yet updated
	size := 0          // bytes in parts
	for i := len(operands) - 1; i >= 0; i-- {
		v, err := ev.eval(operands[i], f)
		if err != nil {
			return nil, false, err
		}
		if s, ok := v.(string); ok && (i == len(operands)-1 || parts != nil) {
			if size += len(s); size > MaxRenderBytes {
				return nil, false, wrapAt(e.line, checkRenderLen(size))
			}
			parts = append(parts, s)
			continue
		}
		if parts != nil {
			acc, parts = strings.Join(parts, ""), nil
		}
		if i == len(operands)-1 {
			acc = v
			continue
		}
		if acc, err = arith("+", acc, v); err != nil {
			return nil, false, wrapAt(e.line, err)
		}
	}
	switch {
	case parts != nil && out != nil: // every operand was a string
		for _, p := range parts {
			out.WriteString(p)
		}
		return nil, true, nil
	case parts != nil:
		return strings.Join(parts, ""), false, nil
	}
	return acc, false, nil
}

func (ev *evaluator) compare(e *compareExpr, f *frame) (any, error) {
	l, err := ev.eval(e.first, f)
	if err != nil {
		return nil, err
	}
	for i, op := range e.ops {
		r, err := ev.eval(e.rest[i], f)
		if err != nil {
			return nil, err
		}
		ok, err := compareOp(op, l, r)
		if err != nil {
			return nil, wrapAt(e.line, err)
		}
		if !ok {
			return false, nil
		}
		l = r
	}
	return true, nil
}

func compareOp(op string, l, r any) (bool, error) {
	switch op {
	case "==":
		return pyEqual(l, r), nil
	case "!=":
		return !pyEqual(l, r), nil
	case "in":
		return contains(r, l)
	case "notin":
		ok, err := contains(r, l)
		return !ok, err
	}
	c, err := pyCompare(l, r)
	if err != nil {
		return false, err
	}
	switch op {
	case "<":
		return c < 0, nil
	case "<=":
		return c <= 0, nil
	case ">":
		return c > 0, nil
	}
	return c >= 0, nil
}

// number converts bool, int and float for arithmetic (Python's bool is an int).
func number(v any) (i int64, fl float64, isFloat, ok bool) {
	switch x := v.(type) {
	case bool:
		if x {
			return 1, 1, false, true
		}
		return 0, 0, false, true
	case int64:
		return x, float64(x), false, true
	case float64:
		return 0, x, true, true
	}
	return 0, 0, false, false
}

func undefinedError(v any) error {
	return errorString("UndefinedError: '" + v.(undefined).name + "' is undefined")
}

func arith(op string, l, r any) (any, error) {
	if op == "~" {
		ls, rs := Str(l), Str(r)
		if err := checkRenderLen(len(ls) + len(rs)); err != nil {
			return nil, err
		}
		return ls + rs, nil
	}
	if _, ok := l.(undefined); ok {
		return nil, undefinedError(l)
	}
	if _, ok := r.(undefined); ok {
		return nil, undefinedError(r)
	}
	switch op {
	case "+":
		switch x := l.(type) {
		case string:
			if y, ok := r.(string); ok {
				if err := checkRenderLen(len(x) + len(y)); err != nil {
					return nil, err
				}
				return x + y, nil
			}
			return nil, errorString(`TypeError: can only concatenate str (not "` + typeName(r) + `") to str`)
		case []any:
			if y, ok := r.([]any); ok {
				return append(append([]any{}, x...), y...), nil
			}
			return nil, errorString(`TypeError: can only concatenate list (not "` + typeName(r) + `") to list`)
		}
	case "*":
		s, isStr := l.(string)
		n, isInt := r.(int64)
		if !isStr || !isInt {
			s, isStr = r.(string)
			n, isInt = l.(int64)
		}
		if isStr && isInt {
			n = max(n, 0)
			if len(s) > 0 && n > int64(MaxRenderBytes/len(s)) {
				return nil, checkRenderLen(MaxRenderBytes + 1)
			}
			return strings.Repeat(s, int(n)), nil
		}
	}
	li, lf, lFloat, lok := number(l)
	ri, rf, rFloat, rok := number(r)
	if !lok || !rok {
		return nil, errorString("TypeError: unsupported operand type(s) for " + op + ": '" + typeName(l) + "' and '" + typeName(r) + "'")
	}
	useFloat := lFloat || rFloat
	switch op {
	case "+":
		if useFloat {
			return lf + rf, nil
		}
		return li + ri, nil
	case "-":
		if useFloat {
			return lf - rf, nil
		}
		return li - ri, nil
	case "*":
		if useFloat {
			return lf * rf, nil
		}
		return li * ri, nil
	case "/":
		if rf == 0 {
			return nil, errorString("ZeroDivisionError: division by zero")
		}
		return lf / rf, nil
	case "//":
		if rf == 0 {
			return nil, errorString("ZeroDivisionError: integer division or modulo by zero")
		}
		if useFloat {
			return math.Floor(lf / rf), nil
		}
		q := li / ri
		if (li%ri != 0) && ((li < 0) != (ri < 0)) {
			q--
		}
		return q, nil
	case "%":
		if rf == 0 {
			return nil, errorString("ZeroDivisionError: integer division or modulo by zero")
		}
		if useFloat {
			m := math.Mod(lf, rf)
			if m != 0 && (m < 0) != (rf < 0) {
				m += rf
			}
			return m, nil
		}
		m := li % ri
		if m != 0 && (m < 0) != (ri < 0) {
			m += ri
		}
		return m, nil
	case "**":
		if !useFloat && ri >= 0 {
			p := int64(1)
			for range ri {
				p *= li
			}
			return p, nil
		}
		return math.Pow(lf, rf), nil
	}
	return nil, errorString("unknown operator " + op)
}

func unary(op string, x any, line int) (any, error) {
	if op == "not" {
		return !Truthy(x), nil
	}
	if _, ok := x.(undefined); ok {
		return nil, templateError(line, "%v", undefinedError(x))
	}
	i, fl, isFloat, ok := number(x)
	if !ok {
		return nil, templateError(line, "TypeError: bad operand type for unary %s: '%s'", op, typeName(x))
	}
	if op == "+" {
		if isFloat {
			return fl, nil
		}
		return i, nil
	}
	if isFloat {
		return -fl, nil
	}
	return -i, nil
}

// pyEqual is Python's ==.
func pyEqual(a, b any) bool {
	switch x := a.(type) {
	case undefined:
		_, ok := b.(undefined)
		return ok
	case nil:
		return b == nil
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !pyEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case *Dict:
		y, ok := b.(*Dict)
		if !ok || x.Len() != y.Len() {
			return false
		}
		for _, k := range x.keys {
			yv, ok := y.m[k]
			if !ok || !pyEqual(x.m[k], yv) {
				return false
			}
		}
		return true
	}
	_, af, _, aok := number(a)
	_, bf, _, bok := number(b)
	if aok && bok {
		ai, _, aF, _ := number(a)
		bi, _, bF, _ := number(b)
		if !aF && !bF {
			return ai == bi
		}
		return af == bf
	}
	return a == b
}

// pyCompare orders two values as Python's < does for numbers, strings and
// lists.
func pyCompare(a, b any) (int, error) {
	if x, ok := a.(string); ok {
		if y, ok := b.(string); ok {
			return strings.Compare(x, y), nil
		}
	}
	if x, ok := a.([]any); ok {
		if y, ok := b.([]any); ok {
			for i := 0; i < len(x) && i < len(y); i++ {
				if !pyEqual(x[i], y[i]) {
					return pyCompare(x[i], y[i])
				}
			}
			return len(x) - len(y), nil
		}
	}
	ai, af, aF, aok := number(a)
	bi, bf, bF, bok := number(b)
	if aok && bok {
		if !aF && !bF {
			switch {
			case ai < bi:
				return -1, nil
			case ai > bi:
				return 1, nil
			}
			return 0, nil
		}
		switch {
		case af < bf:
			return -1, nil
		case af > bf:
			return 1, nil
		}
		return 0, nil
	}
	return 0, errorString("TypeError: '<' not supported between instances of '" + typeName(a) + "' and '" + typeName(b) + "'")
}

// contains is Python's "item in container".
func contains(container, item any) (bool, error) {
	switch c := container.(type) {
	case string:
		s, ok := item.(string)
		if !ok {
			return false, errorString("TypeError: 'in <string>' requires string as left operand, not " + typeName(item))
		}
		return strings.Contains(c, s), nil
	case []any:
		for _, e := range c {
			if pyEqual(e, item) {
				return true, nil
			}
		}
		return false, nil
	case *Dict:
		s, ok := item.(string)
		if !ok {
			return false, nil
		}
		_, found := c.m[s]
		return found, nil
	case undefined:
		return false, nil
	case *namespace:
		return false, errorString("TypeError: argument of type 'Namespace' is not iterable")
	}
	return false, errorString("TypeError: argument of type '" + typeName(container) + "' is not iterable")
}

// iterate is Python's iter() as a for loop sees it: dicts give their keys,
// strings their characters, Undefined nothing.
func iterate(v any, line int) ([]any, error) {
	switch x := v.(type) {
	case []any:
		return x, nil
	case *Dict:
		items := make([]any, len(x.keys))
		for i, k := range x.keys {
			items[i] = k
		}
		return items, nil
	case string:
		var items []any
		for _, r := range x {
			items = append(items, string(r))
		}
		return items, nil
	case undefined:
		return nil, nil
	}
	return nil, templateError(line, "TypeError: '%s' object is not iterable", typeName(v))
}
