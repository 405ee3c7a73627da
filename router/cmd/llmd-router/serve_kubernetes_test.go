package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// TestServeKubernetesDiscovery runs the router as it runs in a cluster: it
// finds the vLLM pods by label selector through a real API server (kwok
// makes them Ready on fake GPU nodes), reaches each at its pod IP on the
// configured ports, where a simulated replica listens, and stops routing to
// a pod once it is deleted.
func TestServeKubernetesDiscovery(t *testing.T) {
	c := testenv.StartCluster(t)
	testenv.ServePodIPs(t)
	c.AddGPUNodes(t, testenv.GPUNodeSpec{Prefix: "serve", Count: 2, GPUs: 1})
	ns := c.Namespace(t)
	pods := c.Client.CoreV1().Pods(ns)
	ctx := context.Background()
	ips := kwokVLLMPods(t, c, ns, 2)
	// Each replica serves on its pod's IP at vLLM's and the config's
	// default ports (HTTP 8000, KV events 5557, replay 5558).
	for _, ip := range ips {
		var info []struct{ Pod string }
		start(t, "", 1, &info, "sim", "--host", ip, "--port", "8000", "--kv-port", "5557", "--time-scale", "20")
	}
	cfgPath := filepath.Join(t.TempDir(), "router.yaml")
	if err := os.WriteFile(cfgPath, []byte("model: "+simModelName+"\ndiscovery:\n  kubernetes: {namespace: "+ns+", selector: app=vllm}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startServe(t, 2, "--config", cfgPath, "--kubeconfig", c.Kubeconfig)
	waitFor(t, "every pod scraped and followed", func() bool { return r.gauge(t, "llmd_router_kv_event_endpoints") == 2 })

	send := func() string {
		t.Helper()
		resp := post(t, r.url+"/v1/completions", completion(t, tokens(20, 5), 2, false))
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d from %s", resp.StatusCode, resp.Header.Get("X-Llmd-Pod"))
		}
		return resp.Header.Get("X-Llmd-Pod")
	}
	seen := map[string]bool{}
	for range 20 {
		seen[send()] = true
	}
	for pod := range seen {
		if _, ok := ips[pod]; !ok {
			t.Fatalf("answers came from %v, not only from the cluster's pods", seen)
		}
	}

	if err := pods.Delete(ctx, "vllm-1", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	waitFor(t, "the router to drop the deleted pod", func() bool { return r.gauge(t, "llmd_router_pods") == 1 })
	t.Logf("deleted pod left the router's view %v after the delete call", time.Since(deleted).Round(time.Millisecond))
	for range 10 {
		if pod := send(); pod != "vllm-0" {
			t.Fatalf("request routed to %s after it was deleted", pod)
		}
	}
}

// TestServeNotReadyBeforeDiscoverySyncs points the router at an API server
// that does not answer: it must serve (so probes reach it) but report
// not ready, and refuse requests with 503 while it knows no pod.
func TestServeNotReadyBeforeDiscoverySyncs(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: gone, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: gone, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "router.yaml")
	if err := os.WriteFile(cfgPath, []byte("model: m\ndiscovery:\n  kubernetes: {namespace: llm, selector: app=vllm}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var ann []struct{ Listen string }
	p := start(t, "", 1, &ann, "serve", "--listen", "127.0.0.1:0", "--config", cfgPath, "--kubeconfig", kubeconfig)
	url := "http://" + ann[0].Listen
	for _, c := range []struct {
		path string
		want int
	}{{"/healthz", http.StatusOK}, {"/readyz", http.StatusServiceUnavailable}} {
		resp, err := http.Get(url + c.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d, want %d", c.path, resp.StatusCode, c.want)
		}
	}
	resp := post(t, url+"/v1/completions", completion(t, tokens(20, 1), 2, false))
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("completion with no pod: %d %s", resp.StatusCode, b)
	}
	select {
	case <-p.done:
		t.Fatalf("router exited while the API server was unreachable: %v\n%s", p.err, p.stderr.String())
	default:
	}
}
