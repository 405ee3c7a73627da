package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServeLimits checks each documented refusal against the real router
// process: 413 for a body over the limit, 400 with the reason for malformed
// JSON, the per-pod in-flight cap, 503 with Retry-After when the queue is full and
// when the queue wait runs out, a queued request admitted when a slot frees, client
// cancellation reaching the replicas, and the header, body and idle
// timeouts.
func TestServeLimits(t *testing.T) {
	// Time scale 1: a 200-token stream lasts ~8 s, so slots stay taken.
	infos, _ := startReplicas(t, 2)
	r := startRouter(t, infos, "--max-body-bytes", "4096", "--max-in-flight-per-pod", "1", "--max-queue", "1",
		"--queue-timeout", "700ms", "--body-timeout", "300ms", "--read-header-timeout", "300ms", "--idle-timeout", "400ms")

	t.Run("413", func(t *testing.T) {
		resp := post(t, r.url+"/v1/completions", completion(t, tokens(1000, 1), 1, false))
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(string(b), "too large") {
			t.Errorf("status %d: %s", resp.StatusCode, b)
		}
	})
	t.Run("400", func(t *testing.T) {
		resp := post(t, r.url+"/v1/chat/completions", []byte(`{"model": "m", "messages": [`))
		var e struct{ Error struct{ Message string } }
		err := json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || err != nil || !strings.Contains(e.Error.Message, "JSON") {
			t.Errorf("status %d, error %q (%v)", resp.StatusCode, e.Error.Message, err)
		}
	})

	// Two long streams take both pods' only slot.
	ctx, cancelLong := context.WithCancel(context.Background())
	defer cancelLong()
	pods := map[string]bool{}
	for i := range 2 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, r.url+"/v1/completions",
			bytes.NewReader(completion(t, tokens(32, uint32(10+i)), 200, true)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		pods[resp.Header.Get("X-Llmd-Pod")] = true
	}
	if len(pods) != 2 {
		t.Fatalf("with a cap of 1 the two streams must be on two pods, got %v", pods)
	}

	short := completion(t, tokens(20, 3), 2, false)
	queued := make(chan int, 1)
	// queue sends short in the background, waits until the router queues
	// it, and delivers its status on queued (0 if it failed).
	queue := func() {
		go func() {
			resp, err := http.Post(r.url+"/v1/completions", "application/json", bytes.NewReader(short))
			if err != nil {
				queued <- 0
				return
			}
			resp.Body.Close()
			queued <- resp.StatusCode
		}()
		waitFor(t, "a queued request", func() bool { return r.gauge(t, "llmd_router_queued_requests") == 1 })
	}
	queuedAt := time.Now()
	queue()
	resp := post(t, r.url+"/v1/completions", short)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("queue full: status %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if code := <-queued; code != http.StatusServiceUnavailable || time.Since(queuedAt) < 600*time.Millisecond {
		t.Errorf("queue timeout: status %d after %v", code, time.Since(queuedAt))
	}
	if shed := r.gauge(t, "llmd_router_decisions_total", "outcome", "shed"); shed != 2 {
		t.Errorf("shed decisions %v, want 2", shed)
	}

	// A queued request gets the slot a cancelled stream frees; the
	// cancellation reaches the replicas, which stop decoding.
	queue()
	cancelLong()
	if code := <-queued; code != http.StatusOK {
		t.Errorf("queued request after a slot freed: status %d", code)
	}
	waitFor(t, "the replicas to drop the cancelled streams", func() bool {
		busy := 0.0
		for _, info := range infos {
			fams := metrics(t, info.HTTP+"/metrics")
			busy += sum(fams, "vllm:num_requests_running") + sum(fams, "vllm:num_requests_waiting")
		}
		return busy == 0
	})

	addr := strings.TrimPrefix(r.url, "http://")
	t.Run("header timeout", func(t *testing.T) {
		closedWithin(t, addr, "POST /v1/completions HTTP/1.1\r\nHost: x\r\n", "")
	})
	t.Run("body timeout", func(t *testing.T) {
		closedWithin(t, addr, "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"model\":", "HTTP/1.1 408")
	})
	t.Run("idle timeout", func(t *testing.T) {
		closedWithin(t, addr, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 200")
	})
}

// closedWithin writes send on a fresh connection and expects the router to
// answer with wantPrefix (if any) and then close the connection by itself
// within 2 s, well under the test's patience but far over the 300-400 ms
// timeouts configured.
func closedWithin(t *testing.T, addr, send, wantPrefix string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, send); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(2 * time.Second))
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("connection still open %v later (read %q): %v", time.Since(start), got, err)
	}
	if !strings.HasPrefix(string(got), wantPrefix) {
		t.Errorf("answer %q, want it to start with %q", got, wantPrefix)
	}
	if time.Since(start) < 250*time.Millisecond {
		t.Errorf("closed after %v, before the timeout", time.Since(start))
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
