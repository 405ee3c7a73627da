package vllmcontract

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/proxy"
)

// streamed is one streamed completion as its client saw it: when it was
// sent, and when each chunk arrived with the output tokens counted so far
// (the engine's continuous usage statistics, so a chunk whose text is
// still an incomplete character, or one carrying several tokens, counts
// right).
type streamed struct {
	Sent   time.Time
	Chunks []chunkAt
	// PromptTokens is the prompt's length as the engine counted it.
	PromptTokens int
}

// chunkAt is one streamed chunk: its arrival and the tokens so far.
type chunkAt struct {
	At     time.Time
	Tokens int
}

// ttft is the time to the first output token, in seconds.
func (s streamed) ttft() float64 { return s.Chunks[0].At.Sub(s.Sent).Seconds() }

// done is when the last output token arrived.
func (s streamed) done() time.Time { return s.Chunks[len(s.Chunks)-1].At }

// streamCompletion streams a completion of token-id prompt on engine url,
// generating exactly maxTokens tokens (ignore_eos, greedy).
func streamCompletion(url string, prompt []int, maxTokens int) (streamed, error) {
	return streamInClass(url, "", prompt, maxTokens)
}

// streamInClass is streamCompletion through a router, in the priority
// class named (the router's x-llmd-priority header; "" none).
func streamInClass(url, class string, prompt []int, maxTokens int) (streamed, error) {
	body, err := json.Marshal(map[string]any{"model": servedName, "prompt": prompt, "max_tokens": maxTokens,
		"temperature": 0, "ignore_eos": true, "stream": true,
		"stream_options": map[string]any{"include_usage": true, "continuous_usage_stats": true}})
	if err != nil {
		return streamed{}, err
	}
	req, err := http.NewRequest(http.MethodPost, url+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return streamed{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	if class != "" {
		req.Header.Set(proxy.PriorityHeader, class)
	}
	s := streamed{Sent: time.Now()}
	resp, err := client.Do(req)
	if err != nil {
		return s, fmt.Errorf("streaming a completion from %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s, fmt.Errorf("streaming a completion from %s: status %s", url, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		at := time.Now()
		var c struct {
			Usage *struct {
				PromptTokens     int `json:"prompt_tokens"`
				CompletionTokens int `json:"completion_tokens"`
			}
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			return s, fmt.Errorf("streamed chunk %q from %s: %w", data, url, err)
		}
		if c.Usage == nil || c.Usage.CompletionTokens == 0 {
			continue
		}
		s.PromptTokens = c.Usage.PromptTokens
		if n := len(s.Chunks); n == 0 || s.Chunks[n-1].Tokens < c.Usage.CompletionTokens {
			s.Chunks = append(s.Chunks, chunkAt{At: at, Tokens: c.Usage.CompletionTokens})
		}
	}
	if err := sc.Err(); err != nil {
		return s, fmt.Errorf("reading the stream from %s: %w", url, err)
	}
	if n := len(s.Chunks); n == 0 || s.Chunks[n-1].Tokens != maxTokens {
		return s, fmt.Errorf("stream from %s ended with %d chunks, not at %d tokens", url, n, maxTokens)
	}
	return s, nil
}
