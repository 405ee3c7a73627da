package discovery_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/discovery"
	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// gpuPod is a vLLM-like pod asking for one GPU, as the fleet's pods do.
func gpuPod(name, app string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Tolerations: []corev1.Toleration{{Key: testenv.GPUTaint.Key, Operator: corev1.TolerationOpEqual,
				Value: testenv.GPUTaint.Value, Effect: testenv.GPUTaint.Effect}},
			Containers: []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai:v0.11.0",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}},
		},
	}
}

func names(pods []scoring.Pod) string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return strings.Join(out, ",")
}

// waitView waits until the fleet lists exactly want and returns how long
// that took from since.
func waitView(t *testing.T, f *discovery.Fleet, want string, since time.Time, limit time.Duration) time.Duration {
	t.Helper()
	for {
		if got := names(f.Pods(nil)); got == want {
			return time.Since(since)
		}
		if time.Since(since) > limit {
			t.Fatalf("after %s the router sees [%s], want [%s]", limit, names(f.Pods(nil)), want)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// waitAPIReady waits until the API server reports the pod Running and
// Ready with an IP (kwok's doing), and returns when it first saw that (up
// to one 5 ms poll after the API server recorded it).
func waitAPIReady(t *testing.T, c *testenv.Cluster, ns, name string) time.Time {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		p, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					return time.Now()
				}
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("pod %s never became Ready", name)
	return time.Time{}
}

// setReady patches the pod's Ready condition on the status subresource
// (kwok does not flip it back for a Running pod) and returns when the patch
// was sent.
func setReady(t *testing.T, c *testenv.Cluster, ns, name string, ready corev1.ConditionStatus) time.Time {
	t.Helper()
	patch := `{"status":{"conditions":[{"type":"Ready","status":"` + string(ready) + `"}]}}`
	at := time.Now()
	if _, err := c.Client.CoreV1().Pods(ns).Patch(context.Background(), name, types.StrategicMergePatchType,
		[]byte(patch), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatalf("patching %s Ready=%s: %v", name, ready, err)
	}
	return at
}

// TestKubernetesFollowsPods runs the Kubernetes source and a Fleet against a
// real control plane with kwok GPU nodes: pods that become Ready appear,
// readiness flips (patched on the status subresource, as a failing probe
// would) remove and restore a pod, deletion and relabelling remove it, and
// pods of other apps never appear. Each change must reach the router's view
// within a second of the API server recording it.
func TestKubernetesFollowsPods(t *testing.T) {
	c := testenv.StartCluster(t)
	c.AddGPUNodes(t, testenv.GPUNodeSpec{Prefix: "disc", Count: 4, GPUs: 1})
	ns := c.Namespace(t)
	ctx, cancel := context.WithCancel(context.Background())
	pods := c.Client.CoreV1().Pods(ns)
	create := func(name, app string) {
		t.Helper()
		if _, err := pods.Create(ctx, gpuPod(name, app), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("vllm-a", "vllm")
	create("vllm-b", "vllm")
	create("other", "web")
	for _, n := range []string{"vllm-a", "vllm-b", "other"} {
		waitAPIReady(t, c, ns, n)
	}

	var removedMu sync.Mutex
	var removed []string
	cfg := config.Config{Model: "m", Discovery: config.Discovery{Kubernetes: &config.Kubernetes{Namespace: ns, Selector: "app=vllm"}}}
	cfg.Default()
	cfg.Metrics.Timeout.Duration = 100 * time.Millisecond // nothing answers on kwok's pod IPs here
	cfg.Metrics.EjectAfterFailures = -1                   // so health must not take them out of the view under test
	f := discovery.NewFleet(discovery.FleetConfig{Addresses: discovery.Addresses{Discovery: cfg.Discovery, Model: cfg.Model},
		Metrics: cfg.Metrics, OnRemove: func(p string) { removedMu.Lock(); removed = append(removed, p); removedMu.Unlock() }})
	done := make(chan error, 1)
	go func() {
		done <- f.Run(ctx, &discovery.Kubernetes{Client: c.Client, Namespace: ns, Selector: "app=vllm"})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("fleet: %v", err)
		}
	})
	start := time.Now()
	waitView(t, f, "vllm-a,vllm-b", start, 10*time.Second)
	if !f.Synced() {
		t.Error("fleet lists pods but is not synced")
	}
	if p, ok := f.Target("vllm-a"); !ok || !strings.HasPrefix(p.HTTP, "http://10.") || !strings.HasSuffix(p.KVEvents, ":5557") ||
		p.Topic != "kv@"+p.IP+":8000@m" {
		t.Errorf("vllm-a target %+v", p)
	}

	var lat []time.Duration
	step := func(what, want string, at time.Time) {
		t.Helper()
		d := waitView(t, f, want, at, time.Second)
		t.Logf("%-28s seen after %s", what, d)
		lat = append(lat, d)
	}
	step("vllm-a not ready", "vllm-b", setReady(t, c, ns, "vllm-a", corev1.ConditionFalse))
	step("vllm-a ready again", "vllm-a,vllm-b", setReady(t, c, ns, "vllm-a", corev1.ConditionTrue))
	create("vllm-c", "vllm")
	step("vllm-c scheduled and ready", "vllm-a,vllm-b,vllm-c", waitAPIReady(t, c, ns, "vllm-c"))
	at := time.Now()
	if err := pods.Delete(ctx, "vllm-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	step("vllm-b deleted", "vllm-a,vllm-c", at)
	at = time.Now()
	if _, err := pods.Patch(ctx, "vllm-c", types.MergePatchType, []byte(`{"metadata":{"labels":{"app":"moved"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	step("vllm-c relabelled", "vllm-a", at)
	// OnRemove runs after the pod has left the view, once its scraper has
	// stopped (up to one scrape timeout later), so wait for it.
	want := []string{"vllm-a", "vllm-b", "vllm-c"}
	var saw []string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		removedMu.Lock()
		saw = slices.Clone(removed)
		removedMu.Unlock()
		if len(saw) >= len(want) {
			break
		}
	}
	if !slices.Equal(saw, want) {
		t.Errorf("OnRemove saw %v, want %v", saw, want)
	}
	t.Logf("worst change-to-view latency %s", slices.Max(lat))
}
