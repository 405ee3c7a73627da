package discovery_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/discovery"
)

// runFleet follows the static pods with fast scrapes: ejection after 3
// failed scrapes of at most 100 ms, frozen after frozenAfter.
func runFleet(t *testing.T, frozenAfter time.Duration, pods ...discovery.Pod) *discovery.Fleet {
	t.Helper()
	f := discovery.NewFleet(discovery.FleetConfig{Metrics: config.Metrics{Interval: config.Duration{Duration: 20 * time.Millisecond},
		StaleAfter: config.Duration{Duration: time.Second}, Timeout: config.Duration{Duration: 100 * time.Millisecond},
		EjectAfterFailures: 3, FrozenAfter: config.Duration{Duration: frozenAfter}}})
	follow(t, f, pods...)
	return f
}

// follow runs f over the static pods until the test ends.
func follow(t *testing.T, f *discovery.Fleet, pods ...discovery.Pod) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx, discovery.Static(pods)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("fleet: %v", err)
		}
	})
}

// hungListener accepts connections and never answers, as a pod whose
// engine and API server are wedged does.
func hungListener(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c) // held open, never read or written
		}
	}()
	t.Cleanup(func() { l.Close() })
	return "http://" + l.Addr().String()
}

func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(start)
}

func inService(f *discovery.Fleet, pod string) bool {
	for _, p := range f.Pods(nil) {
		if p.Name == pod {
			return true
		}
	}
	return false
}

// TestHungPodLeavesScoring: a pod that accepts connections and never
// answers fails three scrapes in a row at the scrape timeout and leaves
// Pods, with its reason in Out and the metrics, and its OutSignal closes;
// a healthy replica beside it stays.
func TestHungPodLeavesScoring(t *testing.T) {
	good := startSim(t, 1, 1).Infos[0]
	f := runFleet(t, time.Second, discovery.Pod{Name: "good", HTTP: good.HTTP}, discovery.Pod{Name: "hung", HTTP: hungListener(t)})
	waitFor(t, "first view", 5*time.Second, func() bool { return inService(f, "good") })
	signal := f.OutSignal("hung")
	took := waitFor(t, "hung pod out", 5*time.Second, func() bool { return !inService(f, "hung") })
	t.Logf("hung pod out of scoring %s after its first view (3 scrapes at a 100 ms timeout)", took.Round(time.Millisecond))
	select {
	case <-signal:
	default:
		t.Error("OutSignal taken before the outage did not close")
	}
	out := f.Out()
	if len(out) != 1 || out[0].Pod != "hung" || out[0].Reason != discovery.OutScrape || !strings.Contains(out[0].Detail, "3 scrapes in a row failed") {
		t.Errorf("Out() = %+v, want hung with reason %s", out, discovery.OutScrape)
	}
	if !inService(f, "good") {
		t.Error("the healthy pod left scoring")
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(discovery.Collector{Fleet: f})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, fam := range fams {
		if fam.GetName() != "llmd_router_pod_out_of_service" {
			continue
		}
		for _, m := range fam.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got = append(got, strings.Join(labels, ",")+" "+strconv.FormatFloat(m.GetGauge().GetValue(), 'g', -1, 64))
		}
	}
	if want := "pod=hung,reason=scrape_failing 1"; len(got) != 1 || got[0] != want {
		t.Errorf("llmd_router_pod_out_of_service = %q, want [%q]", got, want)
	}
}

// frozenFront stands in for a wedged engine whose API server still
// answers /metrics: it serves the page a real simulated replica showed
// while one request was running, unchanged from then on, and swallows
// every other request; until frozen is set it forwards /metrics live.
func frozenFront(t *testing.T, replica string) (url string, frozen *atomic.Bool) {
	t.Helper()
	frozen = new(atomic.Bool)
	var page atomic.Pointer[[]byte]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			<-r.Context().Done()
			return
		}
		if p := page.Load(); frozen.Load() && p != nil {
			_, _ = w.Write(*p)
			return
		}
		resp, err := http.Get(replica + "/metrics")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !frozen.Load() {
			page.Store(&b)
		}
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, frozen
}

// TestFrozenCountersLeaveScoringSlowPodStays: a pod whose /metrics
// answers with requests running and token counters flat leaves scoring
// after frozen_after, while a replica ten times slower per token (its
// counters still move every engine step) with requests running stays in.
func TestFrozenCountersLeaveScoringSlowPodStays(t *testing.T) {
	wedged, slow := startSim(t, 1, 1).Infos[0], startSim(t, 1, 0.1).Infos[0]
	front, frozen := frozenFront(t, wedged.HTTP)
	const frozenAfter = 500 * time.Millisecond
	f := runFleet(t, frozenAfter, discovery.Pod{Name: "slow", HTTP: slow.HTTP}, discovery.Pod{Name: "wedged", HTTP: front})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, url := range []string{wedged.HTTP, slow.HTTP} {
		for range 2 {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/completions", bytes.NewReader(body(t, prompts(5, 1, 64)[0], 4000)))
			go func() {
				if resp, err := http.DefaultClient.Do(req); err == nil {
					resp.Body.Close()
				}
			}()
		}
	}
	running := func(p string) bool {
		for _, q := range f.Pods(nil) {
			if q.Name == p && q.Load.Fresh && q.Load.Running == 2 {
				return true
			}
		}
		return false
	}
	waitFor(t, "requests running on both", 5*time.Second, func() bool { return running("slow") && running("wedged") })
	frozen.Store(true)
	frozeAt := time.Now()
	took := waitFor(t, "frozen pod out", 5*time.Second, func() bool { return !inService(f, "wedged") })
	t.Logf("frozen pod out of scoring %s after its counters stopped (frozen_after %s)", took.Round(time.Millisecond), frozenAfter)
	if out := f.Out(); len(out) != 1 || out[0].Reason != discovery.OutFrozen || !strings.Contains(out[0].Detail, "2 requests running") {
		t.Errorf("Out() = %+v, want wedged frozen with 2 requests running", out)
	}
	// The slow pod decodes at ~10x TPOT all along: watched for four times
	// frozen_after, it never leaves.
	for time.Since(frozeAt) < 4*frozenAfter {
		if !running("slow") {
			t.Fatalf("the slow pod left scoring or stopped running: %+v, out %+v", f.Pods(nil), f.Out())
		}
		time.Sleep(10 * time.Millisecond)
	}
	frozen.Store(false) // counters move again: the next scrapes bring it back
	waitFor(t, "wedged pod back", 5*time.Second, func() bool { return inService(f, "wedged") })
}
