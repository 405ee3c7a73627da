package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"
)

// relay is the in-test fronts' path to a replica: a reverse proxy through
// rt that passes each response on as it arrives (every SSE chunk flushed),
// and that reads each request body whole before forwarding it.
//
// The whole read is what keeps a healthy stream whole. net/http's HTTP/1
// server drains and closes a request's body when the handler starts its
// response (chunkWriter.writeHeader, "We do this by default because..."),
// but http.Transport may still be reading that body: after copying
// ContentLength bytes it reads once more to check there are no more
// (transferWriter.writeBody), and when that read fails it closes the
// upstream connection (persistConn.writeLoop, requestBodyReadError). A
// replica sends a stream's headers as soon as it admits the request, so
// the proxy can start its response before the transport's last read;
// that read then gets "invalid Read on closed Body", the connection to the
// replica is torn down, and the proxy aborts a response whose headers and
// perhaps first tokens are already out (golang/go#40747). A body held in
// memory is never the server's to close.
func relay(upstream *url.URL, rt http.RoundTripper) http.Handler {
	rp := httputil.NewSingleHostReverseProxy(upstream)
	rp.FlushInterval = -1
	rp.Transport = rt
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, fmt.Sprintf("relay: reading request body: %v", err), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		rp.ServeHTTP(w, r)
	})
}

// lateProbe sends requests on through rt as http.Transport does, except
// that its last read of the request body, the check for bytes beyond
// ContentLength, comes only once the client has the response headers:
// the order a loaded machine may give Transport's write loop. A failed
// probe fails the response body, as Transport's closing the connection
// does.
type lateProbe struct {
	rt http.RoundTripper
	// headers is closed once the client has the response headers.
	headers <-chan struct{}
}

func (p lateProbe) RoundTrip(req *http.Request) (*http.Response, error) {
	b := make([]byte, req.ContentLength)
	if _, err := io.ReadFull(req.Body, b); err != nil {
		return nil, fmt.Errorf("reading request body: %w", err)
	}
	out := req.Clone(req.Context())
	out.Body = io.NopCloser(bytes.NewReader(b))
	resp, err := p.rt.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	resp.Body = &probedBody{ReadCloser: resp.Body, req: req.Body, headers: p.headers}
	return resp, nil
}

type probedBody struct {
	io.ReadCloser
	req     io.Reader
	headers <-chan struct{}
	probed  bool
}

func (b *probedBody) Read(p []byte) (int, error) {
	if !b.probed {
		b.probed = true
		<-b.headers
		if n, err := b.req.Read(make([]byte, 1)); n != 0 || err != io.EOF {
			return 0, fmt.Errorf("probing the request body past its ContentLength: %d bytes, %v", n, err)
		}
	}
	return b.ReadCloser.Read(p)
}

// TestRelayStreamSurvivesLateBodyProbe streams through relay with the
// transport's last body read made after the response headers reached the
// client: the stream must arrive whole. It broke with "unexpected EOF"
// (the fault suite's rare healthy stream broken mid-way) while relay
// passed the server's own request body to the transport.
func TestRelayStreamSurvivesLateBodyProbe(t *testing.T) {
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		http.NewResponseController(w).Flush()
		for i := range 3 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			http.NewResponseController(w).Flush()
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(engine.Close)
	u, err := url.Parse(engine.URL)
	if err != nil {
		t.Fatal(err)
	}
	headers := make(chan struct{})
	front := httptest.NewServer(relay(u, lateProbe{rt: http.DefaultTransport, headers: headers}))
	t.Cleanup(front.Close)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, front.URL+"/v1/completions",
		strings.NewReader(`{"prompt":[1,2,3],"max_tokens":3,"stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	close(headers)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", resp.StatusCode)
	}
	var events []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, data)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("stream broke after %q: %v", events, err)
	}
	if got := strings.Join(events, " "); got != "0 1 2 [DONE]" {
		t.Fatalf("events %q, want 0 1 2 [DONE]", got)
	}
}
