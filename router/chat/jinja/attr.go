package jinja

import (
	"errors"
	"strings"
)

func isTemplateError(err error) bool { return errors.Is(err, ErrTemplate) }

// getAttr is Jinja2's obj.attr: a Python attribute first (so dict.items is
// the method), then the item; anything missing is Undefined. The sandbox
// hides names starting with an underscore.
func getAttr(obj any, attr string, line int) (any, error) {
	if u, ok := obj.(undefined); ok {
		return nil, templateError(line, "UndefinedError: '%s' is undefined", u.name)
	}
	if strings.HasPrefix(attr, "_") {
		return undefined{attr}, nil
	}
	if m := method(obj, attr); m != nil {
		return m, nil
	}
	switch x := obj.(type) {
	case *Dict:
		if v, ok := x.m[attr]; ok {
			return v, nil
		}
	case *namespace:
		if v, ok := x.attrs.m[attr]; ok {
			return v, nil
		}
	case *loopInfo:
		return x.attr(attr), nil
	}
	return undefined{attr}, nil
}

// getItem is Jinja2's obj[key]: the item first, then the attribute;
// anything missing, including an index out of range, is Undefined.
func getItem(obj any, key any, line int) (any, error) {
	if u, ok := obj.(undefined); ok {
		return nil, templateError(line, "UndefinedError: '%s' is undefined", u.name)
	}
	switch x := obj.(type) {
	case *Dict:
		if k, ok := key.(string); ok {
			if v, ok := x.m[k]; ok {
				return v, nil
			}
		}
	case []any:
		if i, ok := index(key, len(x)); ok {
			return x[i], nil
		}
	case string:
		if _, isInt := key.(int64); isInt {
			rs := []rune(x)
			if i, ok := index(key, len(rs)); ok {
				return string(rs[i]), nil
			}
		}
	case *namespace:
		if k, ok := key.(string); ok {
			if v, ok := x.attrs.m[k]; ok {
				return v, nil
			}
		}
	}
	if k, ok := key.(string); ok {
		return getAttr(obj, k, line)
	}
	return undefined{Str(key)}, nil
}

// index resolves a Python index (negative from the end) into [0, n).
func index(key any, n int) (int, bool) {
	var i int64
	switch k := key.(type) {
	case int64:
		i = k
	case bool:
		if k {
			i = 1
		}
	default:
		return 0, false
	}
	if i < 0 {
		i += int64(n)
	}
	if i < 0 || i >= int64(n) {
		return 0, false
	}
	return int(i), true
}

func (ev *evaluator) slice(obj any, s *sliceExpr, f *frame, line int) (any, error) {
	var bounds [3]*int64
	for i, e := range []expr{s.start, s.stop, s.step} {
		if e == nil {
			continue
		}
		v, err := ev.eval(e, f)
		if err != nil {
			return nil, err
		}
		switch x := v.(type) {
		case nil:
		case int64:
			bounds[i] = &x
		default:
			return nil, templateError(line, "TypeError: slice indices must be integers or None")
		}
	}
	step := int64(1)
	if bounds[2] != nil {
		step = *bounds[2]
		if step == 0 {
			return nil, templateError(line, "ValueError: slice step cannot be zero")
		}
	}
	switch x := obj.(type) {
	case []any:
		idx := sliceIndices(len(x), bounds[0], bounds[1], step)
		out := make([]any, len(idx))
		for i, j := range idx {
			out[i] = x[j]
		}
		return out, nil
	case string:
		rs := []rune(x)
		idx := sliceIndices(len(rs), bounds[0], bounds[1], step)
		out := make([]rune, len(idx))
		for i, j := range idx {
			out[i] = rs[j]
		}
		return string(out), nil
	case undefined:
		return nil, templateError(line, "UndefinedError: '%s' is undefined", x.name)
	}
	return undefined{"slice"}, nil
}

// sliceIndices are the indices Python's seq[start:stop:step] selects.
func sliceIndices(n int, start, stop *int64, step int64) []int {
	clamp := func(p *int64, def, lo, hi int64) int64 {
		if p == nil {
			return def
		}
		v := *p
		if v < 0 {
			v += int64(n)
			if v < lo {
				v = lo
			}
		} else if v > hi {
			v = hi
		}
		return v
	}
	var out []int
	if step > 0 {
		b, e := clamp(start, 0, 0, int64(n)), clamp(stop, int64(n), 0, int64(n))
		for i := b; i < e; i += step {
			out = append(out, int(i))
		}
	} else {
		b, e := clamp(start, int64(n)-1, -1, int64(n)-1), clamp(stop, -1, -1, int64(n)-1)
		for i := b; i > e; i += step {
			out = append(out, int(i))
		}
	}
	return out
}
