package jinja

// Statement nodes.
type (
	node any

	dataNode   struct{ text string }
	outputNode struct{ expr expr }
	ifNode     struct {
		conds  []expr
		bodies [][]node // one per cond, then the else body if any
	}
	forNode struct {
		targets []string
		iter    expr
		filter  expr
		body    []node
		orElse  []node
		line    int
	}
	setNode struct {
		targets []string // one name, or several for tuple unpacking
		attr    string   // set ns.attr = ...: targets[0] is ns
		value   expr
		body    []node // block set: {% set x %}...{% endset %}
		line    int
	}
	macroNode struct {
		name     string
		params   []string
		defaults []expr // aligned to the end of params
		body     []node
	}
	breakNode    struct{}
	continueNode struct{}
)

// Expression nodes.
type (
	expr any

	constExpr struct{ v any }
	nameExpr  struct {
		name string
		line int
	}
	getattrExpr struct {
		obj  expr
		attr string
		line int
	}
	getitemExpr struct {
		obj, key expr
		line     int
	}
	sliceExpr struct{ start, stop, step expr }
	callExpr  struct {
		fn     expr
		args   []expr
		kwargs []kwarg
		line   int
	}
	filterExpr struct {
		obj    expr // nil inside a {% filter %} block
		name   string
		args   []expr
		kwargs []kwarg
		line   int
	}
	testExpr struct {
		obj    expr
		name   string
		args   []expr
		negate bool
		line   int
	}
	binExpr struct {
		op   string
		l, r expr
		line int
	}
	unaryExpr struct {
		op   string // "-", "+", "not"
		x    expr
		line int
	}
	compareExpr struct {
		first expr
		ops   []string // ==, !=, <, <=, >, >=, in, notin
		rest  []expr
		line  int
	}
	condExpr struct{ cond, yes, no expr } // no may be nil
	listExpr struct{ items []expr }
	dictExpr struct{ keys, values []expr }
	kwarg    struct {
		name  string
		value expr
	}
)
