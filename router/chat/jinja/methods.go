package jinja

import (
	"strings"
	"unicode"
)

// method returns the bound Python method obj.name that chat templates call
// (str, dict and list methods), or nil. Mutating methods raise, as the
// immutable sandbox makes them do.
func method(obj any, name string) callable {
	switch x := obj.(type) {
	case string:
		if m, ok := strMethods[name]; ok {
			return func(ev *evaluator, args []any, kw *Dict) (any, error) { return m(x, args, kw) }
		}
	case *Dict:
		switch name {
		case "items", "keys", "values", "get":
			return func(_ *evaluator, args []any, _ *Dict) (any, error) { return dictMethod(x, name, args) }
		case "pop", "popitem", "update", "setdefault", "clear":
			return unsafeCall("dict", name)
		}
	case []any:
		switch name {
		case "index", "count":
			return func(_ *evaluator, args []any, _ *Dict) (any, error) { return listMethod(x, name, args) }
		case "append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear":
			return unsafeCall("list", name)
		}
	}
	return nil
}

func unsafeCall(typ, name string) callable {
	return func(*evaluator, []any, *Dict) (any, error) {
		return nil, errorString("SecurityError: access to attribute '" + name + "' of '" + typ + "' object is unsafe.")
	}
}

func dictMethod(d *Dict, name string, args []any) (any, error) {
	switch name {
	case "items":
		out := make([]any, len(d.keys))
		for i, k := range d.keys {
			out[i] = []any{k, d.m[k]}
		}
		return out, nil
	case "keys":
		out := make([]any, len(d.keys))
		for i, k := range d.keys {
			out[i] = k
		}
		return out, nil
	case "values":
		out := make([]any, len(d.keys))
		for i, k := range d.keys {
			out[i] = d.m[k]
		}
		return out, nil
	}
	if len(args) == 0 {
		return nil, errorString("TypeError: get expected at least 1 argument, got 0")
	}
	if k, ok := args[0].(string); ok {
		if v, ok := d.m[k]; ok {
			return v, nil
		}
	}
	if len(args) > 1 {
		return args[1], nil
	}
	return nil, nil
}

func listMethod(l []any, name string, args []any) (any, error) {
	if len(args) != 1 {
		return nil, errorString("TypeError: list." + name + "() takes exactly one argument")
	}
	n := int64(0)
	for i, e := range l {
		if pyEqual(e, args[0]) {
			if name == "index" {
				return int64(i), nil
			}
			n++
		}
	}
	if name == "index" {
		return nil, errorString("ValueError: " + Str(args[0]) + " is not in list")
	}
	return n, nil
}

type strMethod func(s string, args []any, kw *Dict) (any, error)

var strMethods map[string]strMethod

func init() {
	strMethods = map[string]strMethod{
		"startswith": func(s string, a []any, _ *Dict) (any, error) { return affix(s, a, strings.HasPrefix) },
		"endswith":   func(s string, a []any, _ *Dict) (any, error) { return affix(s, a, strings.HasSuffix) },
		"strip":      stripMethod(true, true),
		"lstrip":     stripMethod(true, false),
		"rstrip":     stripMethod(false, true),
		"split":      splitMethod(false),
		"rsplit":     splitMethod(true),
		"lower":      func(s string, _ []any, _ *Dict) (any, error) { return strings.ToLower(s), nil },
		"upper":      func(s string, _ []any, _ *Dict) (any, error) { return strings.ToUpper(s), nil },
		"title":      func(s string, _ []any, _ *Dict) (any, error) { return pyTitle(s), nil },
		"capitalize": func(s string, _ []any, _ *Dict) (any, error) { return pyCapitalize(s), nil },
		"replace":    replaceMethod,
		"find":       findMethod(false),
		"rfind":      findMethod(true),
		"count": func(s string, a []any, _ *Dict) (any, error) {
			sub, err := strArg(a, 0, "count")
			if err != nil {
				return nil, err
			}
			if sub == "" {
				return int64(runeLen(s) + 1), nil
			}
			return int64(strings.Count(s, sub)), nil
		},
		"join": func(s string, a []any, _ *Dict) (any, error) {
			if len(a) != 1 {
				return nil, errorString("TypeError: str.join() takes exactly one argument")
			}
			items, err := iterate(a[0], 0)
			if err != nil {
				return nil, err
			}
			parts := make([]string, len(items))
			for i, it := range items {
				str, ok := it.(string)
				if !ok {
					return nil, errorString("TypeError: sequence item " + Str(int64(i)) + ": expected str instance, " + typeName(it) + " found")
				}
				parts[i] = str
			}
			return strings.Join(parts, s), nil
		},
		"isdigit": runeTest(unicode.IsDigit),
		"isalpha": runeTest(unicode.IsLetter),
		"isspace": runeTest(pyIsSpace),
		"isalnum": runeTest(func(r rune) bool { return unicode.IsLetter(r) || unicode.IsNumber(r) }),
		"isupper": func(s string, _ []any, _ *Dict) (any, error) {
			return strings.ToUpper(s) == s && strings.ToLower(s) != s, nil
		},
		"islower": func(s string, _ []any, _ *Dict) (any, error) {
			return strings.ToLower(s) == s && strings.ToUpper(s) != s, nil
		},
		"splitlines": func(s string, _ []any, _ *Dict) (any, error) {
			if s == "" {
				return []any{}, nil
			}
			lines := strings.Split(normalizeSource(s+"\n"), "\n")
			out := make([]any, len(lines))
			for i, l := range lines {
				out[i] = l
			}
			return out, nil
		},
		"format": formatMethod,
	}
}

func strArg(a []any, i int, name string) (string, error) {
	if i >= len(a) {
		return "", errorString("TypeError: " + name + "() missing argument")
	}
	s, ok := a[i].(string)
	if !ok {
		return "", errorString("TypeError: " + name + "() argument must be str, not " + typeName(a[i]))
	}
	return s, nil
}

func affix(s string, a []any, has func(string, string) bool) (any, error) {
	if len(a) == 0 {
		return nil, errorString("TypeError: startswith() takes at least 1 argument (0 given)")
	}
	if list, ok := a[0].([]any); ok {
		for _, p := range list {
			ps, ok := p.(string)
			if !ok {
				return nil, errorString("TypeError: tuple for startswith must only contain str")
			}
			if has(s, ps) {
				return true, nil
			}
		}
		return false, nil
	}
	p, err := strArg(a, 0, "startswith")
	if err != nil {
		return nil, err
	}
	return has(s, p), nil
}

func stripMethod(left, right bool) strMethod {
	return func(s string, a []any, _ *Dict) (any, error) {
		if len(a) == 0 || a[0] == nil {
			return Strip(s, nil, left, right), nil
		}
		chars, err := strArg(a, 0, "strip")
		if err != nil {
			return nil, err
		}
		return Strip(s, &chars, left, right), nil
	}
}

func splitMethod(fromRight bool) strMethod {
	return func(s string, a []any, kw *Dict) (any, error) {
		var sep any
		maxsplit := int64(-1)
		if len(a) > 0 {
			sep = a[0]
		} else if v, ok := kw.Get("sep"); ok {
			sep = v
		}
		if len(a) > 1 {
			if n, ok := a[1].(int64); ok {
				maxsplit = n
			}
		} else if v, ok := kw.Get("maxsplit"); ok {
			if n, ok := v.(int64); ok {
				maxsplit = n
			}
		}
		var parts []string
		switch sp := sep.(type) {
		case nil:
			parts = splitSpace(s, int(maxsplit), fromRight)
		case string:
			if sp == "" {
				return nil, errorString("ValueError: empty separator")
			}
			switch {
			case maxsplit < 0:
				parts = strings.Split(s, sp)
			case fromRight:
				parts = rsplitN(s, sp, int(maxsplit))
			default:
				parts = strings.SplitN(s, sp, int(maxsplit)+1)
			}
		default:
			return nil, errorString("TypeError: must be str or None, not " + typeName(sep))
		}
		out := make([]any, len(parts))
		for i, p := range parts {
			out[i] = p
		}
		return out, nil
	}
}

func rsplitN(s, sep string, n int) []string {
	var rev []string
	for n > 0 {
		i := strings.LastIndex(s, sep)
		if i < 0 {
			break
		}
		rev = append(rev, s[i+len(sep):])
		s = s[:i]
		n--
	}
	out := []string{s}
	for i := len(rev) - 1; i >= 0; i-- {
		out = append(out, rev[i])
	}
	return out
}

// splitSpace is str.split() without a separator: runs of whitespace split,
// ends are trimmed, and maxsplit leaves the remainder untouched.
func splitSpace(s string, maxsplit int, fromRight bool) []string {
	if fromRight {
		rs := []rune(s)
		for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
			rs[i], rs[j] = rs[j], rs[i]
		}
		parts := splitSpace(string(rs), maxsplit, false)
		out := make([]string, len(parts))
		for i, p := range parts {
			pr := []rune(p)
			for a, b := 0, len(pr)-1; a < b; a, b = a+1, b-1 {
				pr[a], pr[b] = pr[b], pr[a]
			}
			out[len(parts)-1-i] = string(pr)
		}
		return out
	}
	var out []string
	rest := strings.TrimLeftFunc(s, pyIsSpace)
	for rest != "" {
		if maxsplit >= 0 && len(out) == maxsplit {
			out = append(out, rest)
			return out
		}
		end := strings.IndexFunc(rest, pyIsSpace)
		if end < 0 {
			out = append(out, rest)
			return out
		}
		out = append(out, rest[:end])
		rest = strings.TrimLeftFunc(rest[end:], pyIsSpace)
	}
	if out == nil {
		out = []string{}
	}
	return out
}

func replaceMethod(s string, a []any, _ *Dict) (any, error) {
	old, err := strArg(a, 0, "replace")
	if err != nil {
		return nil, err
	}
	repl, err := strArg(a, 1, "replace")
	if err != nil {
		return nil, err
	}
	n := -1
	if len(a) > 2 {
		if c, ok := a[2].(int64); ok {
			n = int(c)
		}
	}
	return strings.Replace(s, old, repl, n), nil
}

func findMethod(last bool) strMethod {
	return func(s string, a []any, _ *Dict) (any, error) {
		sub, err := strArg(a, 0, "find")
		if err != nil {
			return nil, err
		}
		i := strings.Index(s, sub)
		if last {
			i = strings.LastIndex(s, sub)
		}
		if i < 0 {
			return int64(-1), nil
		}
		return int64(runeLen(s[:i])), nil
	}
}

func runeTest(ok func(rune) bool) strMethod {
	return func(s string, _ []any, _ *Dict) (any, error) {
		if s == "" {
			return false, nil
		}
		for _, r := range s {
			if !ok(r) {
				return false, nil
			}
		}
		return true, nil
	}
}

// pyTitle is str.title: a cased letter after an uncased character starts a
// word and is upper-cased, the others are lower-cased.
func pyTitle(s string) string {
	var b strings.Builder
	prevCased := false
	for _, r := range s {
		cased := unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r)
		switch {
		case cased && !prevCased:
			b.WriteRune(unicode.ToTitle(r))
		case cased:
			b.WriteRune(unicode.ToLower(r))
		default:
			b.WriteRune(r)
		}
		prevCased = cased
	}
	return b.String()
}

// pyCapitalize is str.capitalize: first character title-cased, rest lower.
func pyCapitalize(s string) string {
	for i, r := range s {
		return string(unicode.ToTitle(r)) + strings.ToLower(s[i+len(string(r)):])
	}
	return s
}

// formatMethod is str.format for "{}", "{0}" and "{name}" fields without
// format specs, the forms chat templates use.
func formatMethod(s string, a []any, kw *Dict) (any, error) {
	var b strings.Builder
	auto := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '{' && i+1 < len(s) && s[i+1] == '{' || c == '}' && i+1 < len(s) && s[i+1] == '}' {
			b.WriteByte(c)
			i++
			continue
		}
		if c != '{' {
			b.WriteByte(c)
			continue
		}
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return nil, errorString("ValueError: Single '{' encountered in format string")
		}
		field := s[i+1 : i+end]
		i += end
		var v any
		switch {
		case field == "":
			if auto >= len(a) {
				return nil, errorString("IndexError: Replacement index out of range")
			}
			v = a[auto]
			auto++
		case field[0] >= '0' && field[0] <= '9':
			n := int(field[0] - '0')
			if len(field) != 1 || n >= len(a) {
				return nil, errorString("unsupported format field {" + field + "}")
			}
			v = a[n]
		default:
			val, ok := kw.Get(field)
			if !ok {
				return nil, errorString("KeyError: '" + field + "'")
			}
			v = val
		}
		b.WriteString(Str(v))
	}
	return b.String(), nil
}
