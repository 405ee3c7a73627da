package discovery_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/discovery"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// TestFleetLoadAndStaleness scrapes a simulated replica's real /metrics:
// a request in progress shows as running, the router's own in-flight count
// follows Begin and its end, and when the replica goes away its load turns
// stale within the staleness limit and the scrape errors are reported.
func TestFleetLoadAndStaleness(t *testing.T) {
	simFleet, err := sim.StartFleet(sim.FleetConfig{Replicas: 1, Host: "127.0.0.1", NoReplay: true,
		Replica: sim.ReplicaConfig{Model: simModel, Engine: simEngine(), TimeScale: 1}})
	if err != nil {
		t.Fatal(err)
	}
	stopSim := simFleet.Start(context.Background())
	defer stopSim()

	info := simFleet.Infos[0]
	metrics := config.Metrics{Interval: config.Duration{Duration: 20 * time.Millisecond},
		StaleAfter: config.Duration{Duration: 300 * time.Millisecond}, Timeout: config.Duration{Duration: 100 * time.Millisecond}}
	f := discovery.NewFleet(discovery.FleetConfig{Metrics: metrics})
	follow(t, f, discovery.Pod{Name: info.Pod, HTTP: info.HTTP, KVEvents: info.KV})
	load := func() scoring.Load { return onlyLoad(f) }
	await := func(what string, ok func(scoring.Load) bool) time.Duration {
		t.Helper()
		start := time.Now()
		for !ok(load()) {
			if time.Since(start) > 5*time.Second {
				t.Fatalf("%s: load stays %+v", what, load())
			}
			time.Sleep(5 * time.Millisecond)
		}
		return time.Since(start)
	}
	await("first scrape", func(l scoring.Load) bool { return l.Fresh })

	b := body(t, prompts(11, 1, 64)[0], 200)
	started, end := f.Begin(info.Pod, 100, false)
	reqDone := make(chan struct{})
	go func() {
		defer close(reqDone)
		// At time scale 1 this request decodes for several seconds; it
		// ends with an error when the replica is stopped under it.
		resp, err := http.Post(info.HTTP+"/v1/completions", "application/json", bytes.NewReader(b))
		if err == nil {
			resp.Body.Close()
		}
	}()
	await("request running", func(l scoring.Load) bool {
		return l.Fresh && l.Running == 1 && l.InFlight == 1 && l.PendingTokens == 100 && l.KVUsage > 0
	})
	started()
	started() // a second call must not count twice
	if l := load(); l.InFlight != 1 || l.PendingTokens != 0 {
		t.Errorf("after its first byte: in flight %d, pending tokens %d; want 1 and 0", l.InFlight, l.PendingTokens)
	}
	end()
	end()
	if l := load(); l.InFlight != 0 || l.PendingTokens != 0 {
		t.Errorf("after end: in flight %d, pending tokens %d", l.InFlight, l.PendingTokens)
	}
	// A request that ends before its first byte takes its pending tokens along.
	_, end = f.Begin(info.Pod, 70, true)
	if l := load(); l.InFlight != 1 || l.PendingTokens != 70 {
		t.Errorf("begun: in flight %d, pending tokens %d; want 1 and 70", l.InFlight, l.PendingTokens)
	}
	if in, pend, top, ok := f.OwnLoad(info.Pod); !ok || in != 1 || pend != 70 || top != 70 {
		t.Errorf("own load of a request of the highest class: %d in flight, %d pending, %d of the highest class, %v; want 1, 70, 70", in, pend, top, ok)
	}
	// The gauge is this router's own pending prefill: the peers' adds to
	// the load scoring sees, not to the series each replica exports.
	f.SetPeerLoad(info.Pod, 2, 500, 300)
	if l, own := load(), podGauge(t, f, "llmd_router_pod_pending_prefill_tokens", info.Pod); l.PendingTokens != 570 || l.PeerPendingTokens != 500 || l.PeerTopPendingTokens != 300 || own != 70 {
		t.Errorf("with a peer's 500 (300 of the highest class): pending tokens %d (the peers' %d, %d of the highest class), own gauge %v; want 570 (500, 300) and 70",
			l.PendingTokens, l.PeerPendingTokens, l.PeerTopPendingTokens, own)
	}
	f.SetPeerLoad(info.Pod, 0, 0, 0)
	end()
	if _, _, top, _ := f.OwnLoad(info.Pod); top != 0 {
		t.Errorf("ended: %d pending tokens of the highest class left", top)
	}
	if l, own := load(), podGauge(t, f, "llmd_router_pod_pending_prefill_tokens", info.Pod); l.InFlight != 0 || l.PendingTokens != 0 || own != 0 {
		t.Errorf("ended before its first byte: in flight %d, pending tokens %d, gauge %v", l.InFlight, l.PendingTokens, own)
	}

	if err := stopSim(); err != nil {
		t.Logf("simulated replica stopped: %v", err)
	}
	<-reqDone
	stale := await("replica gone", func(l scoring.Load) bool { return !l.Fresh })
	t.Logf("load turned stale %s after the replica stopped", stale)
	if stale > metrics.StaleAfter.Duration+metrics.Interval.Duration+metrics.Timeout.Duration {
		t.Errorf("stale after %s, limit %s", stale, metrics.StaleAfter)
	}
	if h := f.Health(); len(h) != 1 || h[0].ScrapeErrs == 0 || h[0].LastErr == "" {
		t.Errorf("health %+v", h)
	}
}

// TestFleetReplacesMovedPod: a pod that comes back under the same name with
// another address (a StatefulSet pod rescheduled) is a new process, so the
// fleet drops the old one everywhere (OnRemove) and follows the new address;
// an unchanged report changes nothing.
func TestFleetReplacesMovedPod(t *testing.T) {
	var removed []string
	cfg := config.Config{Model: "m"}
	cfg.Default()
	cfg.Discovery.Ports.HTTP = 1 // nothing listens: scrapes fail fast
	f := discovery.NewFleet(discovery.FleetConfig{Addresses: discovery.Addresses{Discovery: cfg.Discovery, Model: cfg.Model},
		Metrics: cfg.Metrics, OnRemove: func(p string) { removed = append(removed, p) }})
	defer func() {
		if err := f.Update(nil); err != nil {
			t.Error(err)
		}
	}()
	for _, step := range []struct {
		pods    []discovery.Pod
		removed string
		http    string
	}{
		{[]discovery.Pod{{Name: "vllm-0", IP: "127.0.0.2"}}, "", "http://127.0.0.2:1"},
		{[]discovery.Pod{{Name: "vllm-0", IP: "127.0.0.2"}}, "", "http://127.0.0.2:1"},
		{[]discovery.Pod{{Name: "vllm-0", IP: "127.0.0.3"}}, "vllm-0", "http://127.0.0.3:1"},
		// Event addresses given explicitly are kept, without a derived replay.
		{[]discovery.Pod{{Name: "vllm-0", IP: "127.0.0.3", KVEvents: "tcp://127.0.0.3:7000"}}, "vllm-0,vllm-0", "http://127.0.0.3:1"},
	} {
		if err := f.Update(step.pods); err != nil {
			t.Fatal(err)
		}
		p, ok := f.Target("vllm-0")
		wantKV, wantReplay := "tcp://"+step.pods[0].IP+":5557", "tcp://"+step.pods[0].IP+":5558"
		if step.pods[0].KVEvents != "" {
			wantKV, wantReplay = step.pods[0].KVEvents, ""
		}
		if !ok || p.HTTP != step.http || p.KVEvents != wantKV || p.Replay != wantReplay {
			t.Errorf("target %+v", p)
		}
		if got := strings.Join(removed, ","); got != step.removed {
			t.Errorf("removed %q, want %q", got, step.removed)
		}
	}
}

// podGauge is the value of the Collector's gauge name for pod, -1 when the
// series is missing.
func podGauge(t *testing.T, f *discovery.Fleet, name, pod string) float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(discovery.Collector{Fleet: f})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range fams {
		for _, m := range fam.GetMetric() {
			if fam.GetName() == name && len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == pod {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

// TestFleetSeesTheEnginePreempt scrapes a simulated replica whose KV cache
// holds one of its three requests at their longest: the engine preempts
// (vllm:num_preemptions_total rises, as vLLM's scheduler counts its
// preemptions), and the pod's load says Preempting from that scrape for
// discovery.PreemptionMemory, not before its first rise nor after.
func TestFleetSeesTheEnginePreempt(t *testing.T) {
	ec := simEngine()
	ec.NumGPUBlocks, ec.MaxNumSeqs = 16, 4 // 15 blocks of 16 tokens
	simFleet, err := sim.StartFleet(sim.FleetConfig{Replicas: 1, Host: "127.0.0.1", NoReplay: true,
		Replica: sim.ReplicaConfig{Model: simModel, Engine: ec, TimeScale: 20}})
	if err != nil {
		t.Fatal(err)
	}
	stopSim := simFleet.Start(context.Background())
	defer stopSim()

	var mu sync.Mutex
	clock := time.Unix(1_000_000, 0)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	info := simFleet.Infos[0]
	metrics := config.Metrics{Interval: config.Duration{Duration: 10 * time.Millisecond},
		StaleAfter: config.Duration{Duration: time.Hour}, Timeout: config.Duration{Duration: 100 * time.Millisecond}}
	f := discovery.NewFleet(discovery.FleetConfig{Metrics: metrics, Now: now})
	follow(t, f, discovery.Pod{Name: info.Pod, HTTP: info.HTTP, KVEvents: info.KV})
	load := func() scoring.Load { return onlyLoad(f) }
	for deadline := time.Now().Add(5 * time.Second); !load().Fresh; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no scrape in 5 s")
		}
	}
	if load().Preempting {
		t.Fatal("preempting before any request")
	}

	// Each request grows to 48 + 150 tokens, 13 blocks: the three do not
	// fit together, and the engine preempts until they run one by one.
	var wg sync.WaitGroup
	for _, p := range prompts(21, 3, 48) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(info.HTTP+"/v1/completions", "application/json", bytes.NewReader(body(t, p, 150)))
			if err != nil {
				t.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}()
	}
	seen := false
	for deadline := time.Now().Add(10 * time.Second); !seen && time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
		seen = load().Preempting
	}
	wg.Wait()
	if !seen {
		t.Fatal("the pod's load never said Preempting while its engine preempted")
	}
	mu.Lock()
	clock = clock.Add(discovery.PreemptionMemory - time.Second)
	mu.Unlock()
	if !load().Preempting || podGauge(t, f, "llmd_router_pod_preempting", info.Pod) != 1 {
		t.Error("Preempting forgotten within discovery.PreemptionMemory, or not exported")
	}
	mu.Lock()
	clock = clock.Add(2 * time.Second)
	mu.Unlock()
	if load().Preempting || podGauge(t, f, "llmd_router_pod_preempting", info.Pod) != 0 {
		t.Error("Preempting still said past discovery.PreemptionMemory with no new preemption")
	}
}

// onlyLoad is the load of f's one pod, zero until it is reported.
func onlyLoad(f *discovery.Fleet) scoring.Load {
	if pods := f.Pods(nil); len(pods) == 1 {
		return pods[0].Load
	}
	return scoring.Load{}
}
