package proxy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/index"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// gatedStreamPod is a stand-in pod that answers a stream's headers at once,
// as vLLM does when it accepts the request, and its first event once gate
// is closed, as vLLM does after the request's queueing and prefill.
func gatedStreamPod(t *testing.T, gate <-chan struct{}) *httptest.Server {
	return gatedStreamPodScraped(t, gate, idleMetrics)
}

// gatedStreamPodScraped is gatedStreamPod answering scrapes with metrics
// (which reports whether r was one).
func gatedStreamPodScraped(t *testing.T, gate <-chan struct{}, metrics func(http.ResponseWriter, *http.Request) bool) *httptest.Server {
	pod := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if metrics(w, r) {
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-gate:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"text\":\"t\"}]}\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(pod.Close)
	return pod
}

// TestSpeculationHeldUntilFirstByte: a routed request's speculative entries
// stand while the pod has not sent its first body byte, however long it
// queues, and expire a TTL after it did when no KV event confirms them. The
// index's clock is the test's, so the TTL passes without waiting for it.
func TestSpeculationHeldUntilFirstByte(t *testing.T) {
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	gate := make(chan struct{})
	pod := gatedStreamPod(t, gate)

	ws, err := scoring.FromConfig(config.Scoring{Scorers: config.DefaultScorers()})
	if err != nil {
		t.Fatal(err)
	}
	ix := index.New(index.Config{BlockSize: 16, SpeculationTTL: 2 * time.Second, Now: clock})
	s, fleet := newServer(t, map[string]string{"queued": pod.URL},
		Config{Picker: scoring.NewPicker(ix, ws)})
	front := httptest.NewServer(s)
	defer front.Close()

	body := `{"model":"m","stream":true,"prompt":"` + strings.Repeat("the lighthouse keeper counts the ships at night ", 12) + `"}`
	held := func() scoring.Hit {
		t.Helper()
		resp, err := http.Post(front.URL+"/v1/route", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var d scoring.Decision
		if err := json.NewDecoder(resp.Body).Decode(&d); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("explain: status %d, %v", resp.StatusCode, err)
		}
		for _, sc := range d.Scores {
			if sc.Pod == "queued" {
				return sc.Hit
			}
		}
		t.Fatalf("no score for the queued pod: %+v", d)
		return scoring.Hit{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	firstEvent := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, front.URL+"/v1/completions", bytes.NewReader([]byte(body)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			firstEvent <- err
			return
		}
		defer resp.Body.Close()
		if resp.Header.Get(PodHeader) != "queued" {
			t.Errorf("the first request went to %q", resp.Header.Get(PodHeader))
		}
		_, err = bufio.NewReader(resp.Body).ReadString('\n')
		firstEvent <- err
		_, _ = io.Copy(io.Discard, resp.Body)
	}()
	waitUntil(t, "the request in flight", func() bool {
		pods := fleet.Pods(nil)
		return len(pods) == 1 && pods[0].Load.InFlight == 1
	})
	var blocks int
	advance(time.Minute)
	if h := held(); h.Speculative == 0 || h.Blocks != h.Speculative {
		t.Fatalf("a minute into the queue: %+v, want the prefix held speculatively", h)
	} else {
		blocks = h.Blocks
	}
	close(gate)
	if err := <-firstEvent; err != nil {
		t.Fatalf("first event: %v", err)
	}
	if h := held(); h.Blocks != blocks {
		t.Fatalf("just after the first byte: %+v, want the %d blocks still there", h, blocks)
	}
	advance(3 * time.Second)
	if h := held(); h.Blocks != 0 {
		t.Fatalf("a TTL after the first byte, with no event: %+v, want expired", h)
	}
}
