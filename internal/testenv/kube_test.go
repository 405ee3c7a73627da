package testenv

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// gpuDeployment is a Deployment of pods that each ask for one GPU and tolerate
// the GPU taint, rolling one at a time because every GPU may be taken.
func gpuDeployment(ns, name string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType, RollingUpdate: &appsv1.RollingUpdateDeployment{
				MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Tolerations: []corev1.Toleration{{Key: GPUTaint.Key, Operator: corev1.TolerationOpEqual, Value: GPUTaint.Value, Effect: GPUTaint.Effect}},
					Containers: []corev1.Container{{
						Name: "vllm", Image: "vllm/vllm-openai:v0.11.0",
						Ports:     []corev1.ContainerPort{{Name: "http", ContainerPort: 8000}},
						Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}},
					}},
				},
			},
		},
	}
}

// TestGPUDeploymentRollsOutOnFakeNodes proves the Kubernetes ground: on three
// fake one-GPU nodes the real scheduler places three GPU pods that kwok makes
// Ready, and a fourth replica stays Pending for lack of GPUs.
func TestGPUDeploymentRollsOutOnFakeNodes(t *testing.T) {
	c := StartCluster(t)
	t.Logf("control plane ready in %s", c.StartTime)
	c.AddGPUNodes(t, GPUNodeSpec{Prefix: "gpu-rollout", Count: 3, GPUs: 1})
	ns := c.Namespace(t)
	ctx := context.Background()
	deps := c.Client.AppsV1().Deployments(ns)
	if _, err := deps.Create(ctx, gpuDeployment(ns, "decode", 3), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "3 ready replicas", func() (bool, string) {
		d, err := deps.Get(ctx, "decode", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return d.Status.ReadyReplicas == 3, fmt.Sprintf("ready %d; %s", d.Status.ReadyReplicas, describePods(c, ns))
	})

	if _, err := deps.UpdateScale(ctx, "decode", &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "decode", Namespace: ns}, Spec: autoscalingv1.ScaleSpec{Replicas: 4}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "a Pending pod that fails to schedule for nvidia.com/gpu", func() (bool, string) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=decode"})
		if err != nil {
			return false, err.Error()
		}
		var running, pendingGPU int
		for _, p := range pods.Items {
			switch p.Status.Phase {
			case corev1.PodRunning:
				running++
			case corev1.PodPending:
				for _, cond := range p.Status.Conditions {
					if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && strings.Contains(cond.Message, "Insufficient nvidia.com/gpu") {
						pendingGPU++
					}
				}
			}
		}
		return running == 3 && pendingGPU == 1, fmt.Sprintf("running %d, pending for GPU %d of %d", running, pendingGPU, len(pods.Items))
	})
}

// TestProcessAnswersOnPodIP proves that a local process bound to a kwok pod's IP
// answers requests sent to that IP, found both from the pod and from its
// Service's EndpointSlice: the way simulated vLLM replicas stand in for pods.
func TestProcessAnswersOnPodIP(t *testing.T) {
	c := StartCluster(t)
	ServePodIPs(t)
	c.AddGPUNodes(t, GPUNodeSpec{Prefix: "gpu-podip", Count: 1, GPUs: 1})
	ns := c.Namespace(t)
	ctx := context.Background()
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, gpuDeployment(ns, "echo", 1), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Namespace: ns},
		Spec:       corev1.ServiceSpec{Selector: map[string]string{"app": "echo"}, Ports: []corev1.ServicePort{{Name: "http", Port: 8000, TargetPort: intstr.FromString("http")}}},
	}
	if _, err := c.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var podIP string
	waitFor(t, 60*time.Second, "a running pod with an IP", func() (bool, string) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=echo"})
		if err != nil || len(pods.Items) != 1 {
			return false, fmt.Sprint(err)
		}
		podIP = pods.Items[0].Status.PodIP
		return podIP != "", describePods(c, ns)
	})
	l, err := net.Listen("tcp", net.JoinHostPort(podIP, "8000"))
	if err != nil {
		t.Fatalf("listening on pod IP %s: %v", podIP, err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "served by %s", r.Host)
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })

	var endpoint string
	waitFor(t, 30*time.Second, "an EndpointSlice listing the pod", func() (bool, string) {
		slices, err := c.Client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=echo"})
		if err != nil {
			return false, err.Error()
		}
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if len(e.Addresses) > 0 && e.Conditions.Ready != nil && *e.Conditions.Ready && len(s.Ports) > 0 {
					endpoint = net.JoinHostPort(e.Addresses[0], fmt.Sprint(*s.Ports[0].Port))
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("%d slices", len(slices.Items))
	})
	for _, target := range []string{net.JoinHostPort(podIP, "8000"), endpoint} {
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + target + "/")
		if err != nil {
			t.Fatalf("GET %s: %v", target, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := "served by " + target; string(body) != want {
			t.Fatalf("GET %s answered %q, want %q", target, body, want)
		}
	}
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s; last state: %s", timeout, what, state)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// describePods summarises a namespace's pods and events for failure messages.
func describePods(c *Cluster, ns string) string {
	ctx := context.Background()
	var b strings.Builder
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "\n  pod %s node=%q phase=%s ip=%q", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.PodIP)
		for _, cond := range p.Status.Conditions {
			fmt.Fprintf(&b, " %s=%s(%s)", cond.Type, cond.Status, cond.Message)
		}
	}
	events, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, e := range events.Items {
			fmt.Fprintf(&b, "\n  event %s %s: %s", e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	return b.String()
}
