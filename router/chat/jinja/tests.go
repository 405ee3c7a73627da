package jinja

type testFunc func(v any, args []any) (bool, error)

var tests map[string]testFunc

func (ev *evaluator) test(e *testExpr, f *frame) (any, error) {
	fn, ok := tests[e.name]
	if !ok {
		return nil, templateError(e.line, "TemplateAssertionError: No test named '%s'", e.name)
	}
	v, err := ev.eval(e.obj, f)
	if err != nil {
		return nil, err
	}
	args, _, err := ev.evalArgs(e.args, nil, f)
	if err != nil {
		return nil, err
	}
	r, err := fn(v, args)
	if err != nil {
		return nil, templateError(e.line, "%v", err)
	}
	return r != e.negate, nil
}

func is[T any](v any, _ []any) (bool, error) {
	_, ok := v.(T)
	return ok, nil
}

func compareTest(op string) testFunc {
	return func(v any, args []any) (bool, error) {
		if len(args) != 1 {
			return false, errorString("TypeError: test takes one argument")
		}
		return compareOp(op, v, args[0])
	}
}

func init() {
	tests = map[string]testFunc{
		"defined":   func(v any, _ []any) (bool, error) { _, u := v.(undefined); return !u, nil },
		"undefined": is[undefined],
		"none":      func(v any, _ []any) (bool, error) { return v == nil, nil },
		"string":    is[string],
		"mapping":   is[*Dict],
		"boolean":   is[bool],
		"float":     is[float64],
		"integer":   is[int64],
		"callable":  is[callable],
		"true":      func(v any, _ []any) (bool, error) { b, ok := v.(bool); return ok && b, nil },
		"false":     func(v any, _ []any) (bool, error) { b, ok := v.(bool); return ok && !b, nil },
		"number": func(v any, _ []any) (bool, error) {
			_, _, _, ok := number(v)
			return ok, nil
		},
		"iterable": func(v any, _ []any) (bool, error) {
			switch v.(type) {
			case string, []any, *Dict, undefined:
				return true, nil
			}
			return false, nil
		},
		"sequence": func(v any, _ []any) (bool, error) {
			switch v.(type) {
			case string, []any, *Dict:
				return true, nil
			}
			return false, nil
		},
		"odd": func(v any, _ []any) (bool, error) {
			n, ok := v.(int64)
			return ok && n%2 != 0, nil
		},
		"even": func(v any, _ []any) (bool, error) {
			n, ok := v.(int64)
			return ok && n%2 == 0, nil
		},
		"divisibleby": func(v any, args []any) (bool, error) {
			m, err := arith("%", v, argOrNil(args))
			return err == nil && pyEqual(m, int64(0)), err
		},
		"lower": func(v any, _ []any) (bool, error) {
			s, ok := v.(string)
			if !ok {
				return false, nil
			}
			r, _ := strMethods["islower"](s, nil, nil)
			return r.(bool), nil
		},
		"upper": func(v any, _ []any) (bool, error) {
			s, ok := v.(string)
			if !ok {
				return false, nil
			}
			r, _ := strMethods["isupper"](s, nil, nil)
			return r.(bool), nil
		},
		"sameas": func(v any, args []any) (bool, error) {
			a := argOrNil(args)
			switch a.(type) {
			case nil, bool:
				return v == a, nil
			}
			return false, nil
		},
		"in":      func(v any, args []any) (bool, error) { return contains(argOrNil(args), v) },
		"escaped": func(any, []any) (bool, error) { return false, nil },
	}
	for _, op := range []struct{ op, names string }{
		{"==", "eq equalto =="}, {"!=", "ne !="}, {"<", "lt lessthan <"}, {"<=", "le <="},
		{">", "gt greaterthan >"}, {">=", "ge >="},
	} {
		for _, name := range splitSpace(op.names, -1, false) {
			tests[name] = compareTest(op.op)
		}
	}
}

func argOrNil(args []any) any {
	if len(args) == 0 {
		return nil
	}
	return args[0]
}
