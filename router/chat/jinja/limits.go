package jinja

import "fmt"

// Bounds on what one template may make the engine do. A request's
// chat_template is untrusted input that the parser and the evaluator
// follow, so each is bounded here rather than by the stack or the heap: a
// stack overflow is fatal in Go. Breaking one is a LimitError inside a
// template error.
const (
	// MaxTemplateDepth bounds the nesting of a template's statements and
	// expressions; model templates nest under 10.
	MaxTemplateDepth = 128
	// MaxRenderBytes bounds any string a template builds, and the rendered
	// text: 64 MiB, four times the router's default body limit.
	MaxRenderBytes = 64 << 20
)

// LimitError is input that breaks one of a set of bounds: the engine's
// above, or a caller's own on what it feeds the engine.
type LimitError struct {
	// Limit names the bound, e.g. "MaxTemplateDepth".
	Limit string
	// Max is the bound's value.
	Max int
	// What says what exceeded it.
	What string
}

// Error names what exceeded which limit.
func (e *LimitError) Error() string {
	return fmt.Sprintf("%s exceeds the router's limit %s = %d", e.What, e.Limit, e.Max)
}

func overLimit(limit string, max int, format string, args ...any) error {
	return &LimitError{Limit: limit, Max: max, What: fmt.Sprintf(format, args...)}
}

// templateLimit is a template nested beyond MaxTemplateDepth: a template
// error (Python's jinja2 would fail to render it too) that still carries
// the LimitError.
func templateLimit(line int) error {
	return fmt.Errorf("%w: line %d: %w", ErrTemplate, line,
		overLimit("MaxTemplateDepth", MaxTemplateDepth, "template nesting"))
}

// checkRenderLen refuses a string of n bytes beyond MaxRenderBytes before
// the template builds it; callers wrap it as a template error at a line.
func checkRenderLen(n int) error {
	if n > MaxRenderBytes {
		return overLimit("MaxRenderBytes", MaxRenderBytes, "a rendered string of %d bytes", n)
	}
	return nil
}
