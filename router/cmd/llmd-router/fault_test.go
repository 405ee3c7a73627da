package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	zmq "github.com/pebbe/zmq4"
	dto "github.com/prometheus/client_model/go"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// The standing fault suite: real router and replica processes, a steady
// stream load, one fault injected a second in, and for each fault the
// figures the router is judged by: requests that failed before streaming
// (none may, except while the router itself is down), streams broken
// mid-way (only those on the sick pod may), seconds until the sick pod's
// circuit opened and until its last failed attempt (the probe after the
// open period, or the last request before the scorers moved off), seconds
// until it served again once the fault ended, and how far the router's
// index agrees with the engines' caches after a quiet period. Grouped as SGLang groups its gateway tests: reliability (pods
// fail), routing (the index under faults), security is the proxy
// package's (hostile bodies, surface, keys).

const faultBlock = 16 // the simulator's default block size

// faultConfig is the router config of the suite: timeouts short enough to
// see within seconds, the "kv@" topic prefix (each pod has its own
// socket, so the prefix matches its publisher whatever address fronts its
// HTTP), a one-second silence limit. The pods come from --pods-file.
func faultConfig(t *testing.T, topic string) string {
	t.Helper()
	files := testenv.Tokenizer(t, "qwen3")
	yaml := fmt.Sprintf(`model: %s
block_size: 16
tokenizer: {json: %q, config: %q}
discovery:
  static: [{name: replaced-by-pods-file, ip: 127.0.0.1}]
  topic: %q
  kv_events_silent_after: 1s
upstream:
  response_header_timeout: 1s
  stream_idle_timeout: 2s
  breaker: {failures: 3, open_for: 1s, max_open_for: 2s}
`, simModelName, files.TokenizerJSON, files.TokenizerConfig, topic)
	path := filepath.Join(t.TempDir(), "router.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// faultRow is one line of the table.
type faultRow struct {
	group, fault              string
	requests, failedBefore    int
	brokeMidStream            int
	eject, recover, agreement string
}

// loadGen keeps workers streaming completions over 64 repeating prefixes
// until stopped, recording every outcome with the time it ended.
type loadGen struct {
	mu    sync.Mutex
	outs  []outcome
	ends  []time.Time
	sent  atomic.Int64
	stopc chan struct{}
	wg    sync.WaitGroup
}

func faultPrompt(n int64) []uint32 { return tokens(48+int(n%3)*16, uint32(n%64)) }

func startLoad(t *testing.T, url func() string, workers int) *loadGen {
	g := &loadGen{stopc: make(chan struct{})}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for range workers {
		g.wg.Go(func() {
			for {
				select {
				case <-g.stopc:
					return
				default:
				}
				n := g.sent.Add(1)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				o := stream(ctx, client, url(), completion(t, faultPrompt(n), 16, true))
				cancel()
				if o.err != nil && !o.started {
					// As a client would: a refused connection is not
					// retried in a tight loop.
					time.Sleep(100 * time.Millisecond)
				}
				g.mu.Lock()
				g.outs = append(g.outs, o)
				g.ends = append(g.ends, time.Now())
				g.mu.Unlock()
			}
		})
	}
	return g
}

func (g *loadGen) stop() { close(g.stopc); g.wg.Wait() }

// tally counts failures before streaming and streams broken mid-way.
func (g *loadGen) tally(row *faultRow) {
	g.mu.Lock()
	defer g.mu.Unlock()
	row.requests = len(g.outs)
	for _, o := range g.outs {
		switch {
		case o.err == nil:
		case o.started && o.status == http.StatusOK:
			row.brokeMidStream++
		default:
			row.failedBefore++
		}
	}
}

// servedBy reports whether pod completed a request that ended after t0.
func (g *loadGen) servedBy(pod string, t0 time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, o := range g.outs {
		if o.err == nil && o.pod == pod && g.ends[i].After(t0) {
			return true
		}
	}
	return false
}

// waitSeconds polls cond every 20 ms for up to limit and returns the
// seconds it took, or "not within <limit>".
func waitSeconds(start time.Time, limit time.Duration, cond func() bool) string {
	for time.Since(start) < limit {
		if cond() {
			return fmt.Sprintf("%.2f", time.Since(start).Seconds())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "not within " + limit.String()
}

// ejection watches pod for window after start and returns when its circuit
// first opened and when its last failed attempt happened (the breaker's
// half-open probe, or the last request before the scorers moved off).
func ejection(t *testing.T, r *router, pod string, start time.Time, window time.Duration) string {
	failures := func(fams map[string]*dto.MetricFamily) float64 {
		return sum(fams, "llmd_router_pod_failed_attempts_total", "pod", pod)
	}
	base := max(failures(metrics(t, r.url+"/metrics")), 0)
	last, lastAt, opened := base, time.Duration(-1), time.Duration(-1)
	for time.Since(start) < window {
		fams := metrics(t, r.url+"/metrics")
		if n := failures(fams); n > last {
			last, lastAt = n, time.Since(start)
		}
		if opened < 0 && sum(fams, "llmd_router_pod_circuit", "pod", pod, "state", "open") == 1 {
			opened = time.Since(start)
		}
		time.Sleep(20 * time.Millisecond)
	}
	secs := func(d time.Duration) string {
		if d < 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", d.Seconds())
	}
	return secs(opened) + " / " + secs(lastAt)
}

func circuit(t *testing.T, r *router, pod, state string) bool {
	return r.gauge(t, "llmd_router_pod_circuit", "pod", pod, "state", state) == 1
}

// agreement probes, after a quiet period longer than the speculation TTL,
// the prompts the load used: for each prompt and pod where either side
// claims a cached block, the blocks the router's index says the pod holds
// (/v1/route) against the blocks the engine serves from cache when the
// prompt is sent to it directly (its prefix-cache hit counter).
func agreement(t *testing.T, r *router, infos []sim.ReplicaInfo) string {
	t.Helper()
	time.Sleep(2500 * time.Millisecond)
	agree, total := 0, 0
	for n := int64(0); n < 24; n++ {
		prompt := faultPrompt(n * 7)
		body := completion(t, prompt, 1, false)
		e := explain(t, r.url, body)
		for _, info := range infos {
			routerBlocks := -1
			for _, s := range e.Scores {
				if s.Pod == info.Pod {
					routerBlocks = min(s.Hit.Blocks, (len(prompt)-1)/faultBlock)
				}
			}
			if resp, err := http.Get(info.HTTP + "/health"); err != nil {
				continue // the replica is gone
			} else {
				resp.Body.Close()
			}
			before := sum(metrics(t, info.HTTP+"/metrics"), "vllm:prefix_cache_hits_total")
			send(t, info.HTTP+"/v1/completions", body)
			engineBlocks := int(sum(metrics(t, info.HTTP+"/metrics"), "vllm:prefix_cache_hits_total")-before) / faultBlock
			if routerBlocks == 0 && engineBlocks == 0 {
				continue // neither claims the prompt: agreeing on nothing proves nothing
			}
			total++
			if routerBlocks == engineBlocks {
				agree++
			}
		}
	}
	if total == 0 {
		return "no pod left"
	}
	return fmt.Sprintf("%d%% (%d/%d)", 100*agree/total, agree, total)
}

// stormFront is a stand-in for a pod whose engine answers every request
// with 500 while its process and /metrics stay up: it forwards to a real
// replica until storm is set.
func stormFront(t *testing.T, replica string) (*httptest.Server, *atomic.Bool) {
	u, err := url.Parse(replica)
	if err != nil {
		t.Fatal(err)
	}
	toReplica := relay(u, http.DefaultTransport)
	var storm atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if storm.Load() && r.URL.Path != "/metrics" {
			_, _ = io.Copy(io.Discard, r.Body)
			http.Error(w, "engine core died", http.StatusInternalServerError)
			return
		}
		toReplica.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &storm
}

// lossyRelay republishes a replica's KV events, dropping each message with
// probability loss: the router sees gaps and must replay from the replica.
func lossyRelay(t *testing.T, kvAddr string, loss float64) string {
	sub, err := zmq.NewSocket(zmq.SUB)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := zmq.NewSocket(zmq.PUB)
	if err != nil {
		t.Fatal(err)
	}
	if err := sub.SetSubscribe(""); err != nil {
		t.Fatal(err)
	}
	if err := sub.SetRcvtimeo(50 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := sub.Connect(kvAddr); err != nil {
		t.Fatal(err)
	}
	if err := pub.Bind("tcp://127.0.0.1:*"); err != nil {
		t.Fatal(err)
	}
	addr, err := pub.GetLastEndpoint()
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		rng := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-stop:
				return
			default:
			}
			msg, err := sub.RecvMessageBytes(0)
			if err != nil {
				continue
			}
			if rng.Float64() >= loss {
				_, _ = pub.SendMessage(msg)
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done; sub.Close(); pub.Close() })
	return addr
}

// TestFaultSuite runs every fault and prints the table.
func TestFaultSuite(t *testing.T) {
	var rows []faultRow
	add := func(r faultRow) { rows = append(rows, r) }
	t.Cleanup(func() {
		var b strings.Builder
		fmt.Fprintf(&b, "\n%-12s %-34s %8s %14s %10s %13s %10s  %s\n", "group", "fault", "requests", "failed before", "broke mid", "open/last s", "recover s", "index agreement after quiet")
		for _, r := range rows {
			fmt.Fprintf(&b, "%-12s %-34s %8d %14d %10d %13s %10s  %s\n", r.group, r.fault, r.requests, r.failedBefore, r.brokeMidStream, r.eject, r.recover, r.agreement)
		}
		t.Log(b.String())
	})
	const pods, workers = 4, 12
	// run starts replicas and a router, runs the load for 4 s with inject
	// called 1 s in, and tallies the row; inject returns what recovers the
	// fault (nil for none), called 2 s after the fault.
	run := func(t *testing.T, row faultRow, topic string, prepare func([]sim.ReplicaInfo) []sim.ReplicaInfo,
		inject func(r *router, procs []*proc, infos []sim.ReplicaInfo) (recover func())) {
		infos, procs := startReplicas(t, pods, "--time-scale", "10")
		routed := infos
		if prepare != nil {
			routed = prepare(infos)
		}
		r := startRouter(t, routed, "--config", faultConfig(t, topic))
		var cur atomic.Pointer[router]
		cur.Store(r)
		g := startLoad(t, func() string { return cur.Load().url }, workers)
		time.Sleep(time.Second)
		faulted := time.Now()
		victim := routed[0].Pod
		ejected := make(chan string, 1)
		go func() { ejected <- ejection(t, cur.Load(), victim, faulted, 2*time.Second) }()
		recoverFn := inject(r, procs, infos)
		time.Sleep(2 * time.Second)
		row.eject = <-ejected
		row.recover = "-"
		if recoverFn != nil {
			recovered := time.Now()
			recoverFn()
			row.recover = waitSeconds(recovered, 5*time.Second, func() bool {
				return circuit(t, cur.Load(), victim, "closed") && g.servedBy(victim, recovered)
			})
		} else {
			time.Sleep(time.Second)
		}
		g.stop()
		g.tally(&row)
		row.agreement = agreement(t, r, routed)
		add(row)
		if row.failedBefore > 0 {
			t.Errorf("%s: %d requests failed before streaming", row.fault, row.failedBefore)
		}
	}

	t.Run("reliability/pod SIGKILL mid-run", func(t *testing.T) {
		run(t, faultRow{group: "reliability", fault: "pod SIGKILL mid-run"}, "kv@", nil,
			func(_ *router, procs []*proc, _ []sim.ReplicaInfo) func() {
				_ = procs[0].cmd.Process.Signal(syscall.SIGKILL)
				return nil
			})
	})
	t.Run("reliability/pod hang", func(t *testing.T) {
		run(t, faultRow{group: "reliability", fault: "pod hang (SIGSTOP 2 s)"}, "kv@", nil,
			func(_ *router, procs []*proc, _ []sim.ReplicaInfo) func() {
				_ = procs[0].cmd.Process.Signal(syscall.SIGSTOP)
				return func() { _ = procs[0].cmd.Process.Signal(syscall.SIGCONT) }
			})
	})
	t.Run("reliability/5xx storm", func(t *testing.T) {
		var storm *atomic.Bool
		run(t, faultRow{group: "reliability", fault: "5xx storm (2 s)"}, "kv@",
			func(infos []sim.ReplicaInfo) []sim.ReplicaInfo {
				out := append([]sim.ReplicaInfo(nil), infos...)
				var front *httptest.Server
				front, storm = stormFront(t, infos[0].HTTP)
				out[0].HTTP = front.URL
				return out
			},
			func(*router, []*proc, []sim.ReplicaInfo) func() {
				storm.Store(true)
				return func() { storm.Store(false) }
			})
	})
	t.Run("reliability/engine restart", func(t *testing.T) {
		run(t, faultRow{group: "reliability", fault: "engine restart"}, "kv@", nil,
			func(_ *router, procs []*proc, infos []sim.ReplicaInfo) func() {
				_ = procs[0].cmd.Process.Signal(syscall.SIGKILL)
				<-procs[0].done
				return func() {
					http0, _ := url.Parse(infos[0].HTTP)
					kv0 := strings.TrimPrefix(infos[0].KV, "tcp://127.0.0.1:")
					// The router keeps redialling the dead engine's ports; a TCP dial to a
					// closed port in the ephemeral range can connect to itself and hold the
					// port a moment. Start the new engine once its ports are free again.
					kvPort, _ := strconv.Atoi(kv0)
					waitPortsFree(t, http0.Port(), kv0, strconv.Itoa(kvPort+1))
					var one []sim.ReplicaInfo
					start(t, "", 1, &one, "sim", "--replicas", "1", "--port", http0.Port(), "--kv-port", kv0,
						"--seed", "1", "--time-scale", "10")
				}
			})
	})
	t.Run("reliability/router restart under load", func(t *testing.T) {
		row := faultRow{group: "reliability", fault: "router restart under load", eject: "-"}
		infos, _ := startReplicas(t, pods, "--time-scale", "10")
		cfg := faultConfig(t, "kv@")
		r := startRouter(t, infos, "--config", cfg)
		var cur atomic.Pointer[router]
		cur.Store(r)
		g := startLoad(t, func() string { return cur.Load().url }, workers)
		time.Sleep(time.Second)
		killed := time.Now()
		_ = r.cmd.Process.Signal(syscall.SIGKILL)
		<-r.done
		addr := strings.TrimPrefix(r.url, "http://")
		r2 := startServe(t, pods, "--pods-file", podsFile(t, infos), "--config", cfg, "--listen", addr)
		cur.Store(r2)
		row.recover = fmt.Sprintf("%.2f", time.Since(killed).Seconds()) // killed to the new router ready
		time.Sleep(2 * time.Second)
		g.stop()
		g.tally(&row)
		row.agreement = agreement(t, r2, infos)
		add(row)
	})
	peerFaults(t, add)
	t.Run("routing/10% KV-event loss", func(t *testing.T) {
		run(t, faultRow{group: "routing", fault: "10% KV-event loss"}, "kv@",
			func(infos []sim.ReplicaInfo) []sim.ReplicaInfo {
				out := append([]sim.ReplicaInfo(nil), infos...)
				for i := range out {
					out[i].KV = lossyRelay(t, infos[i].KV, 0.10)
				}
				return out
			},
			func(*router, []*proc, []sim.ReplicaInfo) func() { return nil })
		rows[len(rows)-1].eject = "-"
	})
	t.Run("routing/topic mismatch", func(t *testing.T) {
		row := faultRow{group: "routing", fault: "topic mismatch", eject: "-"}
		infos, _ := startReplicas(t, pods, "--time-scale", "10")
		r := startRouter(t, infos, "--config", faultConfig(t, "not-the-engines-topic"))
		g := startLoad(t, func() string { return r.url }, workers)
		began := time.Now()
		// "recover" here is the time until the router reports the silence.
		row.recover = waitSeconds(began, 5*time.Second, func() bool {
			resp, err := http.Get(r.url + "/readyz")
			if err != nil {
				return false
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return strings.Contains(string(b), "published no KV events") && strings.Contains(string(b), "not-the-engines-topic") &&
				r.gauge(t, "llmd_router_pod_kv_events_silent") == pods
		})
		g.stop()
		g.tally(&row)
		if !strings.Contains(r.stderr.String(), "pod publishes no KV events") {
			t.Error("no warning logged for the silent pods")
		}
		row.recover = "reported in " + row.recover
		row.agreement = agreement(t, r, infos)
		add(row)
		if row.failedBefore > 0 {
			t.Errorf("%d requests failed before streaming", row.failedBefore)
		}
	})
}

// waitPortsFree waits up to 5 s until every port can be bound on 127.0.0.1.
func waitPortsFree(t *testing.T, ports ...string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		free := true
		for _, p := range ports {
			l, err := net.Listen("tcp", "127.0.0.1:"+p)
			if err != nil {
				free = false
				break
			}
			l.Close()
		}
		if free {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ports %v still in use 5 s after the engine died", ports)
		}
	}
}

// The sick-pod rows (issue 28): five pods, one of them sick for good from
// a moment into the run, under a steady load of streaming or
// non-streaming completions; the same run without the fault gives the
// baseline p99. Each row reports the requests that failed to the client,
// the p99 added to the baseline, and how long after the fault the sick pod
// still got new requests. The router runs with its defaults (a hung pod
// leaves after 3 scrapes at the 1 s scrape timeout), except frozen_after
// at 2 s (its default is 30 s, see config.DefaultFrozenAfter).

// podMode is what a pod's front does.
type podMode int32

const (
	frontHealthy podMode = iota
	frontHang            // accepts, never answers, /metrics included
	frontFrozen          // /metrics frozen with the swallowed requests running; requests swallowed
	front5xx             // 500 to every inference request; /metrics answers
)

// podFront is an in-process stand-in in front of a real simulated replica:
// healthy, it relays every request; sick, it behaves as the mode says, as
// a vLLM pod does when its engine wedges (a stuck collective blocks the API
// server too: hang), when its engine loop stops while the API server keeps
// serving the last stats (frozen), or when the engine core died and every
// request fails (5xx). It records when each inference request arrived.
type podFront struct {
	*httptest.Server
	mode atomic.Int32
	held atomic.Int64
	page atomic.Pointer[[]byte]
	mu   sync.Mutex
	hits []time.Time
	quit chan struct{}
}

func newPodFront(t *testing.T, replica string) *podFront {
	u, err := url.Parse(replica)
	if err != nil {
		t.Fatal(err)
	}
	toReplica := relay(u, http.DefaultTransport)
	f := &podFront{quit: make(chan struct{})}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		metricsPath := r.URL.Path == "/metrics"
		if !metricsPath {
			f.mu.Lock()
			f.hits = append(f.hits, time.Now())
			f.mu.Unlock()
		}
		hold := func() {
			select {
			case <-r.Context().Done():
			case <-f.quit:
			}
		}
		switch podMode(f.mode.Load()) {
		case frontHang:
			hold()
			return
		case frontFrozen:
			if metricsPath {
				_, _ = w.Write(f.frozenPage())
				return
			}
			f.held.Add(1)
			hold()
			f.held.Add(-1)
			return
		case front5xx:
			if !metricsPath {
				_, _ = io.Copy(io.Discard, r.Body)
				http.Error(w, "engine core died", http.StatusInternalServerError)
				return
			}
		}
		if metricsPath {
			// Fetched plain (the client undoes the exporter's gzip), so
			// the frozen mode can serve it as it was.
			resp, err := http.Get(replica + "/metrics")
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusOK {
				http.Error(w, fmt.Sprintf("status %d, %v", resp.StatusCode, err), http.StatusBadGateway)
				return
			}
			f.page.Store(&b)
			_, _ = w.Write(b)
			return
		}
		toReplica.ServeHTTP(w, r)
	}))
	t.Cleanup(func() { close(f.quit); f.Close() })
	return f
}

// frozenPage is the last page relayed with vllm:num_requests_running set
// to the requests the front swallowed: the engine holds them, its token
// counters no longer move.
func (f *podFront) frozenPage() []byte {
	p := f.page.Load()
	if p == nil {
		return nil
	}
	var b strings.Builder
	for _, line := range strings.SplitAfter(string(*p), "\n") {
		if strings.HasPrefix(line, "vllm:num_requests_running") {
			name := line[:strings.LastIndexByte(strings.TrimRight(line, "\n"), ' ')]
			line = fmt.Sprintf("%s %d\n", name, f.held.Load())
		}
		b.WriteString(line)
	}
	return []byte(b.String())
}

// lastHitAfter is the time of the last inference request after t0, or zero.
func (f *podFront) lastHitAfter(t0 time.Time) (last time.Time, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, h := range f.hits {
		if h.After(t0) {
			last, n = h, n+1
		}
	}
	return last, n
}

// sickLoad is one bounded run: workers send completions (streaming when
// stream says so for the request number) until the deadline, recording
// each request's end-to-end latency and failure.
type sickLoad struct {
	mu        sync.Mutex
	latencies []time.Duration
	failed    []string
	brokeMid  int
	done      int
	// reached is closed once after requests completed (0: never).
	after   int
	reached chan struct{}
}

func newSickLoad(after int) *sickLoad { return &sickLoad{after: after, reached: make(chan struct{})} }

// ask sends one completion and reads it whole: a stream to [DONE], a
// non-streaming answer as JSON with choices. midStream says a failed
// stream had begun (200 and its headers) before it broke.
func ask(ctx context.Context, client *http.Client, base string, body []byte, streaming bool) (midStream bool, err error) {
	if streaming {
		o := stream(ctx, client, base, body)
		return o.started && o.status == http.StatusOK, o.err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return false, err
	}
	if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"choices"`)) {
		return false, fmt.Errorf("status %d: %s", resp.StatusCode, tail(string(b), 300))
	}
	return false, nil
}

func (l *sickLoad) run(t *testing.T, base func() string, workers int, until time.Time, streaming func(n int64) bool) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var sent atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for time.Now().Before(until) {
				n := sent.Add(1)
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				began := time.Now()
				mid, err := ask(ctx, client, base(), completion(t, faultPrompt(n), 16, streaming(n)), streaming(n))
				cancel()
				l.mu.Lock()
				l.latencies = append(l.latencies, time.Since(began))
				switch {
				case err != nil && mid:
					l.brokeMid++
				case err != nil:
					l.failed = append(l.failed, err.Error())
				}
				if l.done++; l.done == l.after {
					close(l.reached)
				}
				l.mu.Unlock()
				if err != nil && !mid {
					// As a client would: no tight loop on a refusal.
					time.Sleep(100 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
}

func (l *sickLoad) completed() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done
}

// waitCompleted waits until n requests completed (at most 10 s).
func (l *sickLoad) waitCompleted(n int) {
	for deadline := time.Now().Add(10 * time.Second); l.completed() < n && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
}

func (l *sickLoad) p99() time.Duration {
	s := slices.Clone(l.latencies)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[(len(s)*99)/100]
}

// sickConfig is the router config of the sick-pod rows: defaults, but
// frozen_after 2 s so that the frozen row fits a short run.
func sickConfig(t *testing.T) string {
	t.Helper()
	files := testenv.Tokenizer(t, "qwen3")
	yaml := fmt.Sprintf("model: %s\nblock_size: 16\ntokenizer: {json: %q, config: %q}\ndiscovery:\n  static: [{name: replaced-by-pods-file, ip: 127.0.0.1}]\n  topic: \"kv@\"\nmetrics: {frozen_after: 2s}\n",
		simModelName, files.TokenizerJSON, files.TokenizerConfig)
	path := filepath.Join(t.TempDir(), "router.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// sickRow is one line of the sick-pod table.
type sickRow struct {
	fault                      string
	requests, failed, brokeMid int
	baseP99, addedP99          time.Duration
	// lastNew is when the sick pod got its last new request after the
	// fault (-1: none).
	lastNew      time.Duration
	sickRequests string
}

// TestFaultSuiteSickPods runs the sick-pod rows and prints their table.
// Each row: five replica processes behind fronts, one router, a 4 s
// baseline run, then a 5 s run with the fault injected once 16 requests
// of it completed. The rollout row differs: the router is the product's
// two-replica Deployment on the local control plane over three vLLM pods,
// the client follows its Service's EndpointSlices, the faulted run holds a
// scoring change rolling both replicas, and its last column is the
// time from an old router pod's deletion to the last new request sent to
// it (rollout_test.go).
func TestFaultSuiteSickPods(t *testing.T) {
	var rows []sickRow
	t.Cleanup(func() {
		var b strings.Builder
		fmt.Fprintf(&b, "\n%-36s %8s %7s %9s %12s %10s  %s\n", "fault", "requests", "failed", "broke mid", "baseline p99", "added p99",
			"sick pod's last new request after the fault (new requests it got)")
		for _, r := range rows {
			last := "none"
			if r.lastNew >= 0 {
				last = fmt.Sprintf("%.2fs", r.lastNew.Seconds())
			}
			fmt.Fprintf(&b, "%-36s %8d %7d %9d %11.2fs %9.2fs  %s (%s)\n", r.fault, r.requests, r.failed, r.brokeMid, r.baseP99.Seconds(),
				r.addedP99.Seconds(), last, r.sickRequests)
		}
		t.Log(b.String())
	})
	const pods, workers = 5, 8
	const baseRun, faultRun = 4 * time.Second, 5 * time.Second
	type setup struct {
		fronts []*podFront
		procs  []*proc
		r      *router
		// url is where the client sends each request (default: r's).
		url              func() string
		podsFile, config string
		// lastNew, when set, gives the last column instead of the
		// fronts of the sick pods.
		lastNew func() (time.Duration, string)
	}
	// build starts the replicas (the first at slowScale when set: its
	// own process), a front on each, and a router over the fronts.
	build := func(t *testing.T, slowScale string) setup {
		var s setup
		infos, procs := startReplicas(t, pods, "--time-scale", "10")
		if slowScale != "" {
			slow, slowProcs := startReplicas(t, 1, "--time-scale", slowScale)
			infos[0], procs[0] = slow[0], slowProcs[0]
			infos[0].Pod = "sim-0"
		}
		routed := slices.Clone(infos)
		for i := range routed {
			f := newPodFront(t, infos[i].HTTP)
			s.fronts = append(s.fronts, f)
			routed[i].HTTP = f.URL
		}
		s.procs = procs
		s.podsFile, s.config = podsFile(t, routed), sickConfig(t)
		s.r = startServe(t, pods, "--pods-file", s.podsFile, "--config", s.config)
		s.url = func() string { return s.r.url }
		return s
	}
	// row runs the baseline and the faulted run; inject starts the fault
	// and returns the pods that count as sick.
	row := func(t *testing.T, fault string, s setup, streaming func(int64) bool, inject func(l *sickLoad) []int) sickRow {
		url := s.url
		base := newSickLoad(0)
		base.run(t, url, workers, time.Now().Add(baseRun), streaming)
		l := newSickLoad(16)
		var faulted time.Time
		var sick []int
		injected := make(chan struct{})
		go func() {
			defer close(injected)
			<-l.reached
			faulted = time.Now()
			sick = inject(l)
		}()
		l.run(t, url, workers, time.Now().Add(faultRun), streaming)
		select {
		case <-injected:
		default:
			t.Fatalf("%s: fewer than 16 requests completed in %s", fault, faultRun)
		}
		r := sickRow{fault: fault, requests: len(l.latencies), failed: len(l.failed), brokeMid: l.brokeMid,
			baseP99: base.p99(), addedP99: l.p99() - base.p99(), lastNew: -1}
		var hits []string
		for _, i := range sick {
			at, n := s.fronts[i].lastHitAfter(faulted)
			hits = append(hits, fmt.Sprintf("sim-%d: %d", i, n))
			if !at.IsZero() {
				r.lastNew = max(r.lastNew, at.Sub(faulted))
			}
		}
		r.sickRequests = strings.Join(hits, ", ")
		if s.lastNew != nil {
			r.lastNew, r.sickRequests = s.lastNew()
		}
		for i, f := range l.failed {
			if i < 3 {
				t.Logf("%s: failed: %s", fault, f)
			}
		}
		rows = append(rows, r)
		return r
	}
	always := func(int64) bool { return true }
	never := func(int64) bool { return false }
	half := func(n int64) bool { return n%2 == 0 }

	for _, c := range []struct {
		name      string
		streaming func(int64) bool
	}{{"non-streaming", never}, {"streaming", always}} {
		t.Run("hang forever and 5xx forever, "+c.name, func(t *testing.T) {
			s := build(t, "")
			r := row(t, "hang + 5xx forever, "+c.name, s, c.streaming, func(*sickLoad) []int {
				s.fronts[0].mode.Store(int32(frontHang))
				s.fronts[1].mode.Store(int32(front5xx))
				return []int{0}
			})
			if r.failed+r.brokeMid > 0 {
				t.Errorf("%d requests failed, %d broke mid-stream", r.failed, r.brokeMid)
			}
			if r.lastNew > 5*time.Second {
				t.Errorf("the hung pod got a new request %s after it stopped answering", r.lastNew)
			}
		})
	}
	t.Run("frozen counters", func(t *testing.T) {
		s := build(t, "")
		if r := row(t, "frozen counters, mixed", s, half, func(*sickLoad) []int {
			s.fronts[0].mode.Store(int32(frontFrozen))
			return []int{0}
		}); r.failed+r.brokeMid > 0 {
			t.Errorf("%d requests failed, %d broke mid-stream", r.failed, r.brokeMid)
		}
	})
	t.Run("5xx forever", func(t *testing.T) {
		s := build(t, "")
		if r := row(t, "5xx forever, mixed", s, half, func(*sickLoad) []int {
			s.fronts[0].mode.Store(int32(front5xx))
			return []int{0}
		}); r.failed+r.brokeMid > 0 {
			t.Errorf("%d requests failed, %d broke mid-stream", r.failed, r.brokeMid)
		}
	})
	t.Run("slow but healthy", func(t *testing.T) {
		s := build(t, "1")
		r := row(t, "slow but healthy (10x TPOT), mixed", s, half, func(*sickLoad) []int { return []int{0} })
		if r.failed+r.brokeMid > 0 {
			t.Errorf("%d requests failed, %d broke mid-stream", r.failed, r.brokeMid)
		}
		if n := s.r.gauge(t, "llmd_router_pod_out_of_service", "pod", "sim-0"); n > 0 {
			t.Errorf("the slow pod was ejected")
		}
		if _, n := s.fronts[0].lastHitAfter(time.Now().Add(-faultRun)); n == 0 {
			t.Error("the slow pod got no request during the run")
		}
	})
	t.Run("SIGKILL", func(t *testing.T) {
		s := build(t, "")
		if r := row(t, "SIGKILL, mixed", s, half, func(*sickLoad) []int {
			_ = s.procs[0].cmd.Process.Signal(syscall.SIGKILL)
			return []int{0}
		}); r.failed > 0 {
			t.Errorf("%d requests failed before streaming", r.failed)
		}
	})
	t.Run("router rollout under load", func(t *testing.T) {
		// The product's two-replica Deployment on the local control plane,
		// rolled by a scoring change while the client sends each request to
		// a ready endpoint of the Service's EndpointSlices (rollout_test.go).
		ro := startRouterRollout(t, workers)
		s := setup{url: ro.endpoints.pick, lastNew: ro.lastNew}
		r := row(t, "router rollout (2 replicas), mixed", s, half, func(l *sickLoad) []int {
			ro.roll(t, l)
			return nil
		})
		loadEnd := time.Now()
		if r.failed+r.brokeMid > 0 {
			t.Errorf("%d requests failed, %d broke mid-stream", r.failed, r.brokeMid)
		}
		ro.check(t, loadEnd)
	})
}
