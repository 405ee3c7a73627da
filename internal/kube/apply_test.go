package kube

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// testClient is a Client on the test binary's control plane, polling fast.
func testClient(t *testing.T) (*Client, *testenv.Cluster) {
	t.Helper()
	c := testenv.StartCluster(t)
	kc, err := NewClient(c.RESTConfig(), func(_ context.Context, msg string, fields map[string]any) { t.Logf("%s %v", msg, fields) })
	if err != nil {
		t.Fatal(err)
	}
	kc.Poll, kc.Progress = 100*time.Millisecond, time.Second
	return kc, c
}

func mustObject(t *testing.T, ac any) Object {
	t.Helper()
	o, err := FromApplyConfiguration(ac)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func gpuDeployment(ns, name string, replicas int32, image string) *appsv1ac.DeploymentApplyConfiguration {
	labels := map[string]string{"app": name}
	return appsv1ac.Deployment(name, ns).WithSpec(appsv1ac.DeploymentSpec().WithReplicas(replicas).
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(labels)).
		WithTemplate(corev1ac.PodTemplateSpec().WithLabels(labels).WithSpec(corev1ac.PodSpec().
			WithTolerations(corev1ac.Toleration().WithKey("nvidia.com/gpu").WithOperator(corev1.TolerationOpExists).WithEffect(corev1.TaintEffectNoSchedule)).
			WithContainers(corev1ac.Container().WithName("vllm").WithImage(image).WithArgs("--block-size", "64").
				WithResources(corev1ac.ResourceRequirements().WithLimits(corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}))))))
}

// TestApplyDriftConflictPrune walks an inventory through its life on a real
// API server: apply, no drift, a scale and an arg edit by another manager
// (drift naming the fields, and an apply refused with the manager's name
// until forced), a deleted object (drift: missing, then recreated), a prune,
// and a delete that leaves the namespace gone.
func TestApplyDriftConflictPrune(t *testing.T) {
	kc, c := testClient(t)
	c.AddGPUNodes(t, testenv.GPUNodeSpec{Prefix: "kube-apply", Count: 2, GPUs: 1})
	ctx := context.Background()
	const ns = "kube-apply"
	objs := []Object{
		mustObject(t, corev1ac.Namespace(ns)),
		mustObject(t, corev1ac.ConfigMap("settings", ns).WithData(map[string]string{"a": "1"})),
		mustObject(t, gpuDeployment(ns, "vllm", 2, "vllm/vllm-openai:v0.30.0")),
		mustObject(t, corev1ac.Service("vllm-baseline", ns).WithSpec(corev1ac.ServiceSpec().WithSelector(map[string]string{"app": "vllm"}).
			WithPorts(corev1ac.ServicePort().WithPort(8000)))),
	}
	if err := kc.Apply(ctx, objs, false); err != nil {
		t.Fatal(err)
	}
	if err := kc.WaitDeployment(ctx, ns, "vllm"); err != nil {
		t.Fatal(err)
	}
	if d, err := kc.Drift(ctx, objs); err != nil || len(d) != 0 {
		t.Fatalf("drift right after apply: %v %v", d, err)
	}

	// Another manager scales the Deployment and edits an argument.
	deps := c.Client.AppsV1().Deployments(ns)
	patch := `{"spec":{"replicas":1,"template":{"spec":{"containers":[{"name":"vllm","args":["--block-size","16"]}]}}}}`
	if _, err := deps.Patch(ctx, "vllm", types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	drift, err := kc.Drift(ctx, objs)
	if err != nil {
		t.Fatal(err)
	}
	if len(drift) != 1 || drift[0].Object.Kind != "Deployment" || drift[0].Conflict == nil {
		t.Fatalf("drift %+v, want the Deployment with a conflict", drift)
	}
	got := strings.Join(drift[0].Fields, " ")
	for _, want := range []string{"spec.replicas", "spec.template.spec.containers[0].args[1]"} {
		if !strings.Contains(got, want) {
			t.Errorf("drift fields %q lack %s", got, want)
		}
	}
	var conflict *ConflictError
	if err := kc.Apply(ctx, objs, false); !errors.As(err, &conflict) || !strings.Contains(err.Error(), `"kubectl-edit"`) || !strings.Contains(err.Error(), ".spec.replicas") {
		t.Fatalf("apply without force: %v, want a conflict naming kubectl-edit and .spec.replicas", err)
	}
	if err := kc.Apply(ctx, objs, true); err != nil {
		t.Fatal(err)
	}
	if d, err := kc.Drift(ctx, objs); err != nil || len(d) != 0 {
		t.Fatalf("drift after the forced apply: %v %v", d, err)
	}

	// Status and other managers' own fields are no drift: a label added by someone else.
	if _, err := deps.Patch(ctx, "vllm", types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"x"}}}`), metav1.PatchOptions{FieldManager: "other"}); err != nil {
		t.Fatal(err)
	}
	if d, err := kc.Drift(ctx, objs); err != nil || len(d) != 0 {
		t.Fatalf("another manager's label counted as drift: %v %v", d, err)
	}

	if err := c.Client.CoreV1().Services(ns).Delete(ctx, "vllm-baseline", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if d, err := kc.Drift(ctx, objs); err != nil || len(d) != 1 || !d[0].Missing || d[0].Object.Kind != "Service" {
		t.Fatalf("drift after deleting the Service: %+v %v", d, err)
	}
	if err := kc.Apply(ctx, objs, false); err != nil {
		t.Fatal(err)
	}

	// Prune: the ConfigMap is no longer desired.
	kept := []Object{objs[0], objs[2], objs[3]}
	if err := kc.Prune(ctx, Refs(objs), kept); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, "settings", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("pruned ConfigMap still there: %v", err)
	}
	if err := kc.Delete(ctx, Refs(kept)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("namespace still there after delete: %v", err)
	}
}

// TestDeleteKeepsASharedNamespace: a namespace that holds someone else's
// objects survives the delete of ours.
func TestDeleteKeepsASharedNamespace(t *testing.T) {
	kc, c := testClient(t)
	ctx := context.Background()
	const ns = "kube-shared"
	mine := []Object{mustObject(t, corev1ac.Namespace(ns)), mustObject(t, corev1ac.ConfigMap("mine", ns))}
	if err := kc.Apply(ctx, append(mine, mustObject(t, corev1ac.Service("theirs", ns).WithSpec(corev1ac.ServiceSpec().
		WithPorts(corev1ac.ServicePort().WithPort(80))))), false); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}) })
	if err := kc.Delete(ctx, Refs(mine)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err != nil {
		t.Fatalf("shared namespace deleted: %v", err)
	}
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, "mine", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("our ConfigMap survived: %v", err)
	}
}

// TestWaitQuotesTheScheduler: three GPU replicas on two GPU nodes never roll
// out; the wait's error at its deadline quotes the scheduler.
func TestWaitQuotesTheScheduler(t *testing.T) {
	kc, c := testClient(t)
	c.AddGPUNodes(t, testenv.GPUNodeSpec{Prefix: "kube-wait", Count: 2, GPUs: 1})
	ns := c.Namespace(t)
	ctx := context.Background()
	if err := kc.Apply(ctx, []Object{mustObject(t, gpuDeployment(ns, "big", 3, "vllm/vllm-openai:v0.30.0"))}, false); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 8*time.Second)
	defer cancel()
	err := kc.WaitDeployment(wctx, ns, "big")
	var rollout *RolloutError
	if !errors.As(err, &rollout) || rollout.Reason != "Timeout" || !strings.Contains(err.Error(), "Insufficient nvidia.com/gpu") ||
		!strings.Contains(err.Error(), "2/3 ready") {
		t.Fatalf("wait error %v, want a timeout quoting 2/3 ready and Insufficient nvidia.com/gpu", err)
	}
}

// TestPodProblemsFailFast: containers that cannot start are fatal at once,
// with the kubelet's reason; a pull the kubelet still retries (no word of a
// missing image) and a pending pod are not.
func TestPodProblemsFailFast(t *testing.T) {
	kc, _ := testClient(t)
	waiting := func(reason, msg string) corev1.Pod {
		return corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "vllm",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}}}
	}
	crash := waiting("CrashLoopBackOff", "back-off 5m0s restarting failed container")
	pull := waiting("ImagePullBackOff", `Back-off pulling image "vllm/vllm-openai:v0.30.0"`)
	pending := corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled,
		Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/8 nodes are available: 8 Insufficient nvidia.com/gpu."}}}}
	summary, fatal, unschedulable := kc.podProblems(context.Background(), []corev1.Pod{pull, pending, pending})
	if fatal != "" || !unschedulable {
		t.Fatalf("fatal %q unschedulable %v", fatal, unschedulable)
	}
	for _, want := range []string{`1 ImagePullBackOff (container vllm): Back-off pulling image "vllm/vllm-openai:v0.30.0"`, "2 Pending: 0/8 nodes are available: 8 Insufficient nvidia.com/gpu."} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary %q lacks %q", summary, want)
		}
	}
	if _, fatal, _ := kc.podProblems(context.Background(), []corev1.Pod{crash}); fatal != "CrashLoopBackOff" {
		t.Errorf("a crash loop is not fatal: %q", fatal)
	}
	missing := waiting("ErrImagePull", `rpc error: code = NotFound desc = failed to pull and unpack image "docker.io/vllm/vllm-openai:v9": docker.io/vllm/vllm-openai:v9: not found`)
	if _, fatal, _ := kc.podProblems(context.Background(), []corev1.Pod{missing}); fatal != "ImageNotFound" {
		t.Errorf("a missing image is not fatal: %q", fatal)
	}
}

// TestRefRoundTrip: the inventory's string form reads back.
func TestRefRoundTrip(t *testing.T) {
	for _, r := range []Ref{{Version: "v1", Kind: "Namespace", Name: "llmd"}, {Group: "apps", Version: "v1", Kind: "Deployment", Namespace: "llmd", Name: "qwen"},
		{Group: "monitoring.coreos.com", Version: "v1", Kind: "PodMonitor", Namespace: "llmd", Name: "qwen"}} {
		got, err := ParseRef(r.String())
		if err != nil || got != r {
			t.Errorf("%s read back as %+v (%v)", r, got, err)
		}
	}
	if _, err := ParseRef("apps/Deployment/x"); err == nil {
		t.Error("a malformed entry parsed")
	}
}
