package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// ErrorBody is vLLM's error body for code and msg, so OpenAI clients show
// the router's reason the way they show the engine's, whichever front (the
// HTTP proxy or the gateway's picker) answers.
func ErrorBody(code int, msg string) []byte {
	type detail struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Code    int    `json:"code"`
	}
	b, _ := json.Marshal(struct {
		Error detail `json:"error"`
	}{detail{Message: msg, Type: http.StatusText(code), Code: code}})
	return b
}

// writeError answers with vLLM's error body shape.
func writeError(w http.ResponseWriter, code int, msg string) {
	b := ErrorBody(code, msg)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", fmt.Sprint(len(b)))
	if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
		h.Set("Retry-After", RetryAfter)
	}
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// errBodyTooLarge is a request body over MaxBodyBytes.
var errBodyTooLarge = errors.New("request body too large")

// readBody reads the whole body, refusing more than limit bytes and a
// client slower than timeout. The deadline is per body and lifted after it:
// http.Server's ReadTimeout would also cut every stream that outlives it,
// because the server's background read fails and cancels the request.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, fmt.Errorf("%w: %d bytes, the limit is %d", errBodyTooLarge, r.ContentLength, limit)
	}
	rc := http.NewResponseController(w)
	timed := timeout > 0 && rc.SetReadDeadline(time.Now().Add(timeout)) == nil
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		// The deadline stays: after the handler the server discards the
		// rest of the body, which must not wait for the slow client again.
		return nil, fmt.Errorf("reading request body: %w", err)
	}
	if timed {
		_ = rc.SetReadDeadline(time.Time{})
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: over %d bytes", errBodyTooLarge, limit)
	}
	return b, nil
}

// bodyError answers a failed readBody: 413 for size, 408 for a client too
// slow for the read timeout, 400 otherwise.
func bodyError(w http.ResponseWriter, err error) {
	code := http.StatusBadRequest
	var ne interface{ Timeout() bool }
	switch {
	case errors.Is(err, errBodyTooLarge):
		code = http.StatusRequestEntityTooLarge
	case errors.As(err, &ne) && ne.Timeout():
		code = http.StatusRequestTimeout
	}
	writeError(w, code, err.Error())
}
