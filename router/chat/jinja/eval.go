package jinja

import (
	"errors"
	"strings"
)

// frame is one variable scope. Jinja2 gives each loop iteration and each
// macro call its own scope, so a {% set %} there does not leak out; that is
// why templates carry state across iterations in a namespace().
type frame struct {
	vars   map[string]any
	parent *frame
}

func (f *frame) lookup(name string) (any, bool) {
	for ; f != nil; f = f.parent {
		if v, ok := f.vars[name]; ok {
			return v, true
		}
	}
	return nil, false
}

func newFrame(parent *frame) *frame { return &frame{vars: map[string]any{}, parent: parent} }

// evaluator renders one template call.
type evaluator struct {
	depth int // macro recursion guard
	steps int // statements run, bounded by maxSteps
}

// flow signals break and continue out of nested statements.
type flow int

const (
	flowNormal flow = iota
	flowBreak
	flowContinue
)

const maxMacroDepth = 100

// maxSteps bounds the statements one rendering may run. A template sent in
// a request is untrusted input; chat templates run a few
// thousand statements even for long conversations.
const maxSteps = 1 << 22

// spend counts n steps (statements, loop iterations, range items) against
// maxSteps.
func (ev *evaluator) spend(n int) error {
	if ev.steps += n; ev.steps > maxSteps {
		return templateError(0, "template ran more than %d steps", maxSteps)
	}
	return nil
}

func (ev *evaluator) run(body []node, f *frame, out *strings.Builder) (flow, error) {
	for _, n := range body {
		fl, err := ev.stmt(n, f, out)
		if err != nil || fl != flowNormal {
			return fl, err
		}
	}
	return flowNormal, nil
}

func (ev *evaluator) stmt(n node, f *frame, out *strings.Builder) (flow, error) {
	if err := ev.spend(1); err != nil {
		return flowNormal, err
	}
	switch n := n.(type) {
	case *dataNode:
		out.WriteString(n.text)
	case *outputNode:
		if err := ev.output(n.expr, f, out); err != nil {
			return flowNormal, err
		}
		if err := checkRenderLen(out.Len()); err != nil {
			return flowNormal, wrapAt(0, err)
		}
	case *ifNode:
		for i, c := range n.conds {
			v, err := ev.eval(c, f)
			if err != nil {
				return flowNormal, err
			}
			if Truthy(v) {
				return ev.run(n.bodies[i], f, out)
			}
		}
		if len(n.bodies) > len(n.conds) {
			return ev.run(n.bodies[len(n.conds)], f, out)
		}
	case *forNode:
		return flowNormal, ev.forLoop(n, f, out)
	case *setNode:
		return flowNormal, ev.set(n, f)
	case *macroNode:
		f.vars[n.name] = ev.macro(n, f)
	case *breakNode:
		return flowBreak, nil
	case *continueNode:
		return flowContinue, nil
	}
	return flowNormal, nil
}

func (ev *evaluator) set(n *setNode, f *frame) error {
	var v any
	if n.body != nil {
		var b strings.Builder
		if _, err := ev.run(n.body, f, &b); err != nil {
			return err
		}
		v = b.String()
	} else {
		var err error
		if v, err = ev.eval(n.value, f); err != nil {
			return err
		}
	}
	if n.attr != "" {
		target, _ := f.lookup(n.targets[0])
		ns, ok := target.(*namespace)
		if !ok {
			return templateError(n.line, "cannot assign attribute on non-namespace object")
		}
		ns.attrs.Set(n.attr, v)
		return nil
	}
	if len(n.targets) == 1 {
		f.vars[n.targets[0]] = v
		return nil
	}
	items, err := unpack(v, len(n.targets), n.line)
	if err != nil {
		return err
	}
	for i, t := range n.targets {
		f.vars[t] = items[i]
	}
	return nil
}

func unpack(v any, n, line int) ([]any, error) {
	items, err := iterate(v, line)
	if err != nil {
		return nil, err
	}
	if len(items) != n {
		return nil, templateError(line, "ValueError: expected %d values to unpack, got %d", n, len(items))
	}
	return items, nil
}

// output prints the value of an expression; a chain of strings joined by
// "+" goes to out piece by piece, not joined first.
func (ev *evaluator) output(e expr, f *frame, out *strings.Builder) error {
	var v any
	var err error
	if b, ok := e.(*binExpr); ok && b.op == "+" {
		var written bool
		if v, written, err = ev.plusInto(b, f, out); written {
			return nil
		}
	} else {
		v, err = ev.eval(e, f)
	}
	if err != nil {
		return err
	}
	out.WriteString(Str(v))
	return nil
}

func (ev *evaluator) forLoop(n *forNode, f *frame, out *strings.Builder) error {
	seq, err := ev.eval(n.iter, f)
	if err != nil {
		return err
	}
	items, err := iterate(seq, n.line)
	if err != nil {
		return err
	}
	if err := ev.spend(len(items)); err != nil {
		return err
	}
	if n.filter != nil {
		kept := items[:0:0]
		for _, it := range items {
			inner := newFrame(f)
			if err := bindTargets(inner, n.targets, it, n.line); err != nil {
				return err
			}
			v, err := ev.eval(n.filter, inner)
			if err != nil {
				return err
			}
			if Truthy(v) {
				kept = append(kept, it)
			}
		}
		items = kept
	}
	if len(items) == 0 {
		_, err := ev.run(n.orElse, f, out)
		return err
	}
	if err := ev.spend(len(items)); err != nil {
		return err
	}
	for i, it := range items {
		inner := newFrame(f)
		if err := bindTargets(inner, n.targets, it, n.line); err != nil {
			return err
		}
		inner.vars["loop"] = loopObject(items, i)
		fl, err := ev.run(n.body, inner, out)
		if err != nil {
			return err
		}
		if fl == flowBreak {
			break
		}
	}
	return nil
}

func bindTargets(f *frame, targets []string, item any, line int) error {
	if len(targets) == 1 {
		f.vars[targets[0]] = item
		return nil
	}
	vals, err := unpack(item, len(targets), line)
	if err != nil {
		return err
	}
	for i, t := range targets {
		f.vars[t] = vals[i]
	}
	return nil
}

// loopInfo is Jinja2's loop variable for iteration i, resolved lazily by
// attribute: building a dict per iteration cost more than the loop body.
type loopInfo struct {
	items []any
	i     int
}

func loopObject(items []any, i int) *loopInfo { return &loopInfo{items, i} }

// attr returns loop.name.
func (l *loopInfo) attr(name string) any {
	n, i := len(l.items), l.i
	switch name {
	case "index":
		return int64(i + 1)
	case "index0":
		return int64(i)
	case "revindex":
		return int64(n - i)
	case "revindex0":
		return int64(n - i - 1)
	case "first":
		return i == 0
	case "last":
		return i == n-1
	case "length":
		return int64(n)
	case "depth":
		return int64(1)
	case "depth0":
		return int64(0)
	case "previtem":
		if i > 0 {
			return l.items[i-1]
		}
	case "nextitem":
		if i < n-1 {
			return l.items[i+1]
		}
	case "cycle":
		return callable(func(_ *evaluator, args []any, _ *Dict) (any, error) {
			if len(args) == 0 {
				return nil, errors.New("TypeError: no items for cycling given")
			}
			return args[i%len(args)], nil
		})
	}
	return undefined{name}
}

// macro makes a callable from a macro definition, closing over its scope.
func (ev *evaluator) macro(n *macroNode, defined *frame) callable {
	return func(ev *evaluator, args []any, kwargs *Dict) (any, error) {
		if ev.depth >= maxMacroDepth {
			return nil, templateError(0, "macro %s recursed too deeply", n.name)
		}
		ev.depth++
		defer func() { ev.depth-- }()
		f := newFrame(defined)
		if len(args) > len(n.params) {
			return nil, templateError(0, "macro %s takes not more than %d arguments", n.name, len(n.params))
		}
		firstDefault := len(n.params) - len(n.defaults)
		for i, p := range n.params {
			switch v, ok := kwargs.Get(p); {
			case i < len(args):
				f.vars[p] = args[i]
			case ok:
				f.vars[p] = v
			case i >= firstDefault:
				d, err := ev.eval(n.defaults[i-firstDefault], f)
				if err != nil {
					return nil, err
				}
				f.vars[p] = d
			default:
				f.vars[p] = undefined{p}
			}
		}
		var b strings.Builder
		if _, err := ev.run(n.body, f, &b); err != nil {
			return nil, err
		}
		return b.String(), nil
	}
}
