package discovery

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Kubernetes watches the pods matching a label selector in one namespace.
type Kubernetes struct {
	Client    kubernetes.Interface
	Namespace string
	Selector  string
}

var _ Source = (*Kubernetes)(nil)

// Run implements Source with a pod informer restricted to the namespace and
// selector, so the router neither lists nor caches other pods. Every watch
// event marks the view dirty; one goroutine recomputes the ready set from
// the informer's cache and reports it when it changed, so a burst of events
// costs one report.
func (k *Kubernetes) Run(ctx context.Context, report func([]Pod)) error {
	sel, err := labels.Parse(k.Selector)
	if err != nil {
		return fmt.Errorf("parsing pod selector %q: %w", k.Selector, err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(k.Client, 0, informers.WithNamespace(k.Namespace),
		informers.WithTweakListOptions(func(o *v1.ListOptions) { o.LabelSelector = sel.String() }))
	inf := factory.Core().V1().Pods()
	dirty := make(chan struct{}, 1)
	mark := func(any) {
		select {
		case dirty <- struct{}{}:
		default:
		}
	}
	if _, err := inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: mark,
		UpdateFunc: func(_, n any) { mark(n) }, DeleteFunc: mark}); err != nil {
		return fmt.Errorf("watching pods in %s: %w", k.Namespace, err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return fmt.Errorf("listing pods in %s matching %q: %w", k.Namespace, k.Selector, context.Cause(ctx))
	}
	var last []Pod
	lister := inf.Lister().Pods(k.Namespace)
	for first := true; ; first = false {
		pods, err := lister.List(sel)
		if err != nil {
			return fmt.Errorf("listing cached pods: %w", err)
		}
		ready := readyPods(pods)
		if first || !slices.Equal(ready, last) {
			report(slices.Clone(ready))
			last = ready
		}
		select {
		case <-ctx.Done():
			return nil
		case <-dirty:
		}
	}
}

// readyPods keeps the pods a request may go to, sorted by name: Running,
// Ready, with an IP and not terminating (a terminating pod still reports
// Ready until its containers stop, but vLLM has begun to shut down).
func readyPods(pods []*corev1.Pod) []Pod {
	var out []Pod
	for _, p := range pods {
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || p.DeletionTimestamp != nil || !isReady(p) {
			continue
		}
		out = append(out, Pod{Name: p.Name, IP: p.Status.PodIP})
	}
	slices.SortFunc(out, func(a, b Pod) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
