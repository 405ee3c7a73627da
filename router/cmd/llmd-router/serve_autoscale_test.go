package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"
	extmetrics "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	"k8s.io/utils/ptr"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/router/autoscale"
)

// TestServeAutoscalesTheFleet runs the fleet's autoscaling for real on the
// local control plane: the HPA in kube-controller-manager reads the
// router's demand through kube-apiserver's aggregation layer (an APIService
// for external.metrics.k8s.io backed by the router's metrics API on its
// pod's IP) and scales a Deployment of simulated vLLM pods, which kwok runs
// and a local process answers for at each pod's IP. The router scales the
// idle fleet to zero and back from zero for a request, which waits and is
// served.
func TestServeAutoscalesTheFleet(t *testing.T) {
	c := testenv.StartCluster(t)
	testenv.ServePodIPs(t)
	c.AddGPUNodes(t, testenv.GPUNodeSpec{Prefix: "auto", Count: 4, GPUs: 1})
	c.AddSystemNodes(t, "auto-sys", 1)
	ns := c.Namespace(t)
	ctx := context.Background()
	const target = 4 // requests per pod the HPA aims at

	// The fleet: a Deployment of one vLLM-like pod, played by simulators.
	tpl := vllmPod("", map[string]string{"app": "vllm", testenv.ProbedReadinessLabel: "probed"})
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "vllm"}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "vllm"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: tpl.ObjectMeta, Spec: tpl.Spec}}}
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	player := playSims(t, c, ns, "app=vllm")

	// The router's pod, for the APIService's Service to select; the router
	// process answers on its IP.
	routerIP := runningPodIP(t, c, ns, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "router", Labels: map[string]string{"app": "llmd-router"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "router", Image: "llmd-router"}}}})
	if _, err := c.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "router-metrics"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "llmd-router"},
			Ports: []corev1.ServicePort{{Name: "metrics-api", Port: 443, TargetPort: intstr.FromInt32(6443)}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(t.TempDir(), "router.yaml")
	cfg := fmt.Sprintf("model: %s\ndiscovery:\n  kubernetes: {namespace: %s, selector: app=vllm}\n"+
		"autoscaling: {metrics_listen: %q, deployment: vllm, scale_to_zero_after: 4s}\n", simModelName, ns, routerIP+":6443")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startServe(t, 1, "--config", cfgPath, "--kubeconfig", c.Kubeconfig, "--queue-timeout", "60s")

	// Only the API server's front proxy gets in.
	insecure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := insecure.Get("https://" + routerIP + ":6443/apis/external.metrics.k8s.io/v1beta1/namespaces/" + ns + "/" + autoscale.MetricDemand + "?labelSelector=app%3Dvllm")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a caller without the front proxy's certificate got %s: %s", resp.Status, body)
	}
	// With it, the caller the front proxy names must be allowed by the API
	// server (SubjectAccessReview): a user with no role is not.
	proxyCert, err := tls.LoadX509KeyPair(c.FrontProxyCert, c.FrontProxyKey)
	if err != nil {
		t.Fatal(err)
	}
	asProxy := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, Certificates: []tls.Certificate{proxyCert}}}}
	req, _ := http.NewRequest(http.MethodGet, "https://"+routerIP+":6443/apis/external.metrics.k8s.io/v1beta1/namespaces/"+ns+"/"+autoscale.MetricDemand+"?labelSelector=app%3Dvllm", nil)
	req.Header.Set("X-Remote-User", "nobody")
	req.Header.Add("X-Remote-Group", "system:authenticated")
	if resp, err = asProxy.Do(req); err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "nobody may not get") {
		t.Fatalf("user nobody through the front proxy got %s: %s", resp.Status, body)
	}

	registerMetricsAPI(t, c, ns)
	hpa := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Name: "vllm"}, Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
		ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "vllm"},
		MinReplicas:    ptr.To[int32](1), MaxReplicas: 4,
		Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
			Metric: autoscalingv2.MetricIdentifier{Name: autoscale.MetricDemand, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "vllm"}}},
			Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: resource.NewQuantity(target, resource.DecimalSI)}}}},
		Behavior: &autoscalingv2.HorizontalPodAutoscalerBehavior{ScaleDown: &autoscalingv2.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)}},
	}}
	if _, err := c.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// A load of 12 clients, each sending its next request as its last
	// ends: the HPA wants about 12 / 4 = 3 pods.
	load := func(clients int) *testenv.ClosedLoop {
		return testenv.StartClosedLoop(t, clients, func(w int, i uint32) error {
			status, err := testenv.PostCompletion(r.url, completion(t, tokens(64, uint32(w)*1000+i), 96, false))
			if err == nil && status != http.StatusOK {
				err = fmt.Errorf("status %d", status)
			}
			return err
		})
	}
	heavy := load(12)
	began := time.Now()
	eventually(t, "the HPA to scale the fleet to 3 pods on the router's demand", 90*time.Second, func() bool {
		return player.Serving() == 3 && r.gauge(t, "llmd_router_pods") == 3
	})
	t.Logf("1 -> 3 pods serving, routed to, in %s", time.Since(began).Round(time.Millisecond))
	h, err := c.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "vllm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Status.CurrentMetrics) == 0 || h.Status.CurrentMetrics[0].External == nil {
		t.Fatalf("the HPA reports no external metric: %+v", h.Status)
	}
	t.Logf("the HPA read %s = %s per pod", autoscale.MetricDemand, h.Status.CurrentMetrics[0].External.Current.AverageValue)
	// The router's work, through the aggregation layer as an HPA on it
	// reads it: each request placed counts its uncached prompt tokens (at
	// most its 64) and its 96 tokens of output, over the last minute.
	var work extmetrics.ExternalMetricValueList
	if err := c.Client.CoreV1().RESTClient().Get().AbsPath("/apis/external.metrics.k8s.io/v1beta1/namespaces", ns, autoscale.MetricWork).
		Param("labelSelector", "app=vllm").Do(ctx).Into(&work); err != nil {
		t.Fatalf("reading %s through the API server: %v", autoscale.MetricWork, err)
	}
	if sent := heavy.Sent.Load(); len(work.Items) != 1 || work.Items[0].Value.Value() <= 0 || work.Items[0].Value.Value() > (64+96)*sent/60+1 {
		t.Fatalf("%s = %+v after %d requests: want one value in (0, %d]", autoscale.MetricWork, work.Items, sent, (64+96)*sent/60+1)
	}
	t.Logf("%s = %s tokens/s", autoscale.MetricWork, &work.Items[0].Value)

	// Scale-in under a lighter load: 2 requests open want 1 pod; the
	// requests open on the pods that go are not cut.
	light := load(2)
	heavy.Stop()
	began = time.Now()
	eventually(t, "the HPA to scale the fleet in to 1 pod", 90*time.Second, func() bool {
		return r.gauge(t, "llmd_router_pods") == 1 && deploymentReplicas(t, c, ns) == 1
	})
	t.Logf("3 -> 1 pod in %s under 2 open requests", time.Since(began).Round(time.Millisecond))
	light.Stop()
	for _, l := range []*testenv.ClosedLoop{heavy, light} {
		if n := l.Failed.Load(); n > 0 {
			t.Fatalf("%d of %d requests failed while the fleet scaled out and in: %v", n, l.Sent.Load(), l.Failures())
		}
	}
	t.Logf("%d requests, none failed, through 1 -> 3 -> 1 pods", heavy.Sent.Load()+light.Sent.Load())

	// Idle: the router takes the fleet to zero; the HPA stands aside.
	began = time.Now()
	eventually(t, "the router to scale the idle fleet to zero", 60*time.Second, func() bool { return deploymentReplicas(t, c, ns) == 0 })
	t.Logf("scaled to zero %s after the load stopped (scale_to_zero_after 4s)", time.Since(began).Round(time.Millisecond))
	eventually(t, "the HPA to report scaling disabled at zero", 30*time.Second, func() bool {
		h, err := c.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "vllm", metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, cond := range h.Status.Conditions {
			if cond.Type == autoscalingv2.ScalingActive && cond.Status == corev1.ConditionFalse && cond.Reason == "ScalingDisabled" {
				return true
			}
		}
		return false
	})
	eventually(t, "the router to see no pod", 30*time.Second, func() bool { return r.gauge(t, "llmd_router_pods") == 0 })

	// A request at zero waits while the router wakes the fleet, and is served.
	began = time.Now()
	status, err := testenv.PostCompletion(r.url, completion(t, tokens(64, 99), 8, false))
	if err != nil || status != http.StatusOK {
		t.Fatalf("the first request after zero: %d %v", status, err)
	}
	t.Logf("the first request after zero served in %s (the pod's start on kwok and its simulator's)", time.Since(began).Round(time.Millisecond))
	if n := deploymentReplicas(t, c, ns); n != 1 {
		t.Errorf("the fleet has %d replicas after one request woke it, want 1", n)
	}
}

// eventually waits up to timeout for cond.
func eventually(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func deploymentReplicas(t *testing.T, c *testenv.Cluster, ns string) int32 {
	t.Helper()
	d, err := c.Client.AppsV1().Deployments(ns).Get(context.Background(), "vllm", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return *d.Spec.Replicas
}

// runningPodIP creates p and returns its IP once kwok runs it.
func runningPodIP(t *testing.T, c *testenv.Cluster, ns string, p *corev1.Pod) string {
	t.Helper()
	pods := c.Client.CoreV1().Pods(ns)
	if _, err := pods.Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var ip string
	eventually(t, "pod "+p.Name+" running", 30*time.Second, func() bool {
		got, err := pods.Get(context.Background(), p.Name, metav1.GetOptions{})
		if err == nil && got.Status.Phase == corev1.PodRunning {
			ip = got.Status.PodIP
		}
		return ip != ""
	})
	return ip
}

// registerMetricsAPI registers the router's metrics API with the
// aggregation layer, as llmd_prefix_router does, and waits for the API
// server to find it available.
func registerMetricsAPI(t *testing.T, c *testenv.Cluster, ns string) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	gvr := schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	name := autoscale.Version + "." + autoscale.Group
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"group": autoscale.Group, "version": autoscale.Version, "insecureSkipTLSVerify": true,
			"groupPriorityMinimum": int64(100), "versionPriority": int64(100),
			"service": map[string]any{"namespace": ns, "name": "router-metrics", "port": int64(443)}}}}
	if _, err := dyn.Resource(gvr).Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dyn.Resource(gvr).Delete(context.Background(), name, metav1.DeleteOptions{}) })
	eventually(t, "the APIService available", 60*time.Second, func() bool {
		got, err := dyn.Resource(gvr).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Available" && m["status"] == "True" {
				return true
			}
		}
		return false
	})
}

// playedSim is a simulated vLLM playing one fleet pod.
type playedSim struct {
	t *testing.T
	p *proc
}

func (s playedSim) Stop(kill bool) {
	sig := os.Signal(syscall.SIGTERM)
	if kill {
		sig = os.Kill
	}
	s.p.stop(s.t, sig, 10*time.Second)
}

// playSims runs a simulated vLLM at the IP of every pod selector chooses,
// on vLLM's default ports.
func playSims(t *testing.T, c *testenv.Cluster, ns, selector string) *testenv.FleetPlayer {
	return c.PlayFleet(t, ns, selector, func(p *corev1.Pod) testenv.PlayedProcess {
		var info []struct{ Pod string }
		return playedSim{t: t, p: start(t, "", 1, &info, "sim", "--host", p.Status.PodIP, "--port", "8000", "--kv-port", "5557", "--time-scale", "4")}
	})
}
