package proxy

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/discovery"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

func ms(n int) config.Duration { return config.Duration{Duration: time.Duration(n) * time.Millisecond} }

// Reliability group: sick pods leave the rotation, and no request that had
// not started streaming fails because of them.

// sickness is how a stand-in pod misbehaves on inference requests; its
// /metrics keeps answering, so discovery sees nothing wrong.
type sickness int

const (
	healthy     sickness = iota
	hang                 // accepts and reads, never answers
	storm5xx             // answers 500 to everything
	stallBefore          // sends the headers, then nothing
	stallMid             // sends the headers and one event, then nothing
)

// standin is a stand-in vLLM pod serving SSE completions, recording when
// each inference request arrived.
type standin struct {
	*httptest.Server
	mu   sync.Mutex
	hits []time.Time
}

func newStandin(t testing.TB, how sickness) *standin {
	p := &standin{}
	quit := make(chan struct{})
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if idleMetrics(w, r) {
			return
		}
		p.mu.Lock()
		p.hits = append(p.hits, time.Now())
		p.mu.Unlock()
		block := func() {
			select {
			case <-r.Context().Done():
			case <-quit:
			}
		}
		switch how {
		case hang:
			block()
			return
		case storm5xx:
			http.Error(w, "engine dead", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		if how == stallBefore {
			block()
			return
		}
		for i := range 3 {
			fmt.Fprintf(w, "data: {\"choices\":[{\"text\":\"t%d\"}]}\n\n", i)
			w.(http.Flusher).Flush()
			if how == stallMid {
				block()
				return
			}
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(func() { close(quit); p.Close() })
	return p
}

func (p *standin) hitTimes() []time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Time(nil), p.hits...)
}

// outcome is one client request's fate.
type outcome struct {
	status int
	bytes  int // body bytes received
	done   bool
	err    error
}

// load sends streaming completions to url at about rate per second for d,
// each read to its end, and returns every outcome.
func load(t testing.TB, url string, rate int, d time.Duration) []outcome {
	var mu sync.Mutex
	var out []outcome
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	end := time.After(d)
	for i := 0; ; i++ {
		select {
		case <-end:
			wg.Wait()
			return out
		case <-tick.C:
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := streamOnce(url, fmt.Sprintf(`{"model":"m","prompt":"request %d of the load","stream":true}`, i))
			mu.Lock()
			out = append(out, o)
			mu.Unlock()
		}()
	}
}

func streamOnce(url, body string) outcome {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions", strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return outcome{err: err}
	}
	defer resp.Body.Close()
	o := outcome{status: resp.StatusCode}
	rd := bufio.NewReader(resp.Body)
	for {
		line, err := rd.ReadString('\n')
		o.bytes += len(line)
		if strings.HasPrefix(line, "data: [DONE]") {
			o.done = true
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			o.err = err
			break
		}
	}
	return o
}

// TestSickPodsLeaveRotation runs a steady stream load against one sick pod
// among two healthy ones, for each sickness: the sick pod must get no
// request later than 2 s into the load (its breaker stays open: no probe
// falls within the test), and every request that failed must have started
// streaming first (only the mid-stream stall may fail any).
func TestSickPodsLeaveRotation(t *testing.T) {
	for _, c := range []struct {
		name string
		how  sickness
	}{{"hang after accepting", hang}, {"5xx storm", storm5xx}, {"stall before the first byte", stallBefore}, {"stall mid-stream", stallMid}} {
		t.Run(c.name, func(t *testing.T) {
			sick := newStandin(t, c.how)
			s, fleet := newServer(t, map[string]string{"a-sick": sick.URL, "b": newStandin(t, healthy).URL, "c": newStandin(t, healthy).URL},
				Config{Upstream: config.Upstream{ResponseHeaderTimeout: ms(300), StreamIdleTimeout: ms(300),
					Breaker: config.Breaker{Failures: 3, OpenFor: ms(60000)}}})
			front := httptest.NewServer(s)
			defer front.Close()
			// The scorers prefer pods with fresh load: start once all three
			// are scraped, or the sick one may never be chosen.
			waitUntil(t, "every pod scraped", func() bool {
				pods := fleet.Pods(nil)
				for _, p := range pods {
					if !p.Load.Fresh {
						return false
					}
				}
				return len(pods) == 3
			})
			start := time.Now()
			outs := load(t, front.URL, 40, 3*time.Second)
			hits := sick.hitTimes()
			if len(hits) == 0 {
				t.Fatal("the sick pod got no request: the test proves nothing")
			}
			if last := hits[len(hits)-1].Sub(start); last > 2*time.Second {
				t.Errorf("the sick pod still got a request %s into the load (%d in all)", last.Round(time.Millisecond), len(hits))
			}
			failed, beforeStreaming := 0, 0
			for _, o := range outs {
				if o.status == http.StatusOK && o.done {
					continue
				}
				failed++
				if o.bytes == 0 || o.status != http.StatusOK {
					beforeStreaming++
					t.Errorf("request failed before streaming: status %d, %d bytes, %v", o.status, o.bytes, o.err)
				}
			}
			if c.how != stallMid && failed > 0 {
				t.Errorf("%d of %d requests failed", failed, len(outs))
			}
			t.Logf("%d requests, %d to the sick pod, last at %s, %d failed mid-stream", len(outs), len(hits),
				hits[len(hits)-1].Sub(start).Round(time.Millisecond), failed-beforeStreaming)
		})
	}
}

// TestForwardedHeaders checks what crosses the router besides the body:
// X-Forwarded-For/-Proto/-Host are set, hop-by-hop headers (and those the
// client's Connection header names) are dropped both ways, and the pod's
// trailers reach the client.
func TestForwardedHeaders(t *testing.T) {
	got := make(chan http.Header, 1)
	pod := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		got <- r.Header.Clone()
		w.Header().Set("Trailer", "X-Checksum")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("Connection", "X-Pod-Private")
		w.Header().Set("X-Pod-Private", "1")
		_, _ = io.WriteString(w, `{"choices":[]}`)
		w.Header().Set("X-Checksum", "abc")
	}))
	defer pod.Close()
	s, _ := newServer(t, map[string]string{"a": pod.URL}, Config{})
	front := httptest.NewServer(s)
	defer front.Close()
	req, _ := http.NewRequest(http.MethodPost, front.URL+"/v1/completions", strings.NewReader(`{"model":"m","prompt":"hi"}`))
	req.Header.Set("X-Forwarded-For", "203.0.113.7")
	req.Header.Set("Connection", "X-Client-Private")
	req.Header.Set("X-Client-Private", "1")
	req.Header.Set("Proxy-Authorization", "Basic eA==")
	req.Header.Set("Authorization", "Bearer engine-key")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, answer)
	}
	var up http.Header
	select {
	case up = <-got:
	default:
		t.Fatal("the router answered 200 without the pod seeing the request")
	}
	for k, want := range map[string]string{"X-Forwarded-For": "203.0.113.7, 127.0.0.1", "X-Forwarded-Proto": "http",
		"X-Forwarded-Host": req.URL.Host, "Authorization": "Bearer engine-key", "X-Client-Private": "", "Proxy-Authorization": ""} {
		if v := up.Get(k); v != want {
			t.Errorf("upstream %s = %q, want %q", k, v, want)
		}
	}
	for k, want := range map[string]string{"Keep-Alive": "", "X-Pod-Private": "", PodHeader: "a"} {
		if v := resp.Header.Get(k); v != want {
			t.Errorf("response %s = %q, want %q", k, v, want)
		}
	}
	if v := resp.Trailer.Get("X-Checksum"); v != "abc" {
		t.Errorf("trailer X-Checksum = %q, want abc (trailers %v)", v, resp.Trailer)
	}
}

// TestHealthMetrics checks the health series: a pod that refuses
// connections has its circuit open after the first request it gets, and a
// pod never scraped is flagged stale while a scraped one is not.
func TestHealthMetrics(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	s, fleet := newServer(t, map[string]string{"b-dead": dead.URL}, Config{})
	col := collectors{discovery.Collector{Fleet: fleet}, Collector{Server: s}}
	if code := streamOnceHandler(s, `{"model":"m","prompt":"p","stream":true}`); code != http.StatusServiceUnavailable {
		t.Errorf("request to a dead fleet: status %d, want 503", code)
	}
	text := gather(t, col)
	for _, want := range []string{`llmd_router_pod_circuit{pod="b-dead",state="open"} 1`,
		`llmd_router_pod_load_stale{pod="b-dead"} 1`, `llmd_router_circuit_openings_total 1`} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s:\n%s", want, text)
		}
	}
	s, fleet = newServer(t, map[string]string{"a": newStandin(t, healthy).URL}, Config{})
	col = collectors{discovery.Collector{Fleet: fleet}, Collector{Server: s}}
	waitUntil(t, "a scraped", func() bool { return strings.Contains(gather(t, col), `llmd_router_pod_load_stale{pod="a"} 0`) })
	if text := gather(t, col); !strings.Contains(text, `llmd_router_pod_circuit{pod="a",state="closed"} 1`) {
		t.Errorf("healthy pod not closed:\n%s", text)
	}
}

func streamOnceHandler(s *Server, body string) int {
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/completions", strings.NewReader(body)))
	return rec.Code
}

// collectors are the collectors a test scrapes together.
type collectors []prometheus.Collector

// gather renders cs's series in the Prometheus text format.
func gather(t testing.TB, cs collectors) string {
	reg := prometheus.NewPedanticRegistry()
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			t.Fatal(err)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// waitUntil polls cond for up to 5 s: for state reached by background
// loops (scrapes), not for timing.
func waitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestInFlightFollowsRequests checks the router's own per-pod counts,
// which the in-flight, cost and load-bound scorers read: a request counts
// as in flight while its response streams, its uncached prompt tokens as
// pending until the pod's first byte, and every attempt's counts end with
// the attempt, a retried 5xx and a client that leaves included.
func TestInFlightFollowsRequests(t *testing.T) {
	for _, tc := range []struct {
		name    string
		how     sickness
		pending bool // the pod sent no body byte yet
	}{{"stalled before its first byte", stallBefore, true}, {"streaming", stallMid, false}} {
		t.Run(tc.name, func(t *testing.T) {
			slow, bad := newStandin(t, tc.how), newStandin(t, storm5xx)
			s, fleet := newServer(t, map[string]string{"slow": slow.URL, "bad": bad.URL}, Config{})
			front := httptest.NewServer(s)
			defer front.Close()
			load := func() map[string]scoring.Load {
				m := map[string]scoring.Load{}
				for _, p := range fleet.Pods(nil) {
					m[p.Name] = p.Load
				}
				return m
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// The router answers the client only with the pod's first body
			// bytes, so the client waits in a goroutine of its own.
			firstEvent := make(chan error, 1)
			go func() {
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, front.URL+"/v1/completions",
					strings.NewReader(`{"model":"m","prompt":"a stream that stalls","stream":true}`))
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					firstEvent <- err
					return
				}
				defer resp.Body.Close()
				line, err := bufio.NewReader(resp.Body).ReadString('\n')
				if err == nil && !strings.HasPrefix(line, "data: ") {
					err = fmt.Errorf("first line %q is no event", line)
				}
				firstEvent <- err
				<-ctx.Done()
			}()
			if tc.pending {
				waitUntil(t, "the request in flight on slow", func() bool { return load()["slow"].InFlight == 1 })
			} else if err := <-firstEvent; err != nil {
				t.Fatalf("first event: %v", err)
			}
			m := load()
			if m["slow"].InFlight != 1 || m["bad"].InFlight != 0 || m["bad"].PendingTokens != 0 ||
				(m["slow"].PendingTokens > 0) != tc.pending {
				t.Fatalf("while the response is open: %+v; want slow in flight, its tokens pending: %v", m, tc.pending)
			}
			cancel()
			waitUntil(t, "counts back to 0", func() bool {
				m := load()
				return m["slow"].InFlight == 0 && m["bad"].InFlight == 0 && m["slow"].PendingTokens == 0
			})
		})
	}
}
