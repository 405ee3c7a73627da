// Package jinja is the router's Jinja2 engine: it compiles and renders chat
// templates as Python's jinja2 renders them in Hugging Face transformers'
// apply_chat_template, to the character, because a prompt that is off by
// one space gives the engine's prefix cache zero hits. Package chat feeds
// it the variables vLLM builds from a request.
//
// # What it mirrors
//
// Compile and Template.Render implement the subset of Jinja2 that chat
// templates use, with the semantics of transformers' environment:
// ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks and loop
// controls; transformers' tojson (json.dumps with ensure_ascii=False, no key
// sorting, indent, separators, sort_keys), raise_exception and
// strftime_now; its {% generation %} tag. The lexer follows Jinja2's
// whitespace rules to the character (line-break normalisation, the dropped
// final newline, "-" and "+" modifiers, lstrip of Unicode white space at line
// starts); values follow Python's data model (value.go: ordered dicts as
// Dict, int64 and BigInt ints, float64 floats, str() and repr() of None,
// bools, floats, lists and dicts, Undefined that prints empty and fails on
// attribute access). Supported: if/elif/else, for with else, loop filters,
// tuple targets and the loop variable, break/continue, set (names, tuples,
// namespace attributes, blocks), macros with defaults and keyword
// arguments, filter blocks, raw; namespace(), range, dict; slicing with
// steps; the filters, tests and str/dict/list methods listed in filters.go,
// tests.go and methods.go. Template.Reads is the analogue of
// jinja2.meta.find_undeclared_variables and Template.LoopsOverItemKey of
// the AST walk behind vLLM's content-format detection.
//
// # Limits
//
// A request's chat_template is untrusted input, so a rendering is bounded
// to 4M steps (statements, loop iterations, range items), nesting to
// MaxTemplateDepth and every string it builds to MaxRenderBytes; breaking
// the last two is a LimitError inside an ErrTemplate error. FuzzTemplate
// checks that no source panics and that every failure is an ErrTemplate.
// Known gaps, none used by the templates we serve: tuples are lists (so
// {{ (1, 2) }} prints [1, 2], not (1, 2)), recursive loops, call blocks,
// includes and imports, str % formatting and format specs in str.format.
//
// # Why not a library
//
// github.com/nikolalohinski/gonja/v2 v2.9.1 (the maintained Go Jinja on the
// module proxy) renders the plain Qwen3, Llama 3 and DeepSeek V3 templates
// right, but its tojson sorts keys, escapes <, & and ' as \u003c \u0026
// \u0027 and drops the spaces after "," and ":", and its Go-map values
// cannot keep a tool schema's key order; every Qwen3 request with tools
// would render differently from vLLM. github.com/ardanlabs/jinja v1.8.0 was
// evaluated against chat's parity suite and for speed
// (router/chat/ardanlabs_compare_test.go); BENCHMARKS.md has the figures
// and the decision.
//
// # Exactness (tests)
//
// TestTemplateFeatures renders every case of templateCases with jinja2
// (Debian's python3-jinja2 3.1.2 and the environment of testdata/hf_env.py)
// and requires the same text, or an error from both. Package chat's parity
// suite holds whole chat renderings to the same reference.
package jinja
