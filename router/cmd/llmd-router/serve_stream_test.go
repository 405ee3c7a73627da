package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// tap sits between the router and one replica and records what the replica
// really sent, with the time each SSE event arrived from it, so the test can
// compare the router's output to the replica's own bytes.
type tap struct {
	srv *httptest.Server

	mu       sync.Mutex
	auth     []string
	body     []byte
	arrivals []time.Time
}

func newTap(t *testing.T, upstream string) *tap {
	tp := &tap{}
	tp.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, upstream+r.URL.RequestURI(), bytes.NewReader(body))
		req.Header = r.Header.Clone()
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		if r.URL.Path == "/metrics" {
			// The router's load scrapes pass through unrecorded.
			io.Copy(w, resp.Body)
			return
		}
		tp.mu.Lock()
		tp.auth = append(tp.auth, r.Header.Get("Authorization"))
		tp.body, tp.arrivals = nil, nil
		tp.mu.Unlock()
		buf := make([]byte, 64<<10)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				now := time.Now()
				tp.mu.Lock()
				tp.body = append(tp.body, buf[:n]...)
				for range bytes.Count(buf[:n], []byte("\n\n")) {
					tp.arrivals = append(tp.arrivals, now)
				}
				tp.mu.Unlock()
				w.Write(buf[:n])
				w.(http.Flusher).Flush()
			}
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(tp.srv.Close)
	return tp
}

// read returns the last response's body and event arrival times.
func (tp *tap) read() ([]byte, []time.Time, []string) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return bytes.Clone(tp.body), append([]time.Time(nil), tp.arrivals...), append([]string(nil), tp.auth...)
}

// readEvents reads an SSE body, noting when each event arrived.
func readEvents(t *testing.T, body io.Reader) ([]byte, []time.Time) {
	t.Helper()
	var all []byte
	var at []time.Time
	buf := make([]byte, 64<<10)
	for {
		n, err := body.Read(buf)
		if n > 0 {
			now := time.Now()
			all = append(all, buf[:n]...)
			for range bytes.Count(buf[:n], []byte("\n\n")) {
				at = append(at, now)
			}
		}
		if err == io.EOF {
			return all, at
		}
		if err != nil {
			t.Fatalf("reading stream: %v", err)
		}
	}
}

const simModelName = "Qwen/Qwen2.5-7B-Instruct" // both commands' default

// completion is a /v1/completions body with a token-id prompt.
func completion(t testing.TB, prompt []uint32, maxTokens int, stream bool) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"model": simModelName, "prompt": prompt, "max_tokens": maxTokens, "stream": stream})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func post(t *testing.T, url string, body []byte, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	return resp
}

// send posts body to url and reads the answer to its end: its status and
// headers stay readable on the returned response.
func send(t *testing.T, url string, body []byte) *http.Response {
	t.Helper()
	resp := post(t, url, body)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func tokens(n int, seed uint32) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = 1000 + (seed*7919+uint32(i)*104729)%50000
	}
	return out
}

// perRequest are the fields vLLM (and the simulator) make unique per
// request: the completion id and the creation time.
var perRequest = regexp.MustCompile(`"(id|created)":("[^"]*"|\d+)`)

// TestServeStreamsLikeTheReplica sends streamed and whole completions and a
// model list through the router process to one replica behind a recording
// tap. The client must get exactly the bytes the replica sent, each SSE
// event while the replica is still producing later ones (flushed chunk by
// chunk, not buffered), the Authorization header must reach the replica,
// X-Llmd-Pod must name it, and the body must match a direct request to the
// replica in everything but the per-request id and timestamp.
func TestServeStreamsLikeTheReplica(t *testing.T) {
	// Time scale 2: a decode step takes ~20 ms of wall time, so a 12-token
	// stream lasts ~0.25 s and buffering it would show.
	infos, _ := startReplicas(t, 1, "--time-scale", "2")
	// The twin serves the direct request: a replica's output depends on its
	// request counter, so the twin's first request answers like the
	// routed replica's first.
	twin, _ := startReplicas(t, 1, "--time-scale", "2")
	direct := twin[0].HTTP
	tp := newTap(t, infos[0].HTTP)
	infos[0].HTTP = tp.srv.URL
	r := startRouter(t, infos)

	body := completion(t, tokens(40, 1), 12, true)
	resp := post(t, r.url+"/v1/completions", body, "Authorization", "Bearer secret-key")
	got, clientAt := readEvents(t, resp.Body)
	resp.Body.Close()
	want, tapAt, auths := tp.read()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("X-Llmd-Pod") != "sim-0" {
		t.Fatalf("status %d, X-Llmd-Pod %q: %s", resp.StatusCode, resp.Header.Get("X-Llmd-Pod"), got)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("streamed body differs from the replica's:\nrouter:  %q\nreplica: %q", got, want)
	}
	if !bytes.HasSuffix(got, []byte("data: [DONE]\n\n")) || len(clientAt) != 13 {
		t.Fatalf("want 12 token events (the last with finish_reason) and [DONE], got %d events: %s", len(clientAt), got)
	}
	if len(auths) != 1 || auths[0] != "Bearer secret-key" {
		t.Errorf("Authorization at the replica: %q", auths)
	}
	// Chunk by chunk: the client had the first event before the replica
	// produced the last, and every event left the router promptly.
	if !clientAt[0].Before(tapAt[len(tapAt)-1]) {
		t.Errorf("first event reached the client at %v, after the replica's last at %v: the router buffered",
			clientAt[0].Sub(tapAt[0]), tapAt[len(tapAt)-1].Sub(tapAt[0]))
	}
	for i := range clientAt {
		if d := clientAt[i].Sub(tapAt[i]); d > 100*time.Millisecond {
			t.Errorf("event %d reached the client %v after the replica sent it", i, d)
		}
	}

	// The same request straight to a replica differs only in id and time.
	dresp := post(t, direct+"/v1/completions", body)
	dbody, _ := readEvents(t, dresp.Body)
	dresp.Body.Close()
	if a, b := perRequest.ReplaceAll(got, nil), perRequest.ReplaceAll(dbody, nil); !bytes.Equal(a, b) {
		t.Errorf("routed and direct streams differ beyond id/created:\nrouted: %s\ndirect: %s", a, b)
	}

	// Whole responses and other paths pass through byte for byte too.
	for _, c := range []struct {
		method, path string
		body         []byte
	}{
		{http.MethodPost, "/v1/completions", completion(t, tokens(40, 2), 5, false)},
		{http.MethodGet, "/v1/models", nil},
	} {
		req, _ := http.NewRequest(c.method, r.url+c.path, bytes.NewReader(c.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want, _, _ := tp.read()
		if resp.StatusCode != http.StatusOK || !bytes.Equal(got, want) || resp.Header.Get("X-Llmd-Pod") != "sim-0" {
			t.Errorf("%s %s: status %d pod %q\nrouter:  %s\nreplica: %s", c.method, c.path, resp.StatusCode,
				resp.Header.Get("X-Llmd-Pod"), got, want)
		}
		if c.path == "/v1/models" && !strings.Contains(string(got), simModelName) {
			t.Errorf("model list lacks %s: %s", simModelName, got)
		}
	}
}
