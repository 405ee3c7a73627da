package proxy

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/config"
)

// wedgedPod is a stand-in for a pod whose API server accepts connections
// and never answers, /metrics included (a stuck collective blocks the
// whole process); it counts the inference requests it swallowed.
func wedgedPod(t testing.TB) (*httptest.Server, *atomic.Int64) {
	var hits atomic.Int64
	quit := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			hits.Add(1)
		}
		select {
		case <-r.Context().Done():
		case <-quit:
		}
	}))
	t.Cleanup(func() { close(quit); srv.Close() })
	return srv, &hits
}

// fastEjection scrapes every 20 ms with a 100 ms timeout and ejects after
// three failures, so a wedged pod is out about 300 ms after it stopped.
var fastEjection = config.Metrics{Interval: ms(20), StaleAfter: ms(1000), Timeout: ms(100), EjectAfterFailures: 3, FrozenAfter: ms(1000)}

// TestWaitingRequestsMoveOffAWedgedPod sends streaming and non-streaming
// requests at once to a wedged pod and a healthy one. The requests the
// wedged pod swallowed have sent nothing to their clients, so when
// discovery declares the pod out they are re-sent to the healthy pod:
// every request answers 200, long before any router timeout (the
// header timeout is 30 s, a non-streaming request's only bound the
// 30-minute request timeout).
func TestWaitingRequestsMoveOffAWedgedPod(t *testing.T) {
	wedged, hits := wedgedPod(t)
	s, fleet := newServerScraping(t, map[string]string{"a-wedged": wedged.URL, "b-ok": okPod(t).URL}, Config{}, fastEjection)
	router := httptest.NewServer(s)
	t.Cleanup(router.Close)
	var wg sync.WaitGroup
	codes := make([]int, 16)
	for i := range codes {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			body := fmt.Sprintf(`{"model":"m","prompt":"request %d","stream":%v}`, i, i%2 == 0)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, router.URL+"/v1/completions", strings.NewReader(body))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			codes[i] = resp.StatusCode
		})
	}
	wg.Wait()
	if hits.Load() == 0 {
		t.Fatal("no request went to the wedged pod: the test proves nothing")
	}
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("request %d (stream %v): status %d, want 200", i, i%2 == 0, c)
		}
	}
	if out := fleet.Out(); len(out) != 1 || out[0].Pod != "a-wedged" {
		t.Errorf("Out() = %+v, want a-wedged", out)
	}
	t.Logf("the wedged pod swallowed %d requests, all moved", hits.Load())
}

// TestRetryAfterHoldsThePod: a pod answering 503 with Retry-After takes
// no request for that long (the request itself moves to another pod),
// though one 503 is far from opening its breaker.
func TestRetryAfterHoldsThePod(t *testing.T) {
	var busyHits atomic.Int64
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if idleMetrics(w, r) {
			return
		}
		busyHits.Add(1)
		w.Header().Set("Retry-After", "30")
		http.Error(w, "engine overloaded", http.StatusServiceUnavailable)
	}))
	t.Cleanup(busy.Close)
	s, _ := newServer(t, map[string]string{"a-busy": busy.URL, "b-ok": okPod(t).URL}, Config{})
	for i := 0; busyHits.Load() == 0; i++ {
		if i == 50 {
			t.Fatal("50 requests and none went to the busy pod")
		}
		if code := streamOnceHandler(s, fmt.Sprintf(`{"model":"m","prompt":"p%d"}`, i)); code != http.StatusOK {
			t.Fatalf("status %d, want 200 from the other pod", code)
		}
	}
	for i := range 20 {
		if code := streamOnceHandler(s, fmt.Sprintf(`{"model":"m","prompt":"q%d"}`, i)); code != http.StatusOK {
			t.Fatalf("status %d, want 200", code)
		}
	}
	if n := busyHits.Load(); n != 1 {
		t.Errorf("the busy pod got %d requests within its Retry-After, want 1", n)
	}
}

// TestSpentAttemptsAnswer503WithTheReason: when every attempt failed the
// client gets 503 naming each pod's failure, not a bare 502 nor the last
// pod's 500.
func TestSpentAttemptsAnswer503WithTheReason(t *testing.T) {
	pods := map[string]string{}
	for _, name := range []string{"a", "b"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if idleMetrics(w, r) {
				return
			}
			http.Error(w, "engine core "+name+" died", http.StatusInternalServerError)
		}))
		t.Cleanup(srv.Close)
		pods[name] = srv.URL
	}
	s, _ := newServer(t, pods, Config{MaxAttempts: 2})
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/completions", strings.NewReader(`{"model":"m","prompt":"p"}`)))
	body := rec.Body.String()
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(body, "all 2 attempts failed") ||
		!strings.Contains(body, "engine core a died") || !strings.Contains(body, "engine core b died") {
		t.Errorf("status %d, body %s; want 503 naming both pods' failures", rec.Code, body)
	}
	if rec.Header().Get("Retry-After") == "" {
		t.Error("503 without Retry-After")
	}
}

// TestRetryAfterForms reads both forms RFC 9110 allows.
func TestRetryAfterForms(t *testing.T) {
	now := time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{"": 0, "7": 7 * time.Second, "-3": 0, "soon": 0,
		now.Add(90 * time.Second).Format(http.TimeFormat): 90 * time.Second, now.Add(-time.Minute).Format(http.TimeFormat): 0} {
		if got := retryAfter(v, now); got != want {
			t.Errorf("retryAfter(%q) = %s, want %s", v, got, want)
		}
	}
}
