package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// client is the live load generator: MaxConcurrency workers, each one
// keep-alive connection's worth of sequential requests, sending streamed
// completions (or chat completions) as `vllm bench serve` does with
// --max-concurrency and --ignore-eos.
type client struct {
	w     Workload
	reqs  requests
	model string
	// apiKey, when set, goes with every request as a bearer token.
	apiKey string
	// target returns the base URL request i goes to on connection conn.
	target func(conn, i int) string
	http   *http.Client
	// start is the wall time the run began; times are reported from it.
	start time.Time

	done, failed, outTokens atomic.Int64
	mu                      sync.Mutex
	recs                    []Record
	firstErr                error
}

func newClient(w Workload, reqs requests, model string, target func(conn, i int) string) *client {
	return &client{w: w, reqs: reqs, model: model, target: target,
		http: &http.Client{Transport: &http.Transport{MaxIdleConns: w.MaxConcurrency, MaxIdleConnsPerHost: w.MaxConcurrency,
			DisableCompression: true}}}
}

// arrivalOffsets draws n Poisson arrival offsets at the workload's rate,
// in simulated seconds scaled to wall time; nil at rate inf.
func arrivalOffsets(w Workload, n int, timeScale float64) []time.Duration {
	if w.RequestRate <= 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(w.Seed, 0x61727276))
	t := 0.0
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(t / timeScale * float64(time.Second))
		t += rng.ExpFloat64() / w.RequestRate
	}
	return out
}

// run sends every request and returns when all have finished or ctx ends.
func (c *client) run(ctx context.Context) {
	var wg sync.WaitGroup
	for conn := range c.w.MaxConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i, ok := c.reqs.take(ctx)
				if !ok {
					return
				}
				reply, ok := c.one(ctx, c.target(conn, i), i)
				c.reqs.finished(i, reply, ok)
			}
		}()
	}
	wg.Wait()
}

// chunk is the part of a streamed (chat) completion chunk the client reads.
type chunk struct {
	Choices []struct {
		Text  string `json:"text"`
		Delta struct {
			Content string `json:"content"`
		} `json:"delta"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// one sends request i to base and records it, or counts it failed; it
// returns the reply's text when the requests want it.
func (c *client) one(ctx context.Context, base string, i int) (string, bool) {
	path, body, err := c.reqs.body(i, c.model)
	if err != nil {
		c.fail(err)
		return "", false
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(body))
	if err != nil {
		c.fail(fmt.Errorf("building a request to %s: %w", base, err))
		return "", false
	}
	hr.Header.Set("Content-Type", "application/json")
	if c.apiKey != "" {
		hr.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	sent := time.Now()
	resp, err := c.http.Do(hr)
	if err != nil {
		c.fail(fmt.Errorf("sending to %s: %w", base, err))
		return "", false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		c.fail(fmt.Errorf("%s answered %s: %s", base, resp.Status, strings.TrimSpace(string(msg))))
		return "", false
	}
	rec := Record{Sent: c.since(sent), Streamed: true}
	var reply strings.Builder
	chunks := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok || bytes.Equal(data, []byte("[DONE]")) {
			continue
		}
		var ch chunk
		if err := json.Unmarshal(data, &ch); err != nil {
			c.fail(fmt.Errorf("decoding a chunk from %s: %w", base, err))
			return "", false
		}
		if ch.Usage != nil {
			rec.PromptTokens, rec.OutputTokens = ch.Usage.PromptTokens, ch.Usage.CompletionTokens
		}
		if len(ch.Choices) == 0 {
			continue
		}
		text := ch.Choices[0].Text + ch.Choices[0].Delta.Content
		if text == "" {
			continue
		}
		if c.reqs.wantsReply() {
			reply.WriteString(text)
		}
		now := c.since(time.Now())
		if chunks == 0 {
			rec.FirstToken = now
		} else {
			rec.Tokens = append(rec.Tokens, now)
		}
		chunks++
	}
	if err := sc.Err(); err != nil || chunks == 0 {
		c.fail(fmt.Errorf("reading the stream from %s: %d chunks, %v", base, chunks, err))
		return "", false
	}
	if rec.OutputTokens == 0 {
		rec.OutputTokens = chunks
	}
	rec.Done = c.since(time.Now())
	c.outTokens.Add(int64(rec.OutputTokens))
	c.done.Add(1)
	c.mu.Lock()
	c.recs = append(c.recs, rec)
	c.mu.Unlock()
	return reply.String(), true
}

func (c *client) since(t time.Time) float64 { return t.Sub(c.start).Seconds() }

func (c *client) fail(err error) {
	c.failed.Add(1)
	c.mu.Lock()
	if c.firstErr == nil {
		c.firstErr = err
	}
	c.mu.Unlock()
}

// progress prints a one-line status to w every interval until ctx ends,
// then ends the line.
func (c *client) progress(ctx context.Context, w io.Writer, label string, timeScale float64, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(w)
			return
		case <-t.C:
			el := time.Since(c.start).Seconds()
			fmt.Fprintf(w, "\r%-8s %5d/%d done, %d failed, %6.1f s wall (%7.1f s simulated), %6.0f output tok/s simulated   ",
				label, c.done.Load(), c.reqs.Len(), c.failed.Load(), el, el*timeScale,
				float64(c.outTokens.Load())/(el*timeScale))
		}
	}
}
