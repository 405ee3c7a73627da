package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestServeShutdownDrains starts 64 long streams, sends the router SIGTERM
// once each has produced its first event, and expects: new connections
// refused at once, every open stream finished whole (none cut: one
// completion id throughout, 40 token chunks, the last with finish_reason
// "length", the usage chunk counting 40 completion tokens, then [DONE]),
// then a clean exit.
func TestServeShutdownDrains(t *testing.T) {
	infos, _ := startReplicas(t, 2, "--time-scale", "2")
	r := startRouter(t, infos)
	const streams = 64
	firsts := make(chan struct{}, streams)
	type result struct {
		events, tokens, usageTokens int
		ids                         map[string]bool
		finish                      string
		done                        bool
		end                         time.Time
		err                         error
	}
	results := make([]result, streams)
	var wg sync.WaitGroup
	for i := range streams {
		wg.Go(func() {
			// 40 tokens at ~20 ms a step: ~0.8 s, most of it after SIGTERM.
			body, err := json.Marshal(map[string]any{"model": simModelName, "prompt": tokens(32, uint32(i)), "max_tokens": 40,
				"stream": true, "stream_options": map[string]any{"include_usage": true}})
			if err != nil {
				results[i].err = err
				firsts <- struct{}{}
				return
			}
			resp, err := http.Post(r.url+"/v1/completions", "application/json", bytes.NewReader(body))
			if err != nil {
				results[i].err = err
				firsts <- struct{}{}
				return
			}
			defer resp.Body.Close()
			res := &results[i]
			res.ids = map[string]bool{}
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				data, ok := strings.CutPrefix(sc.Text(), "data: ")
				if !ok {
					continue
				}
				if res.events++; res.events == 1 {
					firsts <- struct{}{}
				}
				if res.done = data == "[DONE]"; res.done {
					continue
				}
				var chunk struct {
					ID      string
					Choices []struct {
						Text         string
						FinishReason *string `json:"finish_reason"`
					}
					Usage *struct {
						CompletionTokens int `json:"completion_tokens"`
					}
				}
				if err := json.Unmarshal([]byte(data), &chunk); err != nil {
					res.err = fmt.Errorf("event %d: %v: %s", res.events, err, data)
					return
				}
				res.ids[chunk.ID] = true
				for _, c := range chunk.Choices {
					res.tokens++
					if c.FinishReason != nil {
						res.finish = *c.FinishReason
					}
				}
				if chunk.Usage != nil {
					res.usageTokens = chunk.Usage.CompletionTokens
				}
			}
			results[i].err, results[i].end = sc.Err(), time.Now()
		})
	}
	for range streams {
		<-firsts
	}
	if err := r.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The listener closes at once: poll until a dial is refused.
	addr := strings.TrimPrefix(r.url, "http://")
	deadline := time.Now().Add(3 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatal("router still accepts connections 3s after SIGTERM")
		}
		time.Sleep(20 * time.Millisecond)
	}
	refusedAt := time.Now()
	wg.Wait()
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		t.Fatal("router did not exit 10s after its streams finished")
	}
	if r.err != nil {
		t.Errorf("router exited with %v:\n%s", r.err, r.stderr.String())
	}
	for i, res := range results {
		if res.err != nil || !res.done || res.events != 42 || res.tokens != 40 || res.finish != "length" || res.usageTokens != 40 || len(res.ids) != 1 {
			t.Errorf("stream %d: %d events (want 42), %d token chunks (40), finish_reason %q (length), usage %d completion tokens (40), "+
				"%d completion ids (1), [DONE] %v, err %v", i, res.events, res.tokens, res.finish, res.usageTokens, len(res.ids), res.done, res.err)
		}
		if !res.end.After(refusedAt) {
			t.Errorf("stream %d ended before the listener closed: the test did not overlap the drain", i)
		}
	}
	if !strings.Contains(r.stderr.String(), "draining open requests") {
		t.Errorf("no drain log line:\n%s", r.stderr.String())
	}
}
