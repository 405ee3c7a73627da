package tokenizer

import (
	"errors"
	"fmt"
)

// ErrUnsupported is wrapped by every load error caused by a tokenizer.json
// component this package does not implement. Failing at load time is the
// point: a component silently ignored would produce ids that differ from the
// engine's on some inputs, and the router would never notice.
var ErrUnsupported = errors.New("unsupported tokenizer component")

// ErrUntokenizable is wrapped by encode errors for text that Hugging Face's
// tokenizers cannot receive at all: invalid UTF-8, and lone UTF-16 surrogates
// in JSON (which Python keeps in its str and then fails to pass to Rust).
// Replacing them with U+FFFD would tokenize a different text than the engine
// rejects, so the caller must refuse the request or hand it to the engine.
var ErrUntokenizable = errors.New("untokenizable text")

func unsupported(kind, name string) error {
	return fmt.Errorf("%w: %s %q", ErrUnsupported, kind, name)
}
