package provider

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	tftypes "github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
)

// playedBenchmark is a benchmark pod the test ground ran: its spec and
// everything its container wrote.
type playedBenchmark struct {
	pod    corev1.Pod
	output string
	exit   int
}

// benchmarkPlayer plays the kubelet for A/B benchmark pods in a namespace:
// each one kwok schedules (and holds Running: kwok/pod-played.yaml) runs as
// the router image's own container, with its spec's command, args and
// env, on its pod IP, the tokenizer files at the paths it names (the
// fleet's claim), an empty /tmp (its emptyDir); its output is the pod's log
// through the API server (Cluster.PodLog), and its exit ends the pod.
type benchmarkPlayer struct {
	mu     sync.Mutex
	played []playedBenchmark
}

func playBenchmarkPods(t *testing.T, c *testenv.Cluster, ns string) *benchmarkPlayer {
	t.Helper()
	img := testenv.RouterImageRootfs(t)
	tok := testenv.Tokenizer(t, "qwen3")
	p := &benchmarkPlayer{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		seen := map[types.UID]bool{}
		for ctx.Err() == nil {
			pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=" + workloads.BenchmarkComponent})
			if err == nil {
				for _, pod := range pods.Items {
					if seen[pod.UID] || pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
						continue
					}
					seen[pod.UID] = true
					p.play(t, c, img, tok, pod)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return p
}

// play runs one pod's container to its end.
func (p *benchmarkPlayer) play(t *testing.T, c *testenv.Cluster, img *testenv.Image, tok testenv.ModelFiles, pod corev1.Pod) {
	ctr := pod.Spec.Containers[0]
	if ctr.Image != devRouterImage {
		t.Errorf("benchmark pod %s runs %s, want the router's image %s", pod.Name, ctr.Image, devRouterImage)
		return
	}
	files := map[string][]byte{}
	for flag, from := range map[string]string{"--tokenizer": tok.TokenizerJSON, "--tokenizer-config": tok.TokenizerConfig} {
		if to := flagValue(ctr.Args, flag); to != "" {
			b, err := os.ReadFile(from)
			if err != nil {
				t.Error(err)
				return
			}
			files[to] = b
		}
	}
	var env []string
	for _, e := range ctr.Env {
		if e.ValueFrom != nil {
			t.Errorf("benchmark pod %s takes env %s from %+v, which the test does not play", pod.Name, e.Name, e.ValueFrom)
			return
		}
		env = append(env, e.Name+"="+e.Value)
	}
	var dirs []string
	for _, m := range ctr.VolumeMounts {
		for _, v := range pod.Spec.Volumes {
			if v.Name == m.Name && v.EmptyDir != nil {
				dirs = append(dirs, m.MountPath)
			}
		}
	}
	proc := img.Start(t, testenv.Container{Command: ctr.Command, Args: ctr.Args, Env: env, PodIP: pod.Status.PodIP, Files: files,
		EmptyDirs: dirs, Log: c.PodLog(t, pod.Namespace, pod.Name, ctr.Name)})
	err := proc.Wait(5 * time.Minute)
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Errorf("benchmark pod %s: %v", pod.Name, err)
		proc.Stop()
		code = 137
	}
	c.FinishPod(t, pod.Namespace, pod.Name, code, proc.Logs())
	p.mu.Lock()
	p.played = append(p.played, playedBenchmark{pod: pod, output: proc.Logs(), exit: code})
	p.mu.Unlock()
}

// runs are the pods played so far.
func (p *benchmarkPlayer) runs() []playedBenchmark {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]playedBenchmark(nil), p.played...)
}

// abTestWorkload is small enough for the simulated fleet on two cores.
const abTestWorkload = `
    num_prompts     = 24
    num_prefixes    = 3
    prefix_len      = 256
    suffix_len      = 16
    output_len      = 4
    max_concurrency = 6`

// abConfig invokes llmd_ab_benchmark on the test's fleet and router once,
// when terraform_data.<trigger> is created.
func abConfig(trigger string) string {
	return fmt.Sprintf(`
action "llmd_ab_benchmark" "%[1]s" {
  config {
    cluster  = llmd_inference_cluster.test.kubernetes
    baseline = llmd_model_fleet.test.baseline_endpoint
    router   = llmd_prefix_router.test.url
%[2]s
    timeout  = "4m"
  }
}

resource "terraform_data" "%[1]s" {
  input = "once"
  lifecycle {
    action_trigger {
      events  = [after_create]
      actions = [action.llmd_ab_benchmark.%[1]s]
    }
  }
}
`, trigger, abTestWorkload)
}

// checkABRan checks the action's run: one benchmark pod, played to a
// successful end, that measured both sides against the fleet's engines and
// the router's pods and printed the table and the ceiling; and that the
// Job is gone, as the action changes nothing it leaves behind.
func checkABRan(c *testenv.Cluster, ns string, player *benchmarkPlayer, fleetIPs []string, routers []playedRouter) error {
	{
		runs := player.runs()
		if len(runs) != 1 {
			return fmt.Errorf("%d benchmark pods played, want 1", len(runs))
		}
		run := runs[0]
		if run.exit != 0 {
			return fmt.Errorf("the bench exited %d:\n%s", run.exit, run.output)
		}
		args := strings.Join(run.pod.Spec.Containers[0].Args, " ")
		for _, ip := range fleetIPs {
			if !strings.Contains(args, "http://"+ip+":8000") {
				return fmt.Errorf("bench args %q lack the engine %s", args, ip)
			}
		}
		for _, r := range routers {
			if !strings.Contains(args, r.url) {
				return fmt.Errorf("bench args %q lack the router pod %s", args, r.url)
			}
		}
		for _, want := range []string{"| policy |", "| rr |", "| router |", "ceiling"} {
			if !strings.Contains(run.output, want) {
				return fmt.Errorf("the bench's output lacks %q:\n%s", want, run.output)
			}
		}
		jobs, err := c.Client.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=" + workloads.BenchmarkComponent})
		if err != nil {
			return err
		}
		if len(jobs.Items) != 0 {
			return fmt.Errorf("the action left Job %s behind", jobs.Items[0].Name)
		}
		return nil
	}
}

// checkABProgress runs the action's own code (planBenchmark,
// runBenchmark) once more with a progress sink in place of Terraform's: the
// bench's log reaches the progress messages line by line, through the API
// server's pods/log, in the order the bench wrote it, table included.
func checkABProgress(c *testenv.Cluster, ns string, player *benchmarkPlayer) error {
	ctx := context.Background()
	kc, err := kube.NewClient(c.RESTConfig(), nil)
	if err != nil {
		return err
	}
	kc.Poll = 200 * time.Millisecond
	n := func(v int64) tftypes.Int64 { return tftypes.Int64Value(v) }
	m := abBenchmarkModel{Baseline: tftypes.StringValue("http://qwen-baseline." + ns + ".svc.cluster.local:8000"),
		Router:     tftypes.StringValue("http://router." + ns + ".svc.cluster.local:8000"),
		NumPrompts: n(24), NumPrefixes: n(3), PrefixLen: n(256), SuffixLen: n(16), OutputLen: n(4), MaxConcurrency: n(6),
		RequestRate: tftypes.Float64Null(), Seed: n(2)}
	b, err := planBenchmark(ctx, kc, m)
	if err != nil {
		return err
	}
	b.DeadlineSeconds = 240
	var lines []string
	var mu sync.Mutex
	err = runBenchmark(ctx, kc, b, 4*time.Minute, func(_ context.Context, msg string, _ map[string]any) {
		mu.Lock()
		defer mu.Unlock()
		lines = append(lines, msg)
	})
	if err != nil {
		return err
	}
	runs := player.runs()
	written := strings.Split(strings.TrimRight(runs[len(runs)-1].output, "\n"), "\n")
	mu.Lock()
	defer mu.Unlock()
	// Every line the bench wrote, in order, among the progress messages.
	i := 0
	for _, l := range lines {
		if i < len(written) && l == written[i] {
			i++
		}
	}
	if i != len(written) {
		return fmt.Errorf("the progress messages carry %d of the bench's %d lines in order; missing %q\nprogress:\n%s",
			i, len(written), written[i], strings.Join(lines, "\n"))
	}
	return nil
}
