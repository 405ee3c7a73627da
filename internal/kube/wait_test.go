package kube

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	batchv1ac "k8s.io/client-go/applyconfigurations/batch/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// kubeletlessNode is a Node no kubelet (and no kwok) runs: pods bound to it
// by nodeName stay as the API server made them, so the test writes their
// status and events itself, as the kubelet would.
func kubeletlessNode(t *testing.T, c *testenv.Cluster, name string) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
}

// podOf waits until a pod with the label app=name exists and returns it.
func podOf(t *testing.T, c *testenv.Cluster, ns, selector string) corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) > 0 {
			return pods.Items[0]
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no pod %s in %s", selector, ns)
	return corev1.Pod{}
}

// kubeletWaiting writes the container state the kubelet writes for a
// container it cannot start (reason and message as the kubelet's).
func kubeletWaiting(t *testing.T, c *testenv.Cluster, p corev1.Pod, reason, message string) {
	t.Helper()
	ctx := context.Background()
	cur, err := c.Client.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Status.Phase = corev1.PodPending
	cur.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady"}}
	cur.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: cur.Spec.Containers[0].Name, Image: cur.Spec.Containers[0].Image,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: message}}}}
	if _, err := c.Client.CoreV1().Pods(p.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// kubeletEvent records an event series on the pod as the kubelet's
// recorder does: one event, count times between first and now.
func kubeletEvent(t *testing.T, c *testenv.Cluster, p corev1.Pod, reason, message string, count int32, span time.Duration) {
	t.Helper()
	now := time.Now()
	ev := &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: p.Name + "." + strings.ToLower(reason) + "." + now.Format("150405.000000"), Namespace: p.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: p.UID, APIVersion: "v1"},
		Reason:         reason, Message: message, Type: corev1.EventTypeWarning, Count: count,
		Source:         corev1.EventSource{Component: "kubelet", Host: p.Spec.NodeName},
		FirstTimestamp: metav1.NewTime(now.Add(-span)), LastTimestamp: metav1.NewTime(now)}
	if _, err := c.Client.CoreV1().Events(p.Namespace).Create(context.Background(), ev, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// kubeletlessGround is a client, the cluster, a namespace and a
// kubeletless node for the test.
func kubeletlessGround(t *testing.T) (kc *Client, c *testenv.Cluster, ns, node string) {
	t.Helper()
	kc, c = testClient(t)
	ns = c.Namespace(t)
	node = "kubeletless-" + ns
	kubeletlessNode(t, c, node)
	return kc, c, ns, node
}

// pullDeployment is a one-replica Deployment app=pull of image, its pod
// bound to node.
func pullDeployment(ns, node, image string) *appsv1ac.DeploymentApplyConfiguration {
	labels := map[string]string{"app": "pull"}
	return appsv1ac.Deployment("pull", ns).WithSpec(appsv1ac.DeploymentSpec().WithReplicas(1).
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
		WithTemplate(corev1ac.PodTemplateSpec().WithLabels(labels).WithSpec(corev1ac.PodSpec().WithNodeName(node).
			WithContainers(corev1ac.Container().WithName("vllm").WithImage(image)))))
}

// TestWaitImagePull: an image that does not exist fails the wait at once
// with containerd's words; a rate limit is waited out (the kubelet retries)
// while the wait quotes the registry, and fails with the registry's words
// once the kubelet has backed off for ImagePullGrace.
func TestWaitImagePull(t *testing.T) {
	kc, c, ns, node := kubeletlessGround(t)
	ctx := context.Background()
	dep := pullDeployment(ns, node, "docker.io/vllm/vllm-openai:v9.9.9")
	if err := kc.Apply(ctx, []Object{mustObject(t, dep)}, false); err != nil {
		t.Fatal(err)
	}
	pod := podOf(t, c, ns, "app=pull")
	wait := func(d time.Duration) error {
		wctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		return kc.WaitDeployment(wctx, ns, "pull")
	}

	const notFound = `failed to pull and unpack image "docker.io/vllm/vllm-openai:v9.9.9": failed to resolve reference "docker.io/vllm/vllm-openai:v9.9.9": docker.io/vllm/vllm-openai:v9.9.9: not found`
	kubeletWaiting(t, c, pod, "ErrImagePull", notFound)
	began := time.Now()
	err := wait(time.Minute)
	var rollout *RolloutError
	if !errors.As(err, &rollout) || rollout.Reason != "ImageNotFound" || !strings.Contains(err.Error(), "v9.9.9: not found") {
		t.Fatalf("missing image: %v", err)
	}
	t.Logf("a missing image failed the wait after %s", time.Since(began).Round(time.Millisecond))

	const limited = `failed to pull and unpack image "docker.io/vllm/vllm-openai:v0.30.0": failed to copy: httpReadSeeker: failed open: unexpected status code https://registry-1.docker.io/v2/vllm/vllm-openai/manifests/sha256:0000: 429 Too Many Requests - Server message: toomanyrequests: You have reached your unauthenticated pull rate limit`
	kubeletWaiting(t, c, pod, "ErrImagePull", limited)
	kubeletEvent(t, c, pod, "Failed", `Failed to pull image "docker.io/vllm/vllm-openai:v0.30.0": `+limited, 1, 0)
	err = wait(8 * time.Second)
	if !errors.As(err, &rollout) || rollout.Reason != "Timeout" || !strings.Contains(err.Error(), "toomanyrequests") {
		t.Fatalf("a first rate-limited pull: %v, want the wait to go on (a timeout here) quoting the registry", err)
	}

	kubeletWaiting(t, c, pod, "ImagePullBackOff", `Back-off pulling image "docker.io/vllm/vllm-openai:v0.30.0"`)
	kubeletEvent(t, c, pod, "BackOff", `Back-off pulling image "docker.io/vllm/vllm-openai:v0.30.0"`, 14, ImagePullGrace+time.Minute)
	err = wait(time.Minute)
	if !errors.As(err, &rollout) || rollout.Reason != "ImagePullBackOff" || !strings.Contains(err.Error(), "toomanyrequests: You have reached") {
		t.Fatalf("a pull backed off for longer than ImagePullGrace: %v", err)
	}
}

// TestWaitJobQuotesFailedMount: a Job pod whose volume does not mount (a
// wrong FSx mount name) shows the kubelet's FailedMount event in the wait's
// words, and fails the wait once the kubelet has failed for MountGrace.
func TestWaitJobQuotesFailedMount(t *testing.T) {
	kc, c, ns, node := kubeletlessGround(t)
	ctx := context.Background()
	job := batchv1ac.Job("stage", ns).WithSpec(batchv1ac.JobSpec().WithBackoffLimit(0).WithTemplate(corev1ac.PodTemplateSpec().
		WithSpec(corev1ac.PodSpec().WithNodeName(node).WithRestartPolicy(corev1.RestartPolicyNever).
			WithContainers(corev1ac.Container().WithName("stage").WithImage("vllm/vllm-openai:v0.30.0")))))
	if err := kc.Apply(ctx, []Object{mustObject(t, job)}, false); err != nil {
		t.Fatal(err)
	}
	pod := podOf(t, c, ns, "batch.kubernetes.io/job-name=stage")
	const mount = `MountVolume.SetUp failed for volume "llmd-qwen-weights" : rpc error: code = Internal desc = Could not mount "fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com@tcp:/wrongname" at "/var/lib/kubelet/pods/x/volumes/kubernetes.io~csi/llmd-qwen-weights/mount": mount failed: exit status 5`
	kubeletEvent(t, c, pod, "FailedMount", mount, 1, 0)
	wctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	err := kc.WaitJob(wctx, ns, "stage")
	var rollout *RolloutError
	if !errors.As(err, &rollout) || rollout.Reason != "Timeout" || !strings.Contains(err.Error(), "FailedMount: MountVolume.SetUp failed") {
		t.Fatalf("a fresh FailedMount: %v, want the wait to go on quoting it", err)
	}
	kubeletEvent(t, c, pod, "FailedMount", mount, 6, MountGrace+time.Minute)
	wctx2, cancel2 := context.WithTimeout(ctx, time.Minute)
	defer cancel2()
	err = kc.WaitJob(wctx2, ns, "stage")
	if !errors.As(err, &rollout) || rollout.Reason != "FailedMount" || !strings.Contains(err.Error(), "tcp:/wrongname") {
		t.Fatalf("a FailedMount for longer than MountGrace: %v", err)
	}
}

// stallAfterEvents stands between a client and the real API server: once
// a wait has read pod events (its first poll whole), every later read of
// the waited-for object hangs until its request's context ends, as on an
// API server too slow to answer within the wait's deadline. The deadline
// then falls in the middle of a poll.
type stallAfterEvents struct {
	rt     http.RoundTripper
	object string // path suffix of the waited-for object
	armed  atomic.Bool
}

func (s *stallAfterEvents) RoundTrip(r *http.Request) (*http.Response, error) {
	if s.armed.Load() && strings.HasSuffix(r.URL.Path, s.object) {
		<-r.Context().Done()
		return nil, r.Context().Err()
	}
	resp, err := s.rt.RoundTrip(r)
	if strings.HasSuffix(r.URL.Path, "/events") {
		s.armed.Store(true)
	}
	return resp, err
}

// stallingClient is a client of c whose reads of object stall after the
// first poll (stallAfterEvents).
func stallingClient(t *testing.T, c *testenv.Cluster, object string) *Client {
	t.Helper()
	cfg := c.RESTConfig()
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return &stallAfterEvents{rt: rt, object: object} }
	kc, err := NewClient(cfg, func(_ context.Context, msg string, fields map[string]any) { t.Logf("%s %v", msg, fields) })
	if err != nil {
		t.Fatal(err)
	}
	kc.Poll, kc.Progress = 100*time.Millisecond, time.Second
	return kc
}

// TestWaitCutShortQuotesTheLastPoll: when a wait's deadline falls in the
// middle of a poll (the API server slow to answer), the timeout still
// quotes what the poll before it saw, for a Job and for a Deployment.
func TestWaitCutShortQuotesTheLastPoll(t *testing.T) {
	kc, c, ns, node := kubeletlessGround(t)
	ctx := context.Background()
	spec := corev1ac.PodSpec().WithNodeName(node).WithRestartPolicy(corev1.RestartPolicyNever).
		WithContainers(corev1ac.Container().WithName("stage").WithImage("vllm/vllm-openai:v0.30.0"))
	job := batchv1ac.Job("stage", ns).WithSpec(batchv1ac.JobSpec().WithBackoffLimit(0).WithTemplate(corev1ac.PodTemplateSpec().WithSpec(spec)))
	dep := pullDeployment(ns, node, "docker.io/vllm/vllm-openai:v0.30.0")
	if err := kc.Apply(ctx, []Object{mustObject(t, job), mustObject(t, dep)}, false); err != nil {
		t.Fatal(err)
	}
	const mount = `MountVolume.SetUp failed for volume "llmd-qwen-weights" : mount failed: exit status 5`
	kubeletEvent(t, c, podOf(t, c, ns, "batch.kubernetes.io/job-name=stage"), "FailedMount", mount, 1, 0)
	const limited = `429 Too Many Requests - Server message: toomanyrequests: You have reached your unauthenticated pull rate limit`
	pod := podOf(t, c, ns, "app=pull")
	kubeletWaiting(t, c, pod, "ErrImagePull", limited)
	kubeletEvent(t, c, pod, "Failed", `Failed to pull image "docker.io/vllm/vllm-openai:v0.30.0": `+limited, 1, 0)

	for _, w := range []struct {
		object, quote string
		wait          func(*Client, context.Context) error
	}{
		{"/jobs/stage", "FailedMount: MountVolume.SetUp failed", func(kc *Client, ctx context.Context) error { return kc.WaitJob(ctx, ns, "stage") }},
		{"/deployments/pull", "toomanyrequests", func(kc *Client, ctx context.Context) error { return kc.WaitDeployment(ctx, ns, "pull") }},
	} {
		stalling := stallingClient(t, c, w.object)
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := w.wait(stalling, wctx)
		cancel()
		var rollout *RolloutError
		if !errors.As(err, &rollout) || rollout.Reason != "Timeout" || !strings.Contains(err.Error(), w.quote) {
			t.Errorf("%s: a deadline in the middle of a poll: %v, want a timeout quoting %q", w.object, err, w.quote)
		}
	}
}

// TestWaitServiceEndpoints: the wait passes over an endpoint that is not
// ready yet and returns once the EndpointSlice marks it ready (as the
// EndpointSlice controller does when the pod turns Ready); a Service with
// no ready endpoint fails at the bound naming the Service, and a Service
// that does not exist fails at once.
func TestWaitServiceEndpoints(t *testing.T) {
	kc, c := testClient(t)
	ns := c.Namespace(t)
	ctx := context.Background()
	// A Service without a selector: the test writes its EndpointSlice, as
	// the EndpointSlice controller would for a selector's pods.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "engines", Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8000)}}}}
	if _, err := c.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "engines-1", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: "engines"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8000)}},
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.7"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}}},
	}
	if _, err := c.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	turnedReady := make(chan struct{})
	defer func() { <-turnedReady }()
	go func() {
		defer close(turnedReady)
		time.Sleep(time.Second) // the pod turns Ready while the wait polls
		turned := slice.DeepCopy()
		turned.Endpoints[0].Conditions.Ready = ptr.To(true)
		if _, err := c.Client.DiscoveryV1().EndpointSlices(ns).Update(ctx, turned, metav1.UpdateOptions{}); err != nil {
			t.Error(err)
		}
	}()
	began := time.Now()
	addrs, err := kc.WaitServiceEndpoints(ctx, ns, "engines", 80, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 1 || addrs[0] != "10.0.0.7:8000" {
		t.Fatalf("endpoints = %v, want [10.0.0.7:8000]", addrs)
	}
	if time.Since(began) < time.Second {
		t.Fatalf("the wait returned after %s, before the endpoint turned ready", time.Since(began))
	}

	empty := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "empty", Namespace: ns},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := c.Client.CoreV1().Services(ns).Create(ctx, empty, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = kc.WaitServiceEndpoints(ctx, ns, "empty", 80, 500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "Service "+ns+"/empty had no ready endpoint on port 80 within 500ms") {
		t.Fatalf("err = %v, want the Service named with the bound", err)
	}

	began = time.Now()
	_, err = kc.WaitServiceEndpoints(ctx, ns, "missing", 80, time.Minute)
	if err == nil || !strings.Contains(err.Error(), "reading Service "+ns+"/missing") || time.Since(began) > 10*time.Second {
		t.Fatalf("err = %v after %s, want a prompt failure naming the Service", err, time.Since(began))
	}
}
