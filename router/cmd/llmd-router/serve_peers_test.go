package main

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// Router replicas with the peer exchange on, as real processes over
// simulated engines (DESIGN.md decision 10, package peers): each lists
// every replica's peer address, its own among them, as the provider's
// static form does.

// peerAddrs are n free loopback addresses for --peers-listen.
func peerAddrs(t testing.TB, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		p, _ := stablePorts(t)
		out[i] = "127.0.0.1:" + p
	}
	return out
}

// withPeers are router args serving on addrs[i] and following all of addrs.
func withPeers(addrs []string, i int, args ...string) []string {
	return append([]string{"--peers-listen", addrs[i], "--peers", strings.Join(addrs, ",")}, args...)
}

// indexView is a router's GET /v1/index, engines holding blocks only.
func indexView(t *testing.T, url string) []engineLine {
	t.Helper()
	resp, err := http.Get(url + "/v1/index")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v struct{ Engines []engineLine }
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(v.Engines, func(e engineLine) bool { return e.Blocks == 0 })
}

type engineLine struct {
	Pod    string
	Rank   int
	Blocks int
	Digest string
}

func TestPeersShareInFlightAndSpeculation(t *testing.T) {
	files := testenv.Tokenizer(t, "qwen3")
	tok := []string{"--block-size", "16", "--tokenizer", files.TokenizerJSON, "--tokenizer-config", files.TokenizerConfig}
	infos, _ := startReplicas(t, 2, tok[2:]...)
	addrs := peerAddrs(t, 2)
	a := startRouter(t, infos, withPeers(addrs, 0, tok...)...)
	b := startRouter(t, infos, withPeers(addrs, 1, tok...)...)
	waitFor(t, "both replicas follow each other", func() bool {
		return a.gauge(t, "llmd_router_peers") == 1 && b.gauge(t, "llmd_router_peers") == 1
	})

	// A long stream through a: b counts it on its pod while it runs.
	resp := post(t, a.url+"/v1/completions", completion(t, tokens(64, 7), 4000, true))
	pod := resp.Header.Get("X-Llmd-Pod")
	if resp.StatusCode != http.StatusOK || pod == "" {
		t.Fatalf("status %d, pod %q", resp.StatusCode, pod)
	}
	waitFor(t, "b to count a's open request on its pod", func() bool {
		return b.gauge(t, "llmd_router_pod_peer_in_flight", "pod", pod) == 1 && b.gauge(t, "llmd_router_pod_in_flight", "pod", pod) == 0
	})
	if got := b.gauge(t, "llmd_router_peer_speculations_total"); got != 1 {
		t.Errorf("b held %v of a's decisions' speculative entries, want 1", got)
	}
	e := explain(t, b.url, completion(t, tokens(64, 7), 1, false))
	for _, s := range e.Scores {
		if s.Pod == pod && (s.Load.InFlight != 1 || s.Load.PeerInFlight != 1) {
			t.Errorf("b scores %s with in flight %d (peers' %d), want 1 (1)", pod, s.Load.InFlight, s.Load.PeerInFlight)
		}
	}
	resp.Body.Close()
	waitFor(t, "b to see the request end", func() bool { return b.gauge(t, "llmd_router_pod_peer_in_flight", "pod", pod) == 0 })
}

func TestWarmStartFromPeer(t *testing.T) {
	const pods = 4
	infos, _ := startReplicas(t, pods)
	addrs := peerAddrs(t, 2)
	a := startRouter(t, infos, withPeers(addrs, 0, "--block-size", "16")...)
	for i := range 24 {
		if r := send(t, a.url+"/v1/completions", completion(t, tokens(96, uint32(i)), 2, false)); r.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d", i, r.StatusCode)
		}
	}
	waitFor(t, "a's index to hold every pod", func() bool { return len(indexView(t, a.url)) == pods })

	started := time.Now()
	b := startRouter(t, infos, withPeers(addrs, 1, "--block-size", "16")...)
	var same time.Duration
	waitFor(t, "b's index to equal a's", func() bool {
		ia, ib := indexView(t, a.url), indexView(t, b.url)
		same = time.Since(started)
		return slices.Equal(ia, ib)
	})
	// The index is a's snapshot as soon as it is imported; each engine's
	// event stream resumes from its position after that, one by one.
	waitFor(t, "b to resume every engine from a's positions", func() bool {
		return sum(metrics(t, b.url+"/metrics"), "llmd_router_kv_event_resumed_total") == pods
	})
	fams := metrics(t, b.url+"/metrics")
	if got := sum(fams, "llmd_router_kv_event_full_replays_total"); got != 0 {
		t.Errorf("b sent %v replays from seq 0 after a warm start, want 0", got)
	}
	t.Logf("b's index equal to a's %s after b started (process start, warm start, readiness included)", same.Round(time.Millisecond))

	// Without peers every pod is replayed from seq 0.
	c := startRouter(t, infos, "--block-size", "16")
	waitFor(t, "a replica without peers to replay every pod from seq 0", func() bool {
		return c.gauge(t, "llmd_router_kv_event_full_replays_total") == pods
	})

	// a killed: b goes on alone, losing no request.
	if err := a.stop(t, syscall.SIGKILL, time.Second); err == nil {
		t.Fatal("a exited cleanly after SIGKILL")
	}
	for i := range 8 {
		if r := send(t, b.url+"/v1/completions", completion(t, tokens(96, uint32(i)), 2, false)); r.StatusCode != http.StatusOK {
			t.Errorf("request %d to b after a was killed: status %d", i, r.StatusCode)
		}
	}
	waitFor(t, "b to count a lost", func() bool { return b.gauge(t, "llmd_router_peer_lost_total") == 1 })
	if got := b.gauge(t, "llmd_router_peers"); got != 0 {
		t.Errorf("b follows %v peers after a was killed, want 0", got)
	}
}
