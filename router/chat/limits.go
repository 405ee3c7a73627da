package chat

import "fmt"

// Bounds on what one request may make the router do. A body is untrusted
// input that every recursive walk (the JSON reader, normalisation, the
// template's filters) and every allocation follows, so each is bounded here
// rather than by the stack or the heap: a stack overflow is fatal in Go and
// takes every open stream with it. Each bound sits far above what real
// clients send and far below what would hurt the router; breaking one is a
// LimitError, which the proxy answers with 400 naming the limit.
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
	// MaxTemplateDepth bounds the nesting of a chat template's statements
	// and expressions (a request's chat_template is untrusted input); model
	// templates nest under 10.
	MaxTemplateDepth = 128
	// MaxRenderBytes bounds any string a template builds, and the rendered
	// prompt: 64 MiB, four times the default body limit.
	MaxRenderBytes = 64 << 20
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

// LimitError is a request that breaks one of the bounds above. It matches
// ErrInvalidRequest with errors.Is: the router answers it with 400.
type LimitError struct {
	// Limit names the bound, e.g. "MaxJSONDepth".
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

// Is makes errors.Is(err, ErrInvalidRequest) true.
func (e *LimitError) Is(target error) bool { return target == ErrInvalidRequest }

func overLimit(limit string, max int, format string, args ...any) error {
	return &LimitError{Limit: limit, Max: max, What: fmt.Sprintf(format, args...)}
}

// templateLimit is a template nested beyond MaxTemplateDepth: a template
// error (the engine would fail to render it too) that the proxy still
// answers with 400, as a LimitError.
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
