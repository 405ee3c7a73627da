package jinja

import (
	"fmt"
	"sort"
)

// Template values follow Python's data model, because chat templates are
// written against the objects transformers hands to Jinja2:
//
//	nil        None
//	bool       bool
//	int64      int (BigInt beyond 64 bits)
//	float64    float
//	string     str
//	[]any      list (immutable: the sandbox forbids mutation)
//	*Dict      dict, keeping insertion order as Python does
//	undefined  jinja2.Undefined
//	*namespace jinja2's namespace()
//	callable   macros, globals and bound methods

// Dict is an insertion-ordered string-keyed map, the shape of a Python dict
// decoded from JSON. Order matters: tojson and iteration follow it.
type Dict struct {
	keys []string
	m    map[string]any
}

// NewDict returns an empty Dict.
func NewDict() *Dict { return &Dict{m: map[string]any{}} }

// Set stores v under k; a new key goes last, an existing key keeps its place,
// as assignment to a Python dict does.
func (d *Dict) Set(k string, v any) {
	if _, ok := d.m[k]; !ok {
		d.keys = append(d.keys, k)
	}
	d.m[k] = v
}

// Get returns the value under k.
func (d *Dict) Get(k string) (any, bool) {
	if d == nil {
		return nil, false
	}
	v, ok := d.m[k]
	return v, ok
}

// Delete removes k, keeping the order of the rest.
func (d *Dict) Delete(k string) {
	if _, ok := d.m[k]; !ok {
		return
	}
	delete(d.m, k)
	for i, key := range d.keys {
		if key == k {
			d.keys = append(d.keys[:i:i], d.keys[i+1:]...)
			return
		}
	}
}

// Keys returns the keys in insertion order.
func (d *Dict) Keys() []string { return d.keys }

// Len is the number of keys.
func (d *Dict) Len() int { return len(d.keys) }

// sortedKeys returns the keys sorted as Python sorts str.
func (d *Dict) sortedKeys() []string {
	ks := append([]string(nil), d.keys...)
	sort.Strings(ks) // byte order of UTF-8 is code point order, Python's str order
	return ks
}

// BigInt is a JSON integer beyond 64 bits, kept as its digits: Python keeps
// it exact, and templates only print or dump such values.
type BigInt string

// undefined is jinja2.Undefined: falsy, prints as "", iterates as empty, and
// raises on arithmetic or attribute access.
type undefined struct{ name string }

// namespace is jinja2's namespace(): the one object a template may mutate.
type namespace struct{ attrs *Dict }

// callable is anything a template can call: globals, macros, bound methods.
type callable func(ev *evaluator, args []any, kwargs *Dict) (any, error)

// Truthy is Python's bool().
func Truthy(v any) bool {
	switch x := v.(type) {
	case nil, undefined:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	case float64:
		return x != 0
	case string:
		return x != ""
	case []any:
		return len(x) > 0
	case *Dict:
		return x.Len() > 0
	}
	return true
}

// typeName is Python's type(v).__name__, for error messages that match.
func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case int64, BigInt:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case []any:
		return "list"
	case *Dict:
		return "dict"
	case undefined:
		return "Undefined"
	case *namespace:
		return "Namespace"
	case callable:
		return "function"
	case *loopInfo:
		return "LoopContext"
	}
	return fmt.Sprintf("%T", v)
}
