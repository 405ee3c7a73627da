package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// TestServeDiscoversAtScale runs `llmd-router serve` against a real API
// server holding 256 Ready vLLM-like pods on kwok GPU nodes, each answered
// at its pod IP by a simulated replica (HTTP on 8000, KV events on 5557,
// replay on 5558), and measures, for fleets of 8, 64 and 256 of them, how
// long the router takes from its start to list every pod (watch), to
// complete a ZeroMQ handshake with every publisher (subscribe) and to route
// a first request; then that a repeated prompt is routed to the pod whose
// KV events said it holds it, and the router's CPU and memory. Each fleet
// size gets its own router process over the same pods, picked by label.
func TestServeDiscoversAtScale(t *testing.T) {
	const pods = 256
	sizes := []int{8, 64, pods}
	c := testenv.StartCluster(t)
	testenv.ServePodIPs(t)
	c.AddGPUNodes(t, testenv.GPUNodeSpec{Prefix: "scale", Count: pods / 8, GPUs: 8})
	ns := c.Namespace(t)

	created := time.Now()
	ips := scaledVLLMPods(t, c, ns, pods, sizes)
	t.Logf("%d pods created and Running with an IP in %s", pods, time.Since(created).Round(time.Millisecond))
	startPodReplicas(t, ips)

	var rows []string
	for _, n := range sizes {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			rows = append(rows, discoverFleet(t, c, ns, n))
		})
	}
	t.Logf("pods | serving | watch: all listed | subscribe: all handshakes | first routed request | router CPU to first request | CPU per idle second | RSS | exit after SIGTERM\n%s",
		strings.Join(rows, "\n"))
}

// scaledVLLMPods creates n pods labelled app=vllm, each also labelled
// within-K=yes for every K in sizes that its index is below, and returns
// their IPs by name once all are Running.
func scaledVLLMPods(t *testing.T, c *testenv.Cluster, ns string, n int, sizes []int) map[string]string {
	t.Helper()
	pods := c.Client.CoreV1().Pods(ns)
	ctx := context.Background()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for w := range 8 { // the API server's inflight limit is far above 8 writers
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				labels := map[string]string{"app": "vllm"}
				for _, k := range sizes {
					if i < k {
						labels["within-"+strconv.Itoa(k)] = "yes"
					}
				}
				if _, err := pods.Create(ctx, vllmPod(fmt.Sprintf("vllm-%03d", i), labels), metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	ips := map[string]string{}
	deadline := time.Now().Add(2 * time.Minute)
	for len(ips) < n {
		list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "app=vllm"})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range list.Items {
			if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
				ips[p.Name] = p.Status.PodIP
			}
		}
		if len(ips) < n && time.Now().After(deadline) {
			t.Fatalf("%d of %d pods Running with an IP after 2 minutes", len(ips), n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return ips
}

// startPodReplicas serves one simulated replica on every pod IP, in this
// process, on vLLM's and the router config's default ports.
func startPodReplicas(t *testing.T, ips map[string]string) {
	t.Helper()
	for _, ip := range ips {
		f, err := sim.StartFleet(sim.FleetConfig{Replicas: 1, Host: ip, HTTPPort: 8000, KVPort: 5557,
			Replica: sim.ReplicaConfig{Model: simModelName, Engine: sim.DefaultEngineConfig(), TimeScale: 20}})
		if err != nil {
			t.Fatal(err)
		}
		stop := f.Start(context.Background())
		t.Cleanup(func() {
			if err := stop(); err != nil {
				t.Errorf("replica at %s: %v", ip, err)
			}
		})
	}
}

// discoverFleet starts a router over the first n pods and returns its row.
func discoverFleet(t *testing.T, c *testenv.Cluster, ns string, n int) string {
	cfgPath := filepath.Join(t.TempDir(), "router.yaml")
	if err := os.WriteFile(cfgPath, []byte("model: "+simModelName+"\nblock_size: 16\ndiscovery:\n  kubernetes: {namespace: "+ns+
		", selector: \"app=vllm,within-"+strconv.Itoa(n)+"=yes\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var ann []struct{ Listen string }
	binary(t) // built, and the tokenizer files found, before the clock starts
	files := testenv.Tokenizer(t, "qwen3")
	began := time.Now()
	p := start(t, "", 1, &ann, "serve", "--listen", "127.0.0.1:0", "--config", cfgPath, "--kubeconfig", c.Kubeconfig,
		"--tokenizer", files.TokenizerJSON, "--tokenizer-config", files.TokenizerConfig)
	announced := time.Since(began)
	r := &router{proc: p, url: "http://" + ann[0].Listen}
	pid := p.cmd.Process.Pid

	listed := waitSince(t, began, "every pod listed", func() bool { return r.gauge(t, "llmd_router_pods") == float64(n) })
	subscribed := waitSince(t, began, "a handshake with every publisher",
		func() bool { return r.gauge(t, "llmd_router_kv_event_connections_total") >= float64(n) })
	prompt := completion(t, tokens(512, uint32(n)), 4, false)
	first := routeOnce(t, r, prompt)
	routed := time.Since(began)
	cpuToFirst := procCPU(t, pid)

	// The prompt's blocks reach the index through the chosen pod's KV
	// events; the same prompt must then go to that pod.
	waitFor(t, "the first prompt's blocks indexed from "+first+"'s events", func() bool {
		e := explain(t, r.url, prompt)
		hit := e.Scores[e.Chosen].Hit
		return e.Pod == first && hit.GPUBlocks == 512/16 && hit.Speculative == 0
	})
	for range 4 {
		if again := routeOnce(t, r, prompt); again != first {
			t.Fatalf("a prompt %s holds went to %s", first, again)
		}
	}

	idleFrom, idleCPU := time.Now(), procCPU(t, pid)
	time.Sleep(3 * time.Second) // an idle window to measure scraping and polling cost, not a wait for a condition
	perSecond := (procCPU(t, pid) - idleCPU).Seconds() / time.Since(idleFrom).Seconds()
	rss := processRSS(t, pid)

	// SIGTERM with every pod followed: the router lets go of all of them
	// at once (one poll interval), well inside a pod's grace period.
	stopping := time.Now()
	if err := r.stop(t, syscall.SIGTERM, 10*time.Second); err != nil {
		t.Errorf("router exited with %v after SIGTERM", err)
	}
	stopped := time.Since(stopping)
	return fmt.Sprintf("%d | %s | %s | %s | %s | %.2f s | %.3f | %d MiB | %s", n, announced.Round(time.Millisecond),
		listed.Round(time.Millisecond), subscribed.Round(time.Millisecond), routed.Round(time.Millisecond),
		cpuToFirst.Seconds(), perSecond, rss>>20, stopped.Round(time.Millisecond))
}

// waitSince polls cond every 5 ms for up to a minute and returns the time
// from began to the first poll that saw it hold.
func waitSince(t *testing.T, began time.Time, what string, cond func() bool) time.Duration {
	t.Helper()
	for !cond() {
		if time.Since(began) > time.Minute {
			t.Fatalf("no %s after a minute", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return time.Since(began)
}

// routeOnce sends one completion through the router and returns the pod
// that answered it.
func routeOnce(t *testing.T, r *router, body []byte) string {
	t.Helper()
	resp := post(t, r.url+"/v1/completions", body)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d from %s", resp.StatusCode, resp.Header.Get("X-Llmd-Pod"))
	}
	return resp.Header.Get("X-Llmd-Pod")
}

// processRSS is a process's resident set in bytes, from /proc.
func processRSS(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc status")
	return 0
}
