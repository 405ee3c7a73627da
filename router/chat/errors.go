package chat

import (
	"errors"
	"fmt"
)

var (
	// ErrTemplate wraps every error raised while compiling or rendering a
	// chat template, including raise_exception(); vLLM answers these with 400.
	ErrTemplate = errors.New("chat template")
	// ErrInvalidRequest wraps a request vLLM itself would refuse.
	ErrInvalidRequest = errors.New("invalid request")
	// ErrUntokenizable wraps a request the router cannot tokenize the way the
	// engine will (multimodal parts, other endpoints, prompt embeddings). Such
	// requests are routed on load alone.
	ErrUntokenizable = errors.New("untokenizable request")
)

// UntokenizableError says why the router cannot tokenize a request; it
// matches ErrUntokenizable with errors.Is. Reason is a short fixed label
// fit for a metric.
type UntokenizableError struct{ Reason, Detail string }

// Error names the reason and the detail.
func (e *UntokenizableError) Error() string {
	return fmt.Sprintf("%v (%s): %s", ErrUntokenizable, e.Reason, e.Detail)
}

// Is makes errors.Is(err, ErrUntokenizable) true.
func (e *UntokenizableError) Is(target error) bool { return target == ErrUntokenizable }

func untokenizable(reason, format string, args ...any) error {
	return &UntokenizableError{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// templateError is an error raised by a template at a source line.
func templateError(line int, format string, args ...any) error {
	return fmt.Errorf("%w: line %d: %s", ErrTemplate, line, fmt.Sprintf(format, args...))
}
