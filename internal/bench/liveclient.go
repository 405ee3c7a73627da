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

	"github.com/llmd-dev/terraform-provider-llmd/router/proxy"
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
	// classes is request i's priority class at index i (nil: none named).
	classes []string

	done, shed, failed, outTokens atomic.Int64
	mu                            sync.Mutex
	recs                          []Record
	tallies                       map[string]*tally // by class
	firstErr                      error
}

func newClient(w Workload, reqs requests, model string, target func(conn, i int) string) *client {
	return &client{w: w, reqs: reqs, model: model, target: target, tallies: map[string]*tally{},
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

// one sends request i to base and records how it ended; it returns the
// reply's text, and whether it was served, when the requests want it.
func (c *client) one(ctx context.Context, base string, i int) (string, bool) {
	path, body, err := c.reqs.body(i, c.model)
	if err != nil {
		return c.end(i, outFailed, false, err)
	}
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(body))
	if err != nil {
		return c.end(i, outFailed, false, fmt.Errorf("building a request to %s: %w", base, err))
	}
	hr.Header.Set("Content-Type", "application/json")
	if c.apiKey != "" {
		hr.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	if class := c.class(i); class != "" {
		hr.Header.Set(proxy.PriorityHeader, class)
	}
	sent := time.Now()
	resp, err := c.http.Do(hr)
	if err != nil {
		return c.end(i, outLost, false, fmt.Errorf("sending to %s: %w", base, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		o := outcomeOf(resp.StatusCode)
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		if o.shed() {
			err = nil // admission's answer, not a failure
		} else {
			err = fmt.Errorf("%s answered %s: %s", base, resp.Status, strings.TrimSpace(string(msg)))
		}
		return c.end(i, o, resp.Header.Get("Retry-After") != "", err)
	}
	rec := Record{Sent: c.since(sent), Streamed: true, Class: c.class(i)}
	reply, o, err := c.stream(resp.Body, base, &rec)
	if o != outServed {
		return c.end(i, o, false, err)
	}
	rec.Done = c.since(time.Now())
	c.outTokens.Add(int64(rec.OutputTokens))
	c.mu.Lock()
	c.recs = append(c.recs, rec)
	c.mu.Unlock()
	c.end(i, outServed, false, nil)
	return reply, true
}

// stream reads a streamed answer from base into rec (first-token and token
// times, token counts), returning the reply's text when the requests want
// it; an outcome other than outServed says why it was not served.
func (c *client) stream(body io.Reader, base string, rec *Record) (string, outcome, error) {
	var reply strings.Builder
	chunks := 0
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok || bytes.Equal(data, []byte("[DONE]")) {
			continue
		}
		var ch chunk
		if err := json.Unmarshal(data, &ch); err != nil {
			return "", outFailed, fmt.Errorf("decoding a chunk from %s: %w", base, err)
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
		return "", outLost, fmt.Errorf("reading the stream from %s: %d chunks, %v", base, chunks, err)
	}
	if rec.OutputTokens == 0 {
		rec.OutputTokens = chunks
	}
	return reply.String(), outServed, nil
}

func (c *client) since(t time.Time) float64 { return t.Sub(c.start).Seconds() }

// class is request i's priority class, "" for none.
func (c *client) class(i int) string {
	if c.classes == nil {
		return ""
	}
	return c.classes[i]
}

// end counts request i's outcome o (retryAfter: its answer carried
// Retry-After) and keeps the run's first error; it returns what one
// returns for a request not served.
func (c *client) end(i int, o outcome, retryAfter bool, err error) (string, bool) {
	switch {
	case o == outServed:
		c.done.Add(1)
	case o.shed():
		c.shed.Add(1)
	default:
		c.failed.Add(1)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t := c.tallies[c.class(i)]
	if t == nil {
		t = &tally{}
		c.tallies[c.class(i)] = t
	}
	t.add(o, retryAfter)
	if err != nil && c.firstErr == nil {
		c.firstErr = err
	}
	return "", false
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
			fmt.Fprintf(w, "\r%-8s %5d/%d done, %d shed, %d failed, %6.1f s wall (%7.1f s simulated), %6.0f output tok/s simulated   ",
				label, c.done.Load(), c.reqs.Len(), c.shed.Load(), c.failed.Load(), el, el*timeScale,
				float64(c.outTokens.Load())/(el*timeScale))
		}
	}
}
