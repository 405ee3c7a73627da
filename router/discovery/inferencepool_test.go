package discovery_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/router/discovery"
)

// pool is an InferencePool manifest selecting app and serving on ports.
func pool(ns, name, app string, ports ...int) *unstructured.Unstructured {
	tp := make([]any, len(ports))
	for i, p := range ports {
		tp[i] = map[string]any{"number": int64(p)}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "inference.networking.k8s.io/v1", "kind": "InferencePool",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": app}}, "targetPorts": tp,
			"endpointPickerRef": map[string]any{"name": "router-epp", "port": map[string]any{"number": int64(9002)}, "failureMode": "FailOpen"}},
	}}
}

// recorder keeps a source's last report as "name=http,...".
type recorder struct {
	mu   sync.Mutex
	last string
}

func (r *recorder) report(pods []discovery.Pod) {
	var parts []string
	for _, p := range pods {
		parts = append(parts, p.Name+"="+strings.TrimPrefix(p.HTTP, "http://"))
	}
	r.mu.Lock()
	r.last = strings.Join(parts, ",")
	r.mu.Unlock()
}

func (r *recorder) wait(t *testing.T, what string, want func(string) bool) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		got := r.last
		r.mu.Unlock()
		if want(got) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: the source reports [%s]", what, got)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestInferencePoolFollowsThePool runs the InferencePool source against a
// real control plane with the real CRD from the GIE module: without the
// CRD it fails naming it; with a pool, its selector's ready pods appear,
// one endpoint per target port; changing the ports or the selector and
// deleting the pool take effect.
func TestInferencePoolFollowsThePool(t *testing.T) {
	c := testenv.StartCluster(t)
	c.AddGPUNodes(t, testenv.GPUNodeSpec{Prefix: "pool", Count: 3, GPUs: 1})
	ns := c.Namespace(t)
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	src := &discovery.InferencePool{Client: c.Client, Dynamic: dyn, Namespace: ns, Name: "qwen"}

	err = src.Run(ctx, func([]discovery.Pod) { t.Error("reported without the CRD") })
	if err == nil || !strings.Contains(err.Error(), "inferencepools.inference.networking.k8s.io") {
		t.Fatalf("without the CRD: %v, want an error naming it", err)
	}

	c.InstallInferencePoolCRD(t)
	pods := c.Client.CoreV1().Pods(ns)
	for _, p := range []struct{ name, app string }{{"vllm-a", "vllm"}, {"vllm-b", "vllm"}, {"other", "web"}} {
		if _, err := pods.Create(ctx, gpuPod(p.name, p.app), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitAPIReady(t, c, ns, p.name)
	}
	ip := func(name string) string {
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p.Status.PodIP
	}
	a, b, o := ip("vllm-a"), ip("vllm-b"), ip("other")

	var rec recorder
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, rec.report) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("source: %v", err)
		}
	}()
	is := func(want string) func(string) bool { return func(got string) bool { return got == want } }
	rec.wait(t, "no pool yet", is(""))

	pools := dyn.Resource(discovery.InferencePoolResource).Namespace(ns)
	if _, err := pools.Create(ctx, pool(ns, "qwen", "vllm", 8000), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.wait(t, "the pool's pods", is(fmt.Sprintf("vllm-a=%s:8000,vllm-b=%s:8000", a, b)))

	update := func(u *unstructured.Unstructured) {
		t.Helper()
		cur, err := pools.Get(ctx, "qwen", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u.SetResourceVersion(cur.GetResourceVersion())
		if _, err := pools.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update(pool(ns, "qwen", "vllm", 8000, 8001))
	rec.wait(t, "one endpoint per target port", is(fmt.Sprintf("vllm-a:8000=%s:8000,vllm-a:8001=%s:8001,vllm-b:8000=%s:8000,vllm-b:8001=%s:8001", a, a, b, b)))
	update(pool(ns, "qwen", "web", 8000))
	rec.wait(t, "the new selector's pods", is(fmt.Sprintf("other=%s:8000", o)))
	setReady(t, c, ns, "other", "False")
	rec.wait(t, "a pod that is not ready leaves", is(""))
	setReady(t, c, ns, "other", "True")
	rec.wait(t, "and comes back", is(fmt.Sprintf("other=%s:8000", o)))
	if err := pools.Delete(ctx, "qwen", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	rec.wait(t, "the pool deleted", is(""))
}
