package testenv

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PlayedProcess is what a FleetPlayer runs for one pod: Stop ends it,
// killing it at once with kill, else as the kubelet's SIGTERM does.
type PlayedProcess interface{ Stop(kill bool) }

// FleetPlayer plays the kubelet for the pods a selector chooses, as an
// autoscaler adds and removes them: it starts a process at each running
// pod's IP, and marks the pod Ready once the process runs when the pod is
// labelled ProbedReadinessLabel=probed (a readiness probe passing). A
// deleted pod's process keeps serving its open requests for the pod's
// grace period (at most maxPlayedGrace), as the kubelet keeps a
// terminating container until it exits, unless a new pod takes its IP:
// kwok frees a pod's IP once the pod object is gone, where a real node
// holds it until the containers stop, so the old process is killed then.
type FleetPlayer struct {
	mu    sync.Mutex
	procs map[string]*playedPod // by pod name
}

type playedPod struct {
	ip      string
	grace   time.Duration
	proc    PlayedProcess
	deleted bool
}

// maxPlayedGrace bounds how long a deleted pod's process is kept.
const maxPlayedGrace = 30 * time.Second

// PlayFleet plays the pods in namespace that selector chooses until the
// test ends, starting each pod's process with start (which reports a
// failure with t.Error, not t.Fatal: it runs outside the test's goroutine,
// and returns nil then).
func (c *Cluster) PlayFleet(t testing.TB, namespace, selector string, start func(pod *corev1.Pod) PlayedProcess) *FleetPlayer {
	fp := &FleetPlayer{procs: map[string]*playedPod{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-done
		fp.mu.Lock()
		defer fp.mu.Unlock()
		for _, p := range fp.procs {
			p.proc.Stop(true)
		}
	})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			fp.sync(ctx, t, c, namespace, selector, start)
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return fp
}

func (fp *FleetPlayer) sync(ctx context.Context, t testing.TB, c *Cluster, ns, selector string, start func(*corev1.Pod) PlayedProcess) {
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	live := map[string]bool{}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		live[p.Name] = true
		if fp.procs[p.Name] != nil {
			continue
		}
		for name, old := range fp.procs {
			if old.ip == p.Status.PodIP {
				old.proc.Stop(true)
				delete(fp.procs, name)
			}
		}
		proc := start(p)
		if proc == nil {
			continue
		}
		grace := maxPlayedGrace
		if g := p.Spec.TerminationGracePeriodSeconds; g != nil && time.Duration(*g)*time.Second < grace {
			grace = time.Duration(*g) * time.Second
		}
		fp.procs[p.Name] = &playedPod{ip: p.Status.PodIP, grace: grace, proc: proc}
		if p.Labels[ProbedReadinessLabel] == "probed" {
			if err := c.MarkPodReady(ns, p.Name); err != nil {
				t.Errorf("testenv: marking pod %s ready: %v", p.Name, err)
			}
		}
	}
	for name, pp := range fp.procs {
		if live[name] || pp.deleted {
			continue
		}
		pp.deleted = true
		time.AfterFunc(pp.grace, func() {
			fp.mu.Lock()
			defer fp.mu.Unlock()
			if fp.procs[name] == pp {
				pp.proc.Stop(false)
				delete(fp.procs, name)
			}
		})
	}
}

// Serving is how many live pods have a process.
func (fp *FleetPlayer) Serving() int {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	n := 0
	for _, p := range fp.procs {
		if !p.deleted {
			n++
		}
	}
	return n
}
