package canary

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/llmd-dev/terraform-provider-llmd/router/chat"
)

// ErrNoEndpoint means the engine serves neither /tokenize nor the render
// endpoint: the canary cannot compare and the engine path cannot serve.
var ErrNoEndpoint = errors.New("engine serves neither /tokenize nor a render endpoint")

// Engine asks one vLLM pod for the token ids of a request.
type Engine struct {
	// Client is the HTTP client; nil means http.DefaultClient.
	Client *http.Client
}

// errNotFound marks a 404, which sends the next try to another endpoint.
var errNotFound = errors.New("404 not found")

// Tokenize returns the ids the engine at baseURL computes for a parsed
// request, one list per prompt. It asks POST /tokenize, which takes the
// chat body as it is (same defaults as chat completions), and on a 404 the
// render endpoint of the request's path (/v1/chat/completions/render or
// /v1/completions/render), which vLLM >= 0.29 serves only with
// scale-out endpoints enabled.
func (e *Engine) Tokenize(ctx context.Context, baseURL string, req *chat.Request) ([][]uint32, error) {
	if req.Path == chat.PathChatCompletions {
		ids, err := e.tokenizeOne(ctx, baseURL, req.Path, req.Body())
		if err != nil {
			return nil, err
		}
		return [][]uint32{ids}, nil
	}
	// /tokenize takes one string prompt: split a batch into single requests.
	var body map[string]json.RawMessage
	if err := json.Unmarshal(req.Body(), &body); err != nil {
		return nil, fmt.Errorf("decoding completion body: %w", err)
	}
	var prompts []json.RawMessage
	if err := json.Unmarshal(body["prompt"], &prompts); err != nil || len(prompts) == 0 || !isBatch(prompts) {
		prompts = []json.RawMessage{body["prompt"]}
	}
	out := make([][]uint32, len(prompts))
	for i, p := range prompts {
		body["prompt"] = p
		one, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		if out[i], err = e.tokenizeOne(ctx, baseURL, req.Path, one); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// isBatch reports whether a prompt list is a batch (of strings or id
// lists) rather than one list of ids.
func isBatch(prompts []json.RawMessage) bool {
	first := bytes.TrimSpace(prompts[0])
	return len(first) > 0 && (first[0] == '"' || first[0] == '[')
}

func (e *Engine) tokenizeOne(ctx context.Context, baseURL, path string, body []byte) ([]uint32, error) {
	ids, err := e.post(ctx, baseURL+"/tokenize", body)
	if !errors.Is(err, errNotFound) {
		return ids, err
	}
	ids, err = e.post(ctx, baseURL+path+"/render", body)
	if errors.Is(err, errNotFound) {
		return nil, fmt.Errorf("%w at %s", ErrNoEndpoint, baseURL)
	}
	return ids, err
}

// tokenizeResponse holds the id lists of /tokenize ("tokens") and of the
// render endpoints (named differently across vLLM versions).
type tokenizeResponse struct {
	Tokens         []uint32 `json:"tokens"`
	PromptTokenIDs []uint32 `json:"prompt_token_ids"`
	TokenIDs       []uint32 `json:"token_ids"`
}

func (e *Engine) post(ctx context.Context, url string, body []byte) ([]uint32, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	client := e.Client
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("POST %s: %w", url, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", url, err)
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("POST %s: %w", url, errNotFound)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("POST %s: status %d: %.200s", url, resp.StatusCode, data)
	}
	var r tokenizeResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decoding %s response: %w", url, err)
	}
	switch {
	case r.Tokens != nil:
		return r.Tokens, nil
	case r.PromptTokenIDs != nil:
		return r.PromptTokenIDs, nil
	case r.TokenIDs != nil:
		return r.TokenIDs, nil
	}
	return nil, fmt.Errorf("%s answered no token ids", url)
}
