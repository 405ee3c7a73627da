package jinja

// LoopsOverItemKey reports whether the template has a loop over item[key]
// or item.key (directly or under a filter, test or slice), where item is
// the target of a loop over the variable list or over a {% set %} alias of
// it. It is the walk of the jinja2 AST behind vLLM's
// _detect_content_format, which asks it with list "messages" and key
// "content".
func (t *Template) LoopsOverItemKey(list, key string) bool {
	var sets []*setNode
	var loops []*forNode
	walk(t.body, func(n node) {
		switch n := n.(type) {
		case *setNode:
			if n.value != nil && len(n.targets) == 1 && n.attr == "" {
				sets = append(sets, n)
			}
		case *forNode:
			loops = append(loops, n)
		}
	})
	listVars := []string{list}
	for i := 0; i < len(listVars); i++ {
		for _, s := range sets {
			if accesses(s.value, listVars[i], "") && !containsStr(listVars, s.targets[0]) {
				listVars = append(listVars, s.targets[0])
			}
		}
	}
	var itemVars []string
	for _, l := range loops {
		for _, v := range listVars {
			if len(l.targets) == 1 && accesses(l.iter, v, "") {
				itemVars = append(itemVars, l.targets[0])
				break
			}
		}
	}
	for _, l := range loops {
		for _, v := range itemVars {
			if accesses(l.iter, v, key) {
				return true
			}
		}
	}
	return false
}

// accesses reports whether e is the variable name (or name[key] / name.key
// when key is set), possibly under filters, tests or a slice.
func accesses(e expr, name, key string) bool {
	switch x := e.(type) {
	case *filterExpr:
		return x.obj != nil && accesses(x.obj, name, key)
	case *testExpr:
		return accesses(x.obj, name, key)
	case *getitemExpr:
		if _, ok := x.key.(*sliceExpr); ok {
			return accesses(x.obj, name, key)
		}
		if key == "" {
			return false
		}
		c, ok := x.key.(*constExpr)
		return ok && c.v == key && isName(x.obj, name)
	case *getattrExpr:
		return key != "" && x.attr == key && isName(x.obj, name)
	}
	return key == "" && isName(e, name)
}

func isName(e expr, name string) bool {
	n, ok := e.(*nameExpr)
	return ok && n.name == name
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// walk calls fn on every statement in body, depth first.
func walk(body []node, fn func(node)) {
	for _, n := range body {
		fn(n)
		switch n := n.(type) {
		case *ifNode:
			for _, b := range n.bodies {
				walk(b, fn)
			}
		case *forNode:
			walk(n.body, fn)
			walk(n.orElse, fn)
		case *setNode:
			walk(n.body, fn)
		case *macroNode:
			walk(n.body, fn)
		}
	}
}
