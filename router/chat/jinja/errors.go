package jinja

import (
	"errors"
	"fmt"
)

// ErrTemplate wraps every error raised while compiling or rendering a
// template, including raise_exception() and the engine's limits.
var ErrTemplate = errors.New("chat template")

// templateError is an error raised by a template at a source line.
func templateError(line int, format string, args ...any) error {
	return fmt.Errorf("%w: line %d: %s", ErrTemplate, line, fmt.Sprintf(format, args...))
}
