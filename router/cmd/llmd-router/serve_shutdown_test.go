package main

import (
	"bufio"
	"bytes"
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
// refused at once, every open stream finished to [DONE] (none cut), then a
// clean exit.
func TestServeShutdownDrains(t *testing.T) {
	infos, _ := startReplicas(t, 2, "--time-scale", "2")
	r := startRouter(t, infos)
	const streams = 64
	firsts := make(chan struct{}, streams)
	type result struct {
		events int
		done   bool
		end    time.Time
		err    error
	}
	results := make([]result, streams)
	var wg sync.WaitGroup
	for i := range streams {
		wg.Go(func() {
			// 40 tokens at ~20 ms a step: ~0.8 s, most of it after SIGTERM.
			resp, err := http.Post(r.url+"/v1/completions", "application/json", bytes.NewReader(completion(t, tokens(32, uint32(i)), 40, true)))
			if err != nil {
				results[i].err = err
				firsts <- struct{}{}
				return
			}
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if !strings.HasPrefix(sc.Text(), "data: ") {
					continue
				}
				if results[i].events++; results[i].events == 1 {
					firsts <- struct{}{}
				}
				results[i].done = sc.Text() == "data: [DONE]"
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
		if res.err != nil || !res.done || res.events != 41 {
			t.Errorf("stream %d: %d events, done %v, err %v", i, res.events, res.done, res.err)
		}
		if !res.end.After(refusedAt) {
			t.Errorf("stream %d ended before the listener closed: the test did not overlap the drain", i)
		}
	}
	if !strings.Contains(r.stderr.String(), "draining open requests") {
		t.Errorf("no drain log line:\n%s", r.stderr.String())
	}
}
