package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// BenchmarkServeAddedLatency measures what the router process adds to a
// stream: 512 concurrent streamed completions against 8 simulated replicas
// (one `llmd-router sim` process), first straight to the replicas (worker
// i always on replica i mod 8, keep-alive), then through `llmd-router
// serve`, and compares time to first token and to the end of the stream.
// The router is pinned to CPU 0, the simulator and this client to CPU 1,
// so the router's work does not steal the replicas' or the client's core.
// It also reports the router's CPU time per request, from the kernel's
// accounting of the router process (utime+stime, as getrusage reports
// them) over the routed phase.
//
//	go test -run '^$' -bench ServeAddedLatency -benchtime 1x ./router/cmd/llmd-router/
//
// The router scores with the in-flight scorer alone, which spreads requests
// evenly as the direct phase does, so the difference is the proxy's cost and
// not a routing choice; LLMD_BENCH_SCORER=default runs the default llm-d
// scorers instead (their scraped load lags 50 ms, so under a burst they
// herd requests onto one pod and the engines' queues show in the figures).
// LLMD_BENCH_CONCURRENCY (512), LLMD_BENCH_ROUNDS (requests per stream, 8),
// LLMD_BENCH_TIME_SCALE (simulator speed-up, 100) and LLMD_BENCH_MAX_TOKENS
// (16) change the load. LLMD_BENCH_PEERS=on runs the router beside an idle
// peer replica exchanging its decisions (package peers), =off the same
// router alone; both tokenize the prompts (the Qwen tokenizer files), so
// that decisions write the speculative entries the exchange shares.
// LLMD_BENCH_KV_RESERVE=N turns the KV bound on in both (--kv-output-reserve
// N, as the provider deploys it), so that peers also exchange every
// request's KV demand.
func BenchmarkServeAddedLatency(b *testing.B) {
	conc, rounds := envInt(b, "LLMD_BENCH_CONCURRENCY", 512), envInt(b, "LLMD_BENCH_ROUNDS", 8)
	maxTokens := envInt(b, "LLMD_BENCH_MAX_TOKENS", 16)
	timeScale := os.Getenv("LLMD_BENCH_TIME_SCALE")
	if timeScale == "" {
		timeScale = "100"
	}
	if out, err := exec.Command("taskset", "-a", "-p", "-c", "1", strconv.Itoa(os.Getpid())).CombinedOutput(); err != nil {
		b.Fatalf("pinning the client to CPU 1: %v: %s", err, out)
	}
	var infos []sim.ReplicaInfo
	start(b, "1", 8, &infos, "sim", "--replicas", "8", "--port", "0", "--kv-port", "0", "--time-scale", timeScale)
	var ann []struct{ Listen string }
	args := []string{"serve", "--listen", "127.0.0.1:0", "--pods-file", podsFile(b, infos), "--block-size", "16"}
	if scorer := os.Getenv("LLMD_BENCH_SCORER"); scorer != "default" {
		if scorer == "" {
			scorer = "in-flight"
		}
		path := filepath.Join(b.TempDir(), "router.yaml")
		// The file's static pod is a placeholder: --pods-file replaces it.
		yaml := "model: " + simModelName + "\ndiscovery: {static: [{name: x, ip: 127.0.0.1}]}\nscoring: {scorers: [{type: " + scorer + ", weight: 1}]}\n"
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			b.Fatal(err)
		}
		args = append(args, "--config", path)
	}
	switch peers := os.Getenv("LLMD_BENCH_PEERS"); peers {
	case "":
	case "off", "on":
		// Tokenized prompts, so that decisions write speculative entries.
		files := testenv.Tokenizer(b, "qwen3")
		args = append(args, "--tokenizer", files.TokenizerJSON, "--tokenizer-config", files.TokenizerConfig)
	default:
		b.Fatalf("LLMD_BENCH_PEERS=%q: want on or off", peers)
	}
	if reserve := os.Getenv("LLMD_BENCH_KV_RESERVE"); reserve != "" {
		args = append(args, "--kv-output-reserve", reserve)
	}
	if os.Getenv("LLMD_BENCH_PEERS") == "on" {
		// A peer replica, idle on CPU 1, follows the router's decisions and
		// is followed, as two replicas are deployed.
		addrs := peerAddrs(b, 2)
		peer := append(slices.Clone(args), "--peers-listen", addrs[1], "--peers", strings.Join(addrs, ","))
		var pann []struct{ Listen string }
		start(b, "1", 1, &pann, peer...)
		args = append(args, "--peers-listen", addrs[0], "--peers", strings.Join(addrs, ","))
	}
	rp := start(b, "0", 1, &ann, args...)
	routerURL := "http://" + ann[0].Listen
	for deadline := time.Now().Add(20 * time.Second); ; {
		if resp, err := http.Get(routerURL + "/readyz"); err == nil && resp.StatusCode == http.StatusOK {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("router not ready")
		}
		time.Sleep(50 * time.Millisecond)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: conc, MaxIdleConns: 2 * conc}}
	body := func(w, r int) []byte { return completion(b, tokens(64, uint32(w*1000+r)), maxTokens, true) }

	for range b.N {
		// Warm the connections and the engines, then measure.
		runPhase(b, client, conc, 1, func(w int) string { return infos[w%8].HTTP }, body)
		direct := runPhase(b, client, conc, rounds, func(w int) string { return infos[w%8].HTTP }, body)
		runPhase(b, client, conc, 1, func(int) string { return routerURL }, body)
		cpu0, m0 := procCPU(b, rp.cmd.Process.Pid), metrics(b, routerURL+"/metrics")
		routed := runPhase(b, client, conc, rounds, func(int) string { return routerURL }, body)
		cpu, m1 := procCPU(b, rp.cmd.Process.Pid)-cpu0, metrics(b, routerURL+"/metrics")
		own50, own99 := histQuantile(m0, m1, "llmd_router_overhead_seconds", 0.5), histQuantile(m0, m1, "llmd_router_overhead_seconds", 0.99)
		b.Logf("router's own share of TTFT (llmd_router_overhead_seconds): p50 %.3f ms p99 %.3f ms", own50*1e3, own99*1e3)
		b.ReportMetric(own50*1e3, "router-own-p50-ms")
		b.ReportMetric(own99*1e3, "router-own-p99-ms")

		n := float64(len(routed.ttft))
		for _, m := range []struct {
			name   string
			d, r   []time.Duration
			metric string
		}{{"TTFT", direct.ttft, routed.ttft, "ttft"}, {"end of stream", direct.e2e, routed.e2e, "e2e"}} {
			dp50, dp99, rp50, rp99 := pct(m.d, 50), pct(m.d, 99), pct(m.r, 50), pct(m.r, 99)
			b.Logf("%-13s direct p50 %8.3f ms p99 %8.3f ms | routed p50 %8.3f ms p99 %8.3f ms | added p50 %+.3f ms p99 %+.3f ms",
				m.name, ms(dp50), ms(dp99), ms(rp50), ms(rp99), ms(rp50-dp50), ms(rp99-dp99))
			b.ReportMetric(ms(rp50-dp50), m.metric+"-added-p50-ms")
			b.ReportMetric(ms(rp99-dp99), m.metric+"-added-p99-ms")
		}
		b.Logf("%d streams x %d rounds, %d tokens each: direct %d ok in %v, routed %d ok in %v; router CPU %.1f µs/request (%v over the routed phase)",
			conc, rounds, maxTokens, len(direct.ttft), direct.wall.Round(time.Millisecond), len(routed.ttft),
			routed.wall.Round(time.Millisecond), float64(cpu.Microseconds())/n, cpu)
		b.ReportMetric(float64(cpu.Microseconds())/n, "router-cpu-µs/req")
		if direct.failed+routed.failed > 0 {
			b.Errorf("%d direct and %d routed requests failed", direct.failed, routed.failed)
		}
	}
	b.StopTimer()
	if err := rp.stop(b, syscall.SIGTERM, 30*time.Second); err != nil {
		b.Errorf("router exit: %v", err)
	}
	if ru, ok := rp.cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		b.Logf("router process lifetime (wait4 rusage): user %v, system %v, max RSS %d KiB",
			time.Duration(syscall.TimevalToNsec(ru.Utime)), time.Duration(syscall.TimevalToNsec(ru.Stime)), ru.Maxrss)
	}
}

// phaseResult holds one phase's per-request timings.
type phaseResult struct {
	ttft, e2e []time.Duration
	failed    int
	wall      time.Duration
}

// runPhase keeps conc streams going, each sending rounds requests in turn
// to target(worker), and times each from sending to its first SSE event
// and to its end.
func runPhase(b *testing.B, client *http.Client, conc, rounds int, target func(int) string, body func(w, r int) []byte) phaseResult {
	var mu sync.Mutex
	var res phaseResult
	var wg sync.WaitGroup
	start := time.Now()
	for w := range conc {
		wg.Go(func() {
			for r := range rounds {
				ttft, e2e, err := timeStream(client, target(w), body(w, r))
				mu.Lock()
				if err != nil {
					if res.failed++; res.failed == 1 {
						b.Logf("first failure: %v", err)
					}
				} else {
					res.ttft, res.e2e = append(res.ttft, ttft), append(res.e2e, e2e)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	res.wall = time.Since(start)
	return res
}

func timeStream(client *http.Client, base string, body []byte) (ttft, e2e time.Duration, err error) {
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, base+"/v1/completions", bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	done := false
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		if ttft == 0 {
			ttft = time.Since(t0)
		}
		done = line == "data: [DONE]"
	}
	if err := sc.Err(); err != nil || !done {
		return 0, 0, fmt.Errorf("stream ended early (done %v): %v", done, err)
	}
	return ttft, time.Since(t0), nil
}

// procCPU is a process's user+system CPU time so far, from /proc (the
// kernel's per-process accounting that getrusage also reads).
func procCPU(b testing.TB, pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// Fields after the parenthesised command name; utime and stime are the
	// 14th and 15th fields overall, in clock ticks of 1/100 s on Linux.
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		b.Fatalf("%s: %v", name, err)
	}
	return n
}

// histQuantile estimates quantile q of the observations a histogram family
// gained between two scrapes, interpolating linearly inside the bucket, as
// PromQL's histogram_quantile does.
func histQuantile(before, after map[string]*dto.MetricFamily, name string, q float64) float64 {
	counts := func(fams map[string]*dto.MetricFamily) (bounds []float64, cum []float64) {
		for _, m := range fams[name].GetMetric() {
			for i, bk := range m.GetHistogram().GetBucket() {
				if i >= len(cum) {
					bounds, cum = append(bounds, bk.GetUpperBound()), append(cum, 0)
				}
				cum[i] += float64(bk.GetCumulativeCount())
			}
		}
		return bounds, cum
	}
	bounds, c1 := counts(after)
	_, c0 := counts(before)
	if len(c1) == 0 {
		return -1
	}
	delta := func(i int) float64 {
		if i < len(c0) {
			return c1[i] - c0[i]
		}
		return c1[i]
	}
	total := delta(len(c1) - 1)
	rank := q * total
	lower, below := 0.0, 0.0
	for i, ub := range bounds {
		if n := delta(i); n >= rank {
			if n == below {
				return ub
			}
			return lower + (ub-lower)*(rank-below)/(n-below)
		}
		lower, below = ub, delta(i)
	}
	return bounds[len(bounds)-1]
}
