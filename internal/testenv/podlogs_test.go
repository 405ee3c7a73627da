package testenv

import (
	"bufio"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPlayedJobPodLogsThroughAPIServer proves the played-pod ground: a
// benchmark Job's pod stays Running (where kwok would complete it at once)
// while the test writes its log, which the API server's pods/log streams
// from kwok's kubelet server as it is written (follow), in order and with
// the runtime's timestamps; FinishPod then ends it and the Job controller
// completes the Job, or fails it on a non-zero code.
func TestPlayedJobPodLogsThroughAPIServer(t *testing.T) {
	c := StartCluster(t)
	c.AddGPUNodes(t, GPUNodeSpec{Prefix: "played", Count: 1, GPUs: 1})
	ns := c.Namespace(t)
	ctx := context.Background()
	for _, code := range []int{0, 3} {
		name := fmt.Sprintf("ab-%d", code)
		pod := c.StartPlayedJob(t, ns, name, "bench")
		log := c.PodLog(t, ns, pod, "bench")
		fmt.Fprintln(log, "first line")
		stream, err := c.Client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: "bench", Follow: true, Timestamps: true}).Stream(ctx)
		if err != nil {
			t.Fatalf("pods/log: %v", err)
		}
		lines := make(chan string)
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(stream)
			for sc.Scan() {
				lines <- sc.Text()
			}
		}()
		next := func() string {
			select {
			case l := <-lines:
				return l
			case <-time.After(20 * time.Second):
				t.Fatal("no log line through pods/log after 20s")
				return ""
			}
		}
		// Written after the stream opened: follow delivers it.
		fmt.Fprint(log, "second ")
		fmt.Fprintln(log, "line")
		for _, want := range []string{"first line", "second line"} {
			stamp, text, _ := strings.Cut(next(), " ")
			if _, err := time.Parse(time.RFC3339Nano, stamp); err != nil || text != want {
				t.Fatalf("log line %q %q, want a timestamp and %q", stamp, text, want)
			}
		}
		// The pod has not ended on its own.
		if p, _ := c.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{}); p.Status.Phase != corev1.PodRunning {
			t.Fatalf("played pod is %s before FinishPod", p.Status.Phase)
		}
		c.FinishPod(t, ns, pod, code, "first line\nsecond line\n")
		want := batchv1.JobComplete
		if code != 0 {
			want = batchv1.JobFailed
		}
		waitFor(t, 30*time.Second, "the Job to end", func() (bool, string) {
			j, err := c.Client.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			for _, cond := range j.Status.Conditions {
				if cond.Type == want && cond.Status == corev1.ConditionTrue {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%+v", j.Status)
		})
		stream.Close()
		for range lines {
		}
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		term := p.Status.ContainerStatuses[0].State.Terminated
		if wantMsg := map[bool]string{true: "", false: "first line\nsecond line"}[code == 0]; term == nil || int(term.ExitCode) != code || term.Message != wantMsg {
			t.Errorf("container ended %+v, want exit code %d and message %q", term, code, wantMsg)
		}
	}
}
