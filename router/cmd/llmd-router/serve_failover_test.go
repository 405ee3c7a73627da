package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// outcome is how one client request ended.
type outcome struct {
	status  int
	pod     string
	started bool // response headers arrived: streaming began
	done    bool // the stream ended with [DONE]
	err     error
}

// stream sends one streamed completion and reads it to the end.
func stream(ctx context.Context, client *http.Client, url string, body []byte) outcome {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return outcome{err: err}
	}
	resp, err := client.Do(req)
	if err != nil {
		return outcome{err: err}
	}
	defer resp.Body.Close()
	o := outcome{status: resp.StatusCode, pod: resp.Header.Get("X-Llmd-Pod"), started: true}
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(resp.Body)
		o.err = fmt.Errorf("status %d: %s", resp.StatusCode, msg)
		return o
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if sc.Text() == "data: [DONE]" {
			o.done = true
		}
	}
	if err := sc.Err(); err != nil {
		o.err = err
	} else if !o.done {
		o.err = fmt.Errorf("stream from %s ended without [DONE]", o.pod)
	}
	return o
}

// TestServeSurvivesAReplicaKilledMidRun runs 8 replica processes behind the
// router, keeps 32 streams going, and kills with SIGKILL, a third of the way
// in, the replica the router has most requests open on. Requests on it that
// had not started streaming must be retried elsewhere and succeed; only
// streams already under way may fail. The kill must hit: some request fails
// over or breaks mid-stream.
func TestServeSurvivesAReplicaKilledMidRun(t *testing.T) {
	infos, procs := startReplicas(t, 8, "--time-scale", "10")
	r := startRouter(t, infos)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

	var (
		mu       sync.Mutex
		outcomes []outcome
		sent     atomic.Int64
		killed   atomic.Bool
		victim   atomic.Int64
	)
	// kill picks the pod with the most open requests (the scorers may leave
	// some pods idle for a while, and killing an idle one tests nothing),
	// freezes it with SIGSTOP so that those requests cannot finish in the
	// meantime, checks that some are still open, and then kills it.
	kill := func() {
		inFlight := func(fams map[string]*dto.MetricFamily, i int) float64 {
			return sum(fams, "llmd_router_pod_in_flight", "pod", infos[i].Pod)
		}
		for attempt := 0; attempt < 50; attempt++ {
			fams := metrics(t, r.url+"/metrics")
			best := -1
			for i := range infos {
				if n := inFlight(fams, i); n > 0 && (best < 0 || n > inFlight(fams, best)) {
					best = i
				}
			}
			if best < 0 {
				time.Sleep(10 * time.Millisecond)
				continue
			}
			_ = procs[best].cmd.Process.Signal(syscall.SIGSTOP)
			if inFlight(metrics(t, r.url+"/metrics"), best) == 0 { // they all finished before the stop
				_ = procs[best].cmd.Process.Signal(syscall.SIGCONT)
				continue
			}
			victim.Store(int64(best))
			_ = procs[best].cmd.Process.Signal(syscall.SIGKILL)
			return
		}
		t.Error("no pod kept a request open long enough to be killed under it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const total, workers = 480, 32
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				n := sent.Add(1)
				if n > total {
					return
				}
				// 1-3 blocks of distinct prompts, 24 output tokens: a stream
				// lasts ~0.1 s of wall time at time scale 10 on an idle engine.
				o := stream(ctx, client, r.url, completion(t, tokens(16+int(n)%40, uint32(n)), 24, true))
				mu.Lock()
				outcomes = append(outcomes, o)
				mu.Unlock()
				if n == total/3 && killed.CompareAndSwap(false, true) {
					kill()
				}
			}
		})
	}
	wg.Wait()
	if !killed.Load() {
		t.Fatal("the replica was never killed")
	}

	victimName := infos[victim.Load()].Pod
	var ok, broken, onVictimAfter int
	for _, o := range outcomes {
		switch {
		case o.err == nil:
			ok++
		case o.started && o.status == http.StatusOK:
			// Streaming had begun: the router may only cut it.
			broken++
			if o.pod != victimName {
				t.Errorf("a stream from %s broke, but only %s was killed: %v", o.pod, victimName, o.err)
			}
		default:
			t.Errorf("request failed before streaming began (status %d): %v", o.status, o.err)
		}
		if o.pod == victimName && o.err == nil {
			onVictimAfter++
		}
	}
	retries := r.gauge(t, "llmd_router_retries_total")
	t.Logf("%d requests: %d ok, %d broke mid-stream on %s; router retried %v attempts; %d answered by %s before it died",
		len(outcomes), ok, broken, victimName, retries, onVictimAfter, victimName)
	if len(outcomes) != total {
		t.Errorf("%d outcomes for %d requests", len(outcomes), total)
	}
	if retries <= 0 && broken == 0 {
		t.Error("the kill hit no request: nothing failed over and nothing broke, so the test proved nothing")
	}
	if !strings.Contains(r.stderr.String(), "retrying on another pod") && retries > 0 {
		t.Error("retries counted but not logged")
	}
}
