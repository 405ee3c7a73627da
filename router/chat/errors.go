package chat

import (
	"errors"
	"fmt"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat/jinja"
)

var (
	// ErrTemplate wraps every error raised while compiling or rendering a
	// chat template, including raise_exception(); vLLM answers these with
	// 400. It is the template engine's jinja.ErrTemplate.
	ErrTemplate = jinja.ErrTemplate
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
