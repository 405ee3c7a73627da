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

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
)

// client is the live load generator: MaxConcurrency workers, each one
// keep-alive connection's worth of sequential requests, sending streamed
// /v1/completions with token-id prompts, as `vllm bench serve` does with
// --max-concurrency and --ignore-eos.
type client struct {
	w     Workload
	work  sim.Workload
	model string
	// target returns the base URL request i goes to on connection conn.
	target func(conn, i int) string
	http   *http.Client
	// start is the wall time the run began; times are reported from it.
	start time.Time
	// arrivals[i] is request i's Poisson arrival offset (nil: all at once).
	arrivals []time.Duration

	next, done, failed, outTokens atomic.Int64
	mu                            sync.Mutex
	recs                          []Record
	firstErr                      error
}

func newClient(w Workload, work sim.Workload, model string, target func(conn, i int) string, timeScale float64) *client {
	c := &client{w: w, work: work, model: model, target: target,
		http: &http.Client{Transport: &http.Transport{MaxIdleConns: w.MaxConcurrency, MaxIdleConnsPerHost: w.MaxConcurrency,
			DisableCompression: true}}}
	if w.RequestRate > 0 {
		// Arrivals are drawn in simulated seconds, then scaled to wall time.
		rng := rand.New(rand.NewPCG(w.Seed, 0x61727276))
		t := 0.0
		c.arrivals = make([]time.Duration, work.Len())
		for i := range c.arrivals {
			c.arrivals[i] = time.Duration(t / timeScale * float64(time.Second))
			t += rng.ExpFloat64() / w.RequestRate
		}
	}
	return c
}

// run sends every request and returns when all have finished or ctx ends.
func (c *client) run(ctx context.Context) {
	c.start = time.Now()
	var wg sync.WaitGroup
	for conn := range c.w.MaxConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []uint32
			for ctx.Err() == nil {
				i := int(c.next.Add(1) - 1)
				if i >= c.work.Len() {
					return
				}
				if c.arrivals != nil {
					if d := time.Until(c.start.Add(c.arrivals[i])); d > 0 {
						select {
						case <-time.After(d):
						case <-ctx.Done():
							return
						}
					}
				}
				buf = c.work.Prompt(i, buf)
				c.one(ctx, c.target(conn, i), buf, c.work.OutputLen(i))
			}
		}()
	}
	wg.Wait()
}

// completionRequest is the body sent: token ids, exact output length.
type completionRequest struct {
	Model         string   `json:"model"`
	Prompt        []uint32 `json:"prompt"`
	MaxTokens     int      `json:"max_tokens"`
	IgnoreEOS     bool     `json:"ignore_eos"`
	Stream        bool     `json:"stream"`
	StreamOptions struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

// chunk is the part of a streamed completion chunk the client reads.
type chunk struct {
	Choices []struct {
		Text string `json:"text"`
	} `json:"choices"`
	Usage *struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// one sends request and records it, or counts it failed.
func (c *client) one(ctx context.Context, base string, prompt []uint32, outputLen int) {
	req := completionRequest{Model: c.model, Prompt: prompt, MaxTokens: outputLen, IgnoreEOS: true, Stream: true}
	req.StreamOptions.IncludeUsage = true
	body, err := json.Marshal(req)
	if err != nil {
		c.fail(fmt.Errorf("encoding a request: %w", err))
		return
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		c.fail(fmt.Errorf("building a request to %s: %w", base, err))
		return
	}
	hr.Header.Set("Content-Type", "application/json")
	sent := time.Now()
	resp, err := c.http.Do(hr)
	if err != nil {
		c.fail(fmt.Errorf("sending to %s: %w", base, err))
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		c.fail(fmt.Errorf("%s answered %s: %s", base, resp.Status, strings.TrimSpace(string(msg))))
		return
	}
	rec := Record{Sent: c.since(sent), PromptTokens: len(prompt), Streamed: true}
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
			return
		}
		if ch.Usage != nil {
			rec.OutputTokens = ch.Usage.CompletionTokens
		}
		if len(ch.Choices) == 0 || ch.Choices[0].Text == "" {
			continue
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
		return
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
				label, c.done.Load(), c.work.Len(), c.failed.Load(), el, el*timeScale,
				float64(c.outTokens.Load())/(el*timeScale))
		}
	}
}
