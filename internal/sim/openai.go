package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// prompt is an OpenAI "prompt": a string, or a list of token ids.
type prompt struct {
	text   string
	tokens []uint32
	isText bool
}

func (p *prompt) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &p.text); err == nil {
		p.isText = true
		return nil
	}
	if err := json.Unmarshal(b, &p.tokens); err != nil {
		return errors.New("prompt must be a string or a list of token ids")
	}
	return nil
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// genRequest is the part of /v1/completions and /v1/chat/completions
// bodies the simulator honours. Sampling parameters are accepted and
// ignored; the output always has max_tokens tokens (--ignore-eos).
type genRequest struct {
	Model               string         `json:"model"`
	Prompt              *prompt        `json:"prompt"`
	MaxTokens           *int           `json:"max_tokens"`
	MaxCompletionTokens *int           `json:"max_completion_tokens"`
	Stream              bool           `json:"stream"`
	StreamOptions       *streamOptions `json:"stream_options"`
	CacheSalt           *string        `json:"cache_salt"`
	// Priority is vLLM's priority (lower sooner; default 0), which only
	// --scheduling-policy priority reads: vLLM v0.32.0 takes it under FCFS
	// too and ignores it (its InputProcessor no longer refuses it).
	Priority int `json:"priority"`

	lora string // the adapter Model names, "" for the base model
}

// defaultMaxTokens is vLLM's default for /v1/completions (OpenAI's 16).
const defaultMaxTokens = 16

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// httpError is an error with the status and OpenAI error type to answer with.
type httpError struct {
	status int
	msg    string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, args ...any) error {
	return &httpError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// requestError gives an engine's verdict on a request its HTTP status: a
// refused request is the client's fault, a shutdown is not.
func requestError(err error) error {
	if errors.Is(err, errShutdown) {
		return &httpError{status: http.StatusServiceUnavailable, msg: err.Error()}
	}
	return &httpError{status: http.StatusBadRequest, msg: err.Error()}
}

func statusOf(err error) int {
	var he *httpError
	if errors.As(err, &he) {
		return he.status
	}
	return http.StatusInternalServerError
}

// errorBody is OpenAI's error shape.
func errorBody(err error) map[string]any {
	status := statusOf(err)
	typ := "BadRequestError"
	if status >= 500 {
		typ = "InternalServerError"
	}
	return map[string]any{"error": map[string]any{"message": err.Error(), "type": typ, "code": status}}
}

// writeError answers with err in OpenAI's error shape.
func writeError(w http.ResponseWriter, err error) {
	writeJSON(w, statusOf(err), errorBody(err))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// readBody reads a request body and decodes it into v; the raw bytes serve
// the chat renderer, which reads the body as vLLM does.
func readBody(r *http.Request, v any) ([]byte, error) {
	raw, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, 64<<20))
	if err != nil {
		return nil, badRequest("reading request body: %v", err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return nil, badRequest("decoding request body: %v", err)
	}
	return raw, nil
}

func (g *genRequest) maxTokens() (int, error) {
	n := defaultMaxTokens
	if g.MaxCompletionTokens != nil {
		n = *g.MaxCompletionTokens
	}
	if g.MaxTokens != nil {
		n = *g.MaxTokens
	}
	if n <= 0 {
		return 0, badRequest("max_tokens must be at least 1, got %d", n)
	}
	return n, nil
}

// completionID makes vLLM-shaped ids: cmpl-<n> and chatcmpl-<n>.
func completionID(prefix string, n uint64) string {
	return prefix + strconv.FormatUint(n, 10) + "-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
}
