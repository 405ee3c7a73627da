package chat

import (
	"errors"
	"fmt"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat/jinja"
)

// Bounds on what one request may make the router do. A body is untrusted
// input that every recursive walk (the JSON reader, normalisation) and
// every allocation follows, so each is bounded here rather than by the
// stack or the heap: a stack overflow is fatal in Go and takes every open
// stream with it. Each bound sits far above what real clients send and far
// below what would hurt the router; breaking one is a LimitError, which the
// proxy answers with 400 naming the limit. The template engine bounds
// templates itself (jinja.MaxTemplateDepth, jinja.MaxRenderBytes).
const (
	// MaxJSONDepth bounds the nesting of arrays and objects in a request
	// body (and in tool-call arguments). Chat bodies nest under 10 levels
	// and tool JSON schemas under 20; 128 levels keep the deepest walk
	// under a few hundred KB of stack.
	MaxJSONDepth = 128
	// MaxJSONValues bounds the values (scalars, arrays, objects) one body
	// decodes to: 2Mi, 16 times a 128k-token prompt sent as token ids,
	// caps the decoded tree near 64 MB however the 16 MiB body is shaped.
	MaxJSONValues = 2 << 20
	// MaxMessages bounds the messages of a chat request: long agent
	// sessions run to a few thousand.
	MaxMessages = 16384
	// MaxContentParts bounds the content parts of one message.
	MaxContentParts = 4096
	// MaxPrompts bounds the prompts of a /v1/completions batch.
	MaxPrompts = 4096
	// MaxPromptTokens bounds the token ids of one prompt given as ids: 1Mi,
	// eight times the longest context of common open models (128k).
	MaxPromptTokens = 1 << 20
	// MaxTokenizeBytes bounds the text the router tokenizes for one
	// request. Beyond it the request routes on load alone (reason
	// "prompt_too_long") rather than being refused, since the engine may
	// accept it: 1 MiB is some 250k tokens of prose, twice the longest
	// common context, while one unsplit 1 MiB piece (a run of letters or
	// of spaces) already costs the BPE 0.65-0.83 s and 60 MB
	// (BenchmarkEncodeLongWord, BENCHMARKS.md), growing faster than the
	// text beyond.
	MaxTokenizeBytes = 1 << 20
)

// LimitError is a request that breaks one of the bounds above, or one of
// the template engine's (jinja.MaxTemplateDepth, jinja.MaxRenderBytes). An
// error of this package that holds one matches ErrInvalidRequest with
// errors.Is: the router answers it with 400.
type LimitError = jinja.LimitError

// overLimit is a request past one of the bounds above.
func overLimit(limit string, max int, format string, args ...any) error {
	return invalidIfLimit(&LimitError{Limit: limit, Max: max, What: fmt.Sprintf(format, args...)})
}

// invalidIfLimit makes err, when it holds a LimitError (the request's or
// the engine's), match ErrInvalidRequest as well, keeping its text.
func invalidIfLimit(err error) error {
	var le *LimitError
	if errors.As(err, &le) {
		return invalidRequest{err}
	}
	return err
}

// invalidRequest is an error that also matches ErrInvalidRequest.
type invalidRequest struct{ error }

// Unwrap exposes the error and ErrInvalidRequest to errors.Is and errors.As.
func (e invalidRequest) Unwrap() []error { return []error{e.error, ErrInvalidRequest} }
