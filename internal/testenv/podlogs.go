package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// logsResource is kwok's Logs: which file kwok's kubelet server answers a
// pod's container logs from.
var logsResource = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "logs"}

// Played pods end (kwok/pod-played.yaml) when the test ground sets
// PlayedExitCodeAnnotation to the container's exit code, and
// PlayedMessageAnnotation to its termination message.
const (
	PlayedExitCodeAnnotation = "llmd-testenv/exit-code"
	PlayedMessageAnnotation  = "llmd-testenv/termination-message"
)

// fallbackToLogsLines and fallbackToLogsBytes bound the termination
// message the kubelet takes from a failed container's log with
// terminationMessagePolicy FallbackToLogsOnError (the kubelet's
// MaxContainerTerminationMessageLogLines and ...LogLength, in
// pkg/kubelet/container: the last 80 lines, at most 2,048 bytes).
const (
	fallbackToLogsLines = 80
	fallbackToLogsBytes = 2048
)

// servingLogs readies the nodes' log serving before kwok starts: the pod
// network's route (kwok's server listens on the node IP, inside it) and
// kwok's Logs CRD, established.
func servingLogs(cfg *rest.Config, crdPath string) error {
	routeOnce.Do(func() { routeErr = addPodRoute() })
	if routeErr != nil {
		return routeErr
	}
	raw, err := os.ReadFile(crdPath)
	if err != nil {
		return fmt.Errorf("kwok's Logs CRD: %w", err)
	}
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(raw, &obj.Object); err != nil {
		return fmt.Errorf("decoding kwok's Logs CRD: %w", err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx := context.Background()
	crds := dyn.Resource(crdResource)
	if _, err := crds.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating kwok's Logs CRD: %w", err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		got, err := crds.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err == nil && crdEstablished(got) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kwok's Logs CRD is not established after 30s (%v)", err)
		}
	}
}

// PodLog is a container's log as the API server's pods/log serves it, from
// kwok's kubelet server (as `kubectl logs` reads a real node's): what the
// test writes to it, each line stamped in the CRI log format a container
// runtime writes. Give it as a played container's Container.Log.
func (c *Cluster) PodLog(t testing.TB, namespace, pod, container string) io.Writer {
	t.Helper()
	if c.logsErr != nil {
		unavailable(t, "container logs", c.logsErr, "run the tests as root with iproute2 installed (apt-get install iproute2)")
	}
	path := filepath.Join(t.TempDir(), pod+"-"+container+".log")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	logs := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Logs",
		"metadata": map[string]any{"name": pod, "namespace": namespace},
		"spec": map[string]any{"logs": []any{map[string]any{
			"containers": []any{container}, "logsFile": path, "follow": true}}},
	}}
	if _, err := dyn.Resource(logsResource).Namespace(namespace).Create(context.Background(), logs, metav1.CreateOptions{}); err != nil {
		t.Fatalf("testenv: serving pod %s/%s's logs: %v", namespace, pod, err)
	}
	t.Cleanup(func() {
		_ = dyn.Resource(logsResource).Namespace(namespace).Delete(context.Background(), pod, metav1.DeleteOptions{})
	})
	c.waitLogsServed(t, namespace, pod, container)
	return &criLog{w: f, now: time.Now}
}

// waitLogsServed waits until kwok's kubelet serves the container's logs:
// it learns of a Logs object through its informer, and until then the API
// server's pods/log answers "no logs found" (seen under a loaded CI run).
func (c *Cluster) waitLogsServed(t testing.TB, namespace, pod, container string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := c.Client.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "no logs found") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: kwok does not serve pod %s/%s's logs after 30s: %v", namespace, pod, err)
		}
	}
}

// FinishPod ends a played pod's container with exitCode, as its kubelet
// reports a container's end (kwok/pod-played.yaml): a failed container's
// termination message is the tail of output, as FallbackToLogsOnError
// takes it.
func (c *Cluster) FinishPod(t testing.TB, namespace, pod string, exitCode int, output string) {
	t.Helper()
	message := ""
	if exitCode != 0 {
		message = logTail(output)
	}
	annotations, err := json.Marshal(map[string]map[string]map[string]string{"metadata": {"annotations": {
		PlayedExitCodeAnnotation: strconv.Itoa(exitCode), PlayedMessageAnnotation: message}}})
	if err != nil {
		t.Fatal(err)
	}
	patch := string(annotations)
	if _, err := c.Client.CoreV1().Pods(namespace).Patch(context.Background(), pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Errorf("testenv: finishing pod %s/%s: %v", namespace, pod, err)
	}
}

// The kubelet's readiness probe, played (kwok/pod-probed.yaml): a pod
// labelled ProbedReadinessLabel=probed runs not Ready until MarkPodReady.
const (
	ProbedReadinessLabel  = "llmd-testenv/readiness"
	probedReadyAnnotation = "llmd-testenv/ready"
)

// MarkPodReady makes a pod labelled ProbedReadinessLabel=probed Ready, as
// a passing readiness probe does: call it once the process playing its
// container answers.
func (c *Cluster) MarkPodReady(namespace, pod string) error {
	patch := `{"metadata":{"annotations":{"` + probedReadyAnnotation + `":"true"}}}`
	_, err := c.Client.CoreV1().Pods(namespace).Patch(context.Background(), pod, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// logTail is a log's last fallbackToLogsLines lines, at most
// fallbackToLogsBytes of them.
func logTail(output string) string {
	lines := strings.SplitAfter(strings.TrimRight(output, "\n"), "\n")
	if len(lines) > fallbackToLogsLines {
		lines = lines[len(lines)-fallbackToLogsLines:]
	}
	tail := strings.Join(lines, "")
	if len(tail) > fallbackToLogsBytes {
		tail = tail[len(tail)-fallbackToLogsBytes:]
	}
	return tail
}

// criLog writes whole lines in the CRI log format, "<RFC 3339 nano time>
// stdout F <line>", as a container runtime logs a container's output.
type criLog struct {
	mu      sync.Mutex
	w       io.Writer
	now     func() time.Time
	partial []byte
}

func (l *criLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, p...)
	for {
		i := bytes.IndexByte(l.partial, '\n')
		if i < 0 {
			return len(p), nil
		}
		line := fmt.Sprintf("%s stdout F %s\n", l.now().UTC().Format(time.RFC3339Nano), l.partial[:i])
		if _, err := io.WriteString(l.w, line); err != nil {
			return 0, err
		}
		l.partial = l.partial[i+1:]
	}
}

// StartPlayedJob creates a one-pod Job of a container named container,
// labelled as a benchmark's so that kwok holds its pod Running
// (kwok/pod-played.yaml), and returns the pod's name once it runs.
func (c *Cluster) StartPlayedJob(t testing.TB, namespace, name, container string) string {
	t.Helper()
	ctx := context.Background()
	labels := map[string]string{"app.kubernetes.io/component": "benchmark"}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Spec: batchv1.JobSpec{BackoffLimit: ptr.To(int32(0)), Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
				Tolerations: []corev1.Toleration{{Key: GPUTaint.Key, Operator: corev1.TolerationOpExists}},
				Containers:  []corev1.Container{{Name: container, Image: "registry.invalid/" + container + ":1"}}}}}}
	if _, err := c.Client.BatchV1().Jobs(namespace).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("testenv: creating Job %s/%s: %v", namespace, name, err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		pods, err := c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + name})
		if err == nil && len(pods.Items) > 0 && pods.Items[0].Status.Phase == corev1.PodRunning {
			return pods.Items[0].Name
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: Job %s/%s's pod is not Running after 30s (%v)", namespace, name, err)
		}
	}
}
