package kube

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// TestFollowLogs follows a played Job pod's log through the API server and
// kwok's kubelet server: it waits while the pod is not yet known to run,
// passes every line once, in order, including lines written long after
// the stream opened and a line far longer than a read buffer, and returns
// once the pod has ended.
func TestFollowLogs(t *testing.T) {
	kc, c := testClient(t)
	c.AddGPUNodes(t, testenv.GPUNodeSpec{Prefix: "follow", Count: 1, GPUs: 1})
	ns := c.Namespace(t)
	ctx := context.Background()
	pod := c.StartPlayedJob(t, ns, "follow", "bench")
	// Before the log exists (no Logs object yet), FollowLogs waits.
	var mu sync.Mutex
	var got []string
	done := make(chan error, 1)
	follow, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	go func() {
		done <- kc.FollowLogs(follow, ns, pod, "bench", func(l string) {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, l)
		})
	}()
	time.Sleep(1500 * time.Millisecond)
	log := c.PodLog(t, ns, pod, "bench")
	long := strings.Repeat("x", 200<<10)
	var want []string
	for i := 0; i < 5; i++ {
		line := fmt.Sprintf("line %d", i)
		if i == 2 {
			line = long
		}
		fmt.Fprintln(log, line)
		want = append(want, line)
		// Slower than the kubelet's polls: lines come while the stream idles.
		time.Sleep(700 * time.Millisecond)
	}
	var output strings.Builder
	for _, l := range want {
		output.WriteString(l + "\n")
	}
	c.FinishPod(t, ns, pod, 0, output.String())
	if err := <-done; err != nil {
		t.Fatalf("FollowLogs: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d: %q", len(got), len(want), shorten(got))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: %q, want %q", i, shorten(got[i:i+1]), shorten(want[i:i+1]))
		}
	}
}

func shorten(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		if len(l) > 40 {
			l = fmt.Sprintf("%s... (%d bytes)", l[:20], len(l))
		}
		out[i] = l
	}
	return out
}
