package discovery

import (
	"context"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// InferencePoolResource is the Gateway API Inference Extension's pool
// (inference.networking.k8s.io/v1, GA; sigs.k8s.io/gateway-api-inference-extension
// api/v1/inferencepool_types.go).
var InferencePoolResource = schema.GroupVersionResource{Group: "inference.networking.k8s.io", Version: "v1", Resource: "inferencepools"}

// InferencePool follows the pods of one InferencePool: the pods its
// spec.selector.matchLabels selects, ready as Kubernetes reports them, each
// of its spec.targetPorts an endpoint. A pool with one port names its
// endpoints by pod; with several, by pod and port ("pod:8001"). A change of
// the pool's selector or ports takes effect at once; a pool that is
// deleted, or not there yet, leaves the router with no pods until it is.
type InferencePool struct {
	Client    kubernetes.Interface
	Dynamic   dynamic.Interface
	Namespace string
	Name      string
}

var _ Source = (*InferencePool)(nil)

// poolSpec is the part of the pool the router follows.
type poolSpec struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	TargetPorts []struct {
		Number int `json:"number"`
	} `json:"targetPorts"`
}

// Run implements Source: it watches the pool by name and runs a pod watch
// (Kubernetes) for its current selector, restarted when the selector or the
// ports change.
func (p *InferencePool) Run(ctx context.Context, report func([]Pod)) error {
	res := p.Dynamic.Resource(InferencePoolResource).Namespace(p.Namespace)
	byName := fields.OneTermEqualSelector("metadata.name", p.Name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = byName
			return res.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = byName
			return res.Watch(ctx, o)
		},
	}
	// Without the CRD the informer would retry forever and the router never
	// become ready: say so instead.
	if _, err := res.List(ctx, metav1.ListOptions{FieldSelector: byName, Limit: 1}); apierrors.IsNotFound(err) {
		return fmt.Errorf("following InferencePool %s/%s: the cluster does not serve %s (install the Gateway API Inference Extension CRD): %w",
			p.Namespace, p.Name, InferencePoolResource.GroupResource(), err)
	}
	specs := make(chan *poolSpec, 1)
	latest := func(s *poolSpec) {
		select { // only the newest spec matters
		case <-specs:
		default:
		}
		specs <- s
	}
	decode := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		s := &poolSpec{}
		spec, _, _ := unstructured.NestedMap(u.Object, "spec")
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(spec, s); err != nil {
			latest(nil) // the API server validates the CRD's schema; a pool it admitted decodes
			return
		}
		latest(s)
	}
	inf := cache.NewSharedIndexInformer(lw, &unstructured.Unstructured{}, 0, cache.Indexers{})
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: decode,
		UpdateFunc: func(_, n any) { decode(n) }, DeleteFunc: func(any) { latest(nil) }}); err != nil {
		return fmt.Errorf("watching InferencePool %s/%s: %w", p.Namespace, p.Name, err)
	}
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("listing InferencePool %s/%s: %w", p.Namespace, p.Name, context.Cause(ctx))
	}
	if len(inf.GetStore().List()) == 0 {
		report(nil) // no pool yet: synced, with no pods
	}

	var cur *poolSpec
	var pw *podWatch
	defer func() { pw.close() }()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-pw.ended():
			pw = nil
			return err
		case s := <-specs:
			if reflect.DeepEqual(s, cur) && s != nil {
				continue
			}
			pw.close()
			pw, cur = nil, s
			if s == nil || len(s.Selector.MatchLabels) == 0 || len(s.TargetPorts) == 0 {
				report(nil)
				continue
			}
			pw = p.watchPods(ctx, s, report)
		}
	}
}

// podWatch is the pod watch of one version of the pool's spec.
type podWatch struct {
	stop context.CancelFunc
	done chan error
}

// watchPods follows the pods s selects, reporting one endpoint per port.
func (p *InferencePool) watchPods(ctx context.Context, s *poolSpec, report func([]Pod)) *podWatch {
	pctx, stop := context.WithCancel(ctx)
	w := &podWatch{stop: stop, done: make(chan error, 1)}
	k := &Kubernetes{Client: p.Client, Namespace: p.Namespace, Selector: labels.SelectorFromSet(s.Selector.MatchLabels).String()}
	ports := s.ports()
	go func() { w.done <- k.Run(pctx, func(pods []Pod) { report(endpoints(pods, ports)) }) }()
	return w
}

// ended delivers the watch's own end (nil, never ready, without a watch).
func (w *podWatch) ended() <-chan error {
	if w == nil {
		return nil
	}
	return w.done
}

// close stops the watch and waits for it; its error then says only that it
// was stopped.
func (w *podWatch) close() {
	if w == nil {
		return
	}
	w.stop()
	<-w.done
}

// ports lists the pool's target ports in order.
func (s *poolSpec) ports() []int {
	out := make([]int, 0, len(s.TargetPorts))
	for _, tp := range s.TargetPorts {
		out = append(out, tp.Number)
	}
	return out
}

// endpoints turns ready pods into one endpoint per target port.
func endpoints(pods []Pod, ports []int) []Pod {
	out := make([]Pod, 0, len(pods)*len(ports))
	for _, p := range pods {
		for _, port := range ports {
			e := p
			if len(ports) > 1 {
				e.Name = p.Name + ":" + strconv.Itoa(port)
			}
			e.HTTP = "http://" + net.JoinHostPort(p.IP, strconv.Itoa(port))
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b Pod) int { return strings.Compare(a.Name, b.Name) })
	return out
}
