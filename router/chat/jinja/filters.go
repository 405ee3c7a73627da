package jinja

import (
	"html"
	"math"
	"sort"
	"strconv"
	"strings"
)

type filterFunc func(ev *evaluator, v any, args []any, kw *Dict) (any, error)

var filters map[string]filterFunc

func (ev *evaluator) filter(e *filterExpr, f *frame) (any, error) {
	fn, ok := filters[e.name]
	if !ok {
		return nil, templateError(e.line, "TemplateAssertionError: No filter named '%s'", e.name)
	}
	v, err := ev.eval(e.obj, f)
	if err != nil {
		return nil, err
	}
	args, kw, err := ev.evalArgs(e.args, e.kwargs, f)
	if err != nil {
		return nil, err
	}
	out, err := fn(ev, v, args, kw)
	if err != nil {
		return nil, wrapTemplate(err, e.line)
	}
	return out, nil
}

// arg returns positional argument i or keyword name, else def.
func arg(args []any, kw *Dict, i int, name string, def any) any {
	if i < len(args) {
		return args[i]
	}
	if v, ok := kw.Get(name); ok {
		return v
	}
	return def
}

func init() {
	filters = map[string]filterFunc{
		"tojson":     tojsonFilter,
		"length":     lengthFilter,
		"count":      lengthFilter,
		"string":     func(_ *evaluator, v any, _ []any, _ *Dict) (any, error) { return Str(v), nil },
		"safe":       func(_ *evaluator, v any, _ []any, _ *Dict) (any, error) { return v, nil },
		"trim":       trimFilter,
		"lower":      strFilter(strings.ToLower),
		"upper":      strFilter(strings.ToUpper),
		"title":      strFilter(pyTitle),
		"capitalize": strFilter(pyCapitalize),
		"escape":     strFilter(html.EscapeString), // the same five entities as markupsafe
		"e":          strFilter(html.EscapeString),
		"default":    defaultFilter,
		"d":          defaultFilter,
		"first":      firstLast(true),
		"last":       firstLast(false),
		"join":       joinFilter,
		"list": func(_ *evaluator, v any, _ []any, _ *Dict) (any, error) {
			return iterate(v, 0)
		},
		"items":   itemsFilter,
		"replace": replaceFilter,
		"int":     intFilter,
		"float":   floatFilter,
		"abs":     absFilter,
		"round":   roundFilter,
		"reverse": reverseFilter,
		"unique":  uniqueFilter,
		"sort":    sortFilter,
		"indent":  indentFilter,
		"wordcount": func(_ *evaluator, v any, _ []any, _ *Dict) (any, error) {
			return int64(len(splitSpace(Str(v), -1, false))), nil
		},
		"selectattr": selectFilter(true, false),
		"rejectattr": selectFilter(true, true),
		"select":     selectFilter(false, false),
		"reject":     selectFilter(false, true),
		"map":        mapFilter,
		"sum":        sumFilter,
		"min":        minMax(-1),
		"max":        minMax(1),
	}
}

// tojsonFilter is transformers' tojson, json.dumps with ensure_ascii=False
// and no key sorting by default (Jinja2's own tojson sorts keys and
// HTML-escapes, which would change the rendered prompt).
func tojsonFilter(_ *evaluator, v any, args []any, kw *Dict) (any, error) {
	ensureASCII := Truthy(arg(args, kw, 0, "ensure_ascii", false))
	var indent *string
	switch x := arg(args, kw, 1, "indent", nil).(type) {
	case nil:
	case int64:
		s := strings.Repeat(" ", int(max(x, 0)))
		indent = &s
	case string:
		indent = &x
	default:
		return nil, errorString("TypeError: indent must be int or str")
	}
	var seps []string
	if s := arg(args, kw, 2, "separators", nil); s != nil {
		list, ok := s.([]any)
		if !ok || len(list) != 2 {
			return nil, errorString("ValueError: separators must be a pair of strings")
		}
		a, ok1 := list[0].(string)
		b, ok2 := list[1].(string)
		if !ok1 || !ok2 {
			return nil, errorString("ValueError: separators must be a pair of strings")
		}
		seps = []string{a, b}
	}
	o := newDumpOptions(indent, seps)
	o.ensureASCII = ensureASCII
	o.sortKeys = Truthy(arg(args, kw, 3, "sort_keys", false))
	return pyDumps(v, o)
}

func lengthFilter(_ *evaluator, v any, _ []any, _ *Dict) (any, error) {
	switch x := v.(type) {
	case string:
		return int64(runeLen(x)), nil
	case []any:
		return int64(len(x)), nil
	case *Dict:
		return int64(x.Len()), nil
	case undefined:
		return int64(0), nil
	}
	return nil, errorString("TypeError: object of type '" + typeName(v) + "' has no len()")
}

func trimFilter(_ *evaluator, v any, args []any, kw *Dict) (any, error) {
	if c, ok := arg(args, kw, 0, "chars", nil).(string); ok {
		return Strip(Str(v), &c, true, true), nil
	}
	return Strip(Str(v), nil, true, true), nil
}

func strFilter(fn func(string) string) filterFunc {
	return func(_ *evaluator, v any, _ []any, _ *Dict) (any, error) { return fn(Str(v)), nil }
}

func defaultFilter(_ *evaluator, v any, args []any, kw *Dict) (any, error) {
	def := arg(args, kw, 0, "default_value", "")
	_, isUndef := v.(undefined)
	if isUndef || Truthy(arg(args, kw, 1, "boolean", false)) && !Truthy(v) {
		return def, nil
	}
	return v, nil
}

func firstLast(first bool) filterFunc {
	return func(_ *evaluator, v any, _ []any, _ *Dict) (any, error) {
		items, err := iterate(v, 0)
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			return undefined{"first"}, nil
		}
		if first {
			return items[0], nil
		}
		return items[len(items)-1], nil
	}
}

func joinFilter(_ *evaluator, v any, args []any, kw *Dict) (any, error) {
	sep := Str(arg(args, kw, 0, "d", ""))
	items, err := iterate(v, 0)
	if err != nil {
		return nil, err
	}
	attr, _ := arg(args, kw, 1, "attribute", nil).(string)
	parts := make([]string, len(items))
	for i, it := range items {
		if attr != "" {
			if it, err = attrPath(it, attr); err != nil {
				return nil, err
			}
		}
		parts[i] = Str(it)
	}
	return strings.Join(parts, sep), nil
}

func itemsFilter(_ *evaluator, v any, _ []any, _ *Dict) (any, error) {
	switch x := v.(type) {
	case undefined:
		return []any{}, nil
	case *Dict:
		return dictMethod(x, "items", nil)
	}
	return nil, errorString("TypeError: Can only get item pairs from a mapping.")
}

func replaceFilter(_ *evaluator, v any, args []any, kw *Dict) (any, error) {
	old := Str(arg(args, kw, 0, "old", ""))
	repl := Str(arg(args, kw, 1, "new", ""))
	n := -1
	if c, ok := arg(args, kw, 2, "count", nil).(int64); ok {
		n = int(c)
	}
	return strings.Replace(Str(v), old, repl, n), nil
}

func intFilter(_ *evaluator, v any, args []any, kw *Dict) (any, error) {
	def := arg(args, kw, 0, "default", int64(0))
	switch x := v.(type) {
	case bool:
		if x {
			return int64(1), nil
		}
		return int64(0), nil
	case int64:
		return x, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return def, nil
		}
		return int64(x), nil
	case string:
		s := strings.ReplaceAll(Strip(x, nil, true, true), "_", "")
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, nil
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsInf(f, 0) && !math.IsNaN(f) {
			return int64(f), nil
		}
	}
	return def, nil
}

func floatFilter(_ *evaluator, v any, args []any, kw *Dict) (any, error) {
	def := arg(args, kw, 0, "default", 0.0)
	switch x := v.(type) {
	case string:
		if f, err := strconv.ParseFloat(Strip(x, nil, true, true), 64); err == nil {
			return f, nil
		}
		return def, nil
	}
	if _, f, _, ok := number(v); ok {
		return f, nil
	}
	return def, nil
}

func absFilter(_ *evaluator, v any, _ []any, _ *Dict) (any, error) {
	i, f, isFloat, ok := number(v)
	if !ok {
		return nil, errorString("TypeError: bad operand type for abs(): '" + typeName(v) + "'")
	}
	if isFloat {
		return math.Abs(f), nil
	}
	if i < 0 {
		return -i, nil
	}
	return i, nil
}

func roundFilter(_ *evaluator, v any, args []any, kw *Dict) (any, error) {
	_, f, _, ok := number(v)
	if !ok {
		return nil, errorString("TypeError: round() needs a number")
	}
	prec, _ := arg(args, kw, 0, "precision", int64(0)).(int64)
	method, _ := arg(args, kw, 1, "method", "common").(string)
	p := math.Pow(10, float64(prec))
	switch method {
	case "ceil":
		return math.Ceil(f*p) / p, nil
	case "floor":
		return math.Floor(f*p) / p, nil
	}
	return math.RoundToEven(f*p) / p, nil
}

func reverseFilter(_ *evaluator, v any, _ []any, _ *Dict) (any, error) {
	if s, ok := v.(string); ok {
		rs := []rune(s)
		for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
			rs[i], rs[j] = rs[j], rs[i]
		}
		return string(rs), nil
	}
	items, err := iterate(v, 0)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(items))
	for i, it := range items {
		out[len(items)-1-i] = it
	}
	return out, nil
}

func uniqueFilter(_ *evaluator, v any, _ []any, _ *Dict) (any, error) {
	items, err := iterate(v, 0)
	if err != nil {
		return nil, err
	}
	var out []any
	for _, it := range items {
		dup := false
		for _, o := range out {
			if pyEqual(foldCase(o), foldCase(it)) {
				dup = true
				break
			}
		}
		if !dup {
			out = append(out, it)
		}
	}
	return out, nil
}

// foldCase lower-cases strings, as Jinja2's case-insensitive filters do.
func foldCase(v any) any {
	if s, ok := v.(string); ok {
		return strings.ToLower(s)
	}
	return v
}

func sortFilter(_ *evaluator, v any, args []any, kw *Dict) (any, error) {
	items, err := iterate(v, 0)
	if err != nil {
		return nil, err
	}
	reverse := Truthy(arg(args, kw, 0, "reverse", false))
	caseSensitive := Truthy(arg(args, kw, 1, "case_sensitive", false))
	attr, _ := arg(args, kw, 2, "attribute", nil).(string)
	keys := make([]any, len(items))
	for i, it := range items {
		k := it
		if attr != "" {
			if k, err = attrPath(it, attr); err != nil {
				return nil, err
			}
		}
		if !caseSensitive {
			k = foldCase(k)
		}
		keys[i] = k
	}
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	var cmpErr error
	sort.SliceStable(idx, func(a, b int) bool {
		c, err := pyCompare(keys[idx[a]], keys[idx[b]])
		if err != nil {
			cmpErr = err
		}
		if reverse {
			return c > 0
		}
		return c < 0
	})
	if cmpErr != nil {
		return nil, cmpErr
	}
	out := make([]any, len(items))
	for i, j := range idx {
		out[i] = items[j]
	}
	return out, nil
}

func indentFilter(_ *evaluator, v any, args []any, kw *Dict) (any, error) {
	var pad string
	switch w := arg(args, kw, 0, "width", int64(4)).(type) {
	case int64:
		pad = strings.Repeat(" ", int(max(w, 0)))
	case string:
		pad = w
	}
	first := Truthy(arg(args, kw, 1, "first", false))
	blank := Truthy(arg(args, kw, 2, "blank", false))
	s := Str(v)
	lines := strings.Split(s, "\n")
	for i := range lines {
		if i == 0 && !first {
			continue
		}
		if lines[i] != "" || blank {
			lines[i] = pad + lines[i]
		}
	}
	return strings.Join(lines, "\n"), nil
}

// attrPath resolves a dotted attribute name as Jinja2's make_attrgetter does.
func attrPath(v any, path string) (any, error) {
	for _, part := range strings.Split(path, ".") {
		var key any = part
		if n, err := strconv.ParseInt(part, 10, 64); err == nil {
			key = n
		}
		var err error
		if v, err = getItem(v, key, 0); err != nil {
			return nil, err
		}
	}
	return v, nil
}

// selectFilter is select/reject (by test) and selectattr/rejectattr (by
// attribute, then test).
func selectFilter(byAttr, reject bool) filterFunc {
	return func(ev *evaluator, v any, args []any, _ *Dict) (any, error) {
		if !Truthy(v) { // Jinja2 selects from a false sequence (None) nothing
			return []any{}, nil
		}
		items, err := iterate(v, 0)
		if err != nil {
			return nil, err
		}
		attr := ""
		if byAttr {
			if len(args) == 0 {
				return nil, errorString("TypeError: missing attribute for selectattr")
			}
			attr = Str(args[0])
			args = args[1:]
		}
		var testName string
		if len(args) > 0 {
			testName = Str(args[0])
			args = args[1:]
		}
		var out []any
		for _, it := range items {
			x := it
			if byAttr {
				if x, err = attrPath(it, attr); err != nil {
					return nil, err
				}
			}
			ok := Truthy(x)
			if testName != "" {
				t, found := tests[testName]
				if !found {
					return nil, errorString("TemplateRuntimeError: No test named '" + testName + "'")
				}
				if ok, err = t(x, args); err != nil {
					return nil, err
				}
			}
			if ok != reject {
				out = append(out, it)
			}
		}
		if out == nil {
			out = []any{}
		}
		return out, nil
	}
}

func mapFilter(ev *evaluator, v any, args []any, kw *Dict) (any, error) {
	if !Truthy(v) { // Jinja2 maps a false sequence (None) to nothing
		return []any{}, nil
	}
	items, err := iterate(v, 0)
	if err != nil {
		return nil, err
	}
	out := make([]any, len(items))
	if a, ok := kw.Get("attribute"); ok {
		def, hasDef := kw.Get("default")
		for i, it := range items {
			x, err := attrPath(it, Str(a))
			if err != nil {
				return nil, err
			}
			if _, undef := x.(undefined); undef && hasDef {
				x = def
			}
			out[i] = x
		}
		return out, nil
	}
	if len(args) == 0 {
		return items, nil
	}
	name := Str(args[0])
	fn, ok := filters[name]
	if !ok {
		return nil, errorString("TemplateRuntimeError: No filter named '" + name + "'")
	}
	for i, it := range items {
		if out[i], err = fn(ev, it, args[1:], kw); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func sumFilter(_ *evaluator, v any, args []any, kw *Dict) (any, error) {
	items, err := iterate(v, 0)
	if err != nil {
		return nil, err
	}
	attr, _ := arg(args, kw, 0, "attribute", nil).(string)
	var total any = arg(args, kw, 1, "start", int64(0))
	for _, it := range items {
		if attr != "" {
			if it, err = attrPath(it, attr); err != nil {
				return nil, err
			}
		}
		if total, err = arith("+", total, it); err != nil {
			return nil, err
		}
	}
	return total, nil
}

func minMax(sign int) filterFunc {
	return func(_ *evaluator, v any, _ []any, _ *Dict) (any, error) {
		items, err := iterate(v, 0)
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			return undefined{"min"}, nil
		}
		best := items[0]
		for _, it := range items[1:] {
			c, err := pyCompare(foldCase(it), foldCase(best))
			if err != nil {
				return nil, err
			}
			if c*sign > 0 {
				best = it
			}
		}
		return best, nil
	}
}
