package proxy

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

func TestWorkMeterCountsTheLastMinute(t *testing.T) {
	var m workMeter
	t0 := time.Unix(10_000, 0)
	m.add(t0, 600)
	m.add(t0.Add(500*time.Millisecond), 600)
	m.add(t0.Add(30*time.Second), 1800)
	if got := m.rate(t0.Add(30 * time.Second)); got != 50 { // 3,000 tokens over 60 s
		t.Fatalf("rate = %d, want 50", got)
	}
	// At t0+60s the first second has left the window.
	if got := m.rate(t0.Add(60 * time.Second)); got != 30 {
		t.Fatalf("rate a minute on = %d, want 30 (the 1,800 of t0+30s)", got)
	}
	// A bucket reused a minute later forgets what it counted then.
	m.add(t0.Add(60*time.Second), 120)
	if got := m.rate(t0.Add(60 * time.Second)); got != 32 {
		t.Fatalf("rate = %d, want 32 ((1,800 + 120) / 60)", got)
	}
	if got := m.rate(t0.Add(10 * time.Minute)); got != 0 {
		t.Fatalf("rate ten minutes on = %d, want 0", got)
	}
}

func TestPlacedWorkBoundsTheOutput(t *testing.T) {
	for _, c := range []struct {
		req      scoring.Request
		uncached int
		want     int
	}{
		{scoring.Request{MaxOutputTokens: 256}, 300, 556},
		{scoring.Request{}, 300, 300 + workOutputBound},                                   // no bound stated
		{scoring.Request{MaxOutputTokens: 100_000}, 0, workOutputBound},                   // more than the bound
		{scoring.Request{MaxOutputTokens: 16, More: [][]uint32{{1}, {2}}}, 90, 90 + 3*16}, // a batch of three prompts
	} {
		if got := placedWork(&c.req, c.uncached); got != c.want {
			t.Errorf("placedWork(%+v, %d) = %d, want %d", c.req, c.uncached, got, c.want)
		}
	}
}

// TestServerWorkCountsPlacedRequests: each request the server places counts
// its uncached prompt tokens (here at most its prompt, the index knowing
// nothing yet) and its output bound in Work, and a request refused before
// its decision counts nothing.
func TestServerWorkCountsPlacedRequests(t *testing.T) {
	s, fleet := newServer(t, map[string]string{"a": okPod(t).URL}, Config{})
	waitUntil(t, "the pod scraped", func() bool {
		pods := fleet.Pods(nil)
		return len(pods) == 1 && pods[0].Load.Fresh
	})
	front := httptest.NewServer(s)
	defer front.Close()
	prompt := strings.Repeat("the lighthouse keeper counts the ships at night ", 8)
	post := func(path, body string) {
		t.Helper()
		resp, err := http.Post(front.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if got := s.Work(); got != 0 {
		t.Fatalf("Work before any request = %d", got)
	}
	post("/v1/completions", `{"model":"m","max_tokens":600,"prompt":"`+prompt+`"}`)
	post("/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"`+prompt+`"}]}`)
	post("/v1/completions", `{"model":"nobody","max_tokens":600,"prompt":"x"}`) // refused: no such model
	// Tokens are at most the prompt's bytes, and the chat template adds fewer than 64.
	low, high := 600+workOutputBound+2, 600+workOutputBound+2*len(prompt)+64
	if got := s.Work() * int64(WorkWindow/time.Second); got < int64(low)-60 || got > int64(high) {
		t.Fatalf("Work x 60 = %d, want within [%d, %d]", got, low, high)
	}
}

// BenchmarkWorkMeter is the work meter's cost per placed request, from
// concurrent deciders (BENCHMARKS.md, 2026-12-07).
func BenchmarkWorkMeter(b *testing.B) {
	var m workMeter
	now := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.add(now, 384)
		}
	})
}
