package vllmcontract

import (
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

// measured are the parts of an alert's expression a healthy system must
// return series for, so that the alert can fire when the system is not:
// a healthy system legitimately returns nothing for the condition itself.
//   - A comparison with a number (x > 0.95, x == 0) measures its other
//     side: that is the quantity the on-call reads.
//   - A comparison of two series (available < spec) filters one by the
//     other: both sides must exist.
//   - `a and b` fires only where both do, `a or b` where either does:
//     each side is measured on its own.
//   - `a unless b` fires where b is missing, which is the healthy case
//     for b: only a is measured.
//   - absent(x) fires when x is empty, so healthy means x returns a series:
//     x is queried as it is, its filter included.
//
// Anything else is measured whole.
func measured(e parser.Expr) []parser.Expr {
	switch n := e.(type) {
	case *parser.ParenExpr:
		return measured(n.Expr)
	case *parser.BinaryExpr:
		switch {
		case n.Op == parser.LAND || n.Op == parser.LOR:
			return append(measured(n.LHS), measured(n.RHS)...)
		case n.Op == parser.LUNLESS:
			return measured(n.LHS)
		case n.Op.IsComparisonOperator():
			switch {
			case isNumber(n.RHS):
				return []parser.Expr{unparen(n.LHS)}
			case isNumber(n.LHS):
				return []parser.Expr{unparen(n.RHS)}
			}
			return []parser.Expr{unparen(n.LHS), unparen(n.RHS)}
		}
	case *parser.Call:
		if n.Func.Name == "absent" && len(n.Args) == 1 {
			return []parser.Expr{unparen(n.Args[0])}
		}
	}
	return []parser.Expr{e}
}

func unparen(e parser.Expr) parser.Expr {
	for {
		p, ok := e.(*parser.ParenExpr)
		if !ok {
			return e
		}
		e = p.Expr
	}
}

func isNumber(e parser.Expr) bool {
	_, ok := unparen(e).(*parser.NumberLiteral)
	return ok
}

// selectors are the vector selectors of e, as PromQL prints them.
func selectors(e parser.Expr) []string {
	var out []string
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			out = append(out, vs.String())
		}
		return nil
	})
	return out
}

func TestMeasured(t *testing.T) {
	for expr, want := range map[string]string{
		`max by (pod) (x{a="1"}) > 0.95 and on (pod) max by (pod) (y) > 0`: `max by (pod) (x{a="1"}) | max by (pod) (y)`,
		`(a - b) > 0 and on (ns) (c == d)`:                                 `a - b | c | d`,
		`absent(up{service="r"} == 1)`:                                     `up{service="r"} == 1`,
		`a < b`:                                                            `a | b`,
		`0 == sum(a)`:                                                      `sum(a)`,
		`a unless b`:                                                       `a`,
		`rate(a[5m])`:                                                      `rate(a[5m])`,
	} {
		e, err := parser.ParseExpr(expr)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range measured(e) {
			got = append(got, m.String())
		}
		if strings.Join(got, " | ") != want {
			t.Errorf("measured(%s) = %q, want %q", expr, got, want)
		}
	}
}
