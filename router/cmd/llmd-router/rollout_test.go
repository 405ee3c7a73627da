package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
)

// The router's own rollout on a real control plane (issue 28 item 4). The
// router's objects are the product's (workloads.Router: Deployment with
// maxSurge 1 / maxUnavailable 0, readiness on /readyz, a 5 s preStop sleep,
// a grace period covering it and the drain; ClusterIP Service; ConfigMap),
// applied as the provider applies them; the Deployment, ReplicaSet,
// scheduler and EndpointSlice controllers are the real ones. Two parts of a
// cluster are absent here and played by the test, each named a stand-in:
//
//   - kubeletStandIn runs the router pods bound to one Node kwok does not
//     manage (kwok marks pods Ready without probing, so it cannot hold a
//     router out of its Service until /readyz answers): it starts `llmd-router
//     serve` on the pod's IP with the container's args, reports the pod
//     Running, probes /readyz and reports Ready, and on deletion runs the
//     preStop, then sends SIGTERM, then deletes the pod once the process
//     exited. The order is the kubelet's: on a pod's deletion it runs the
//     container's preStop hook first and only then has the runtime send
//     SIGTERM to the container's first process, all within the grace period
//     (Kubernetes documentation, Pod Lifecycle, "Termination of Pods":
//     https://kubernetes.io/docs/concepts/workloads/pods/pod-lifecycle/#pod-termination;
//     in the source, pkg/kubelet/kuberuntime/kuberuntime_container.go
//     killContainer runs executePreStopHook before StopContainer), and the
//     kubelet's status manager deletes the pod object with grace 0 once its
//     containers stopped (pkg/kubelet/status/status_manager.go).
//   - endpointsFollower is kube-proxy: it watches the Service's
//     discovery.k8s.io/v1 EndpointSlices and sends each request to one of
//     the endpoints that are ready (the API reference of EndpointConditions
//     defines ready as serving and not terminating; KEP-1672), never to a
//     terminating one. The EndpointSlice controller marks a pod's endpoint
//     terminating (ready false) as soon as the pod has a deletionTimestamp,
//     while the kubelet runs the preStop (same documentation page: the
//     control plane takes a terminating pod's endpoint out of service in
//     parallel with the kubelet's shutdown).
//
// The preStop is a 5 s sleep in the pod spec; its purpose is that the
// endpoint change reaches every proxy before SIGTERM closes the listener.
// The stand-in waits for exactly that instead of the wall-clock 5 s (no
// sleeps in tests): until the follower no longer lists the pod and the
// clients have since completed two requests per worker, so no request that
// picked the old endpoint before the update is still undialled. How long
// the update took to reach the follower is measured and reported beside the
// 5 s it must fit in.

// probeClient gives up on a probe after the pod spec's timeoutSeconds (2).
var probeClient = &http.Client{Timeout: 2 * time.Second}

// standInNodeName is the Node whose pods kubeletStandIn runs.
const standInNodeName = "kubelet-stand-in"

// kubeletStandIn plays the kubelet for the pods bound to standInNodeName.
type kubeletStandIn struct {
	t      *testing.T
	c      *testenv.Cluster
	ns     string
	nextIP int
	// preStop stands in for the pod's preStop sleep (see above).
	preStop func(ip string)

	mu   sync.Mutex
	pods map[string]*standInPod // by pod name
	errs []string
}

// standInPod is one router pod the stand-in runs.
type standInPod struct {
	name, ip  string
	r         *router
	deleting  chan struct{} // closed once the pod has a deletionTimestamp
	deletedAt time.Time     // when the stand-in saw the deletionTimestamp
	exited    chan struct{} // closed once the process exited and the pod object is deleted
	exitErr   error
}

// startKubeletStandIn registers the Node (Ready, with room for pods) and
// starts following the pods bound to it in ns.
func startKubeletStandIn(t *testing.T, c *testenv.Cluster, ns string) *kubeletStandIn {
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: standInNodeName,
		Labels: map[string]string{corev1.LabelHostname: standInNodeName, corev1.LabelOSStable: "linux"}}}
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.CoreV1().Nodes().Delete(context.Background(), standInNodeName, metav1.DeleteOptions{})
	})
	// The node status a kubelet posts: Ready, and what the node holds.
	room := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"),
		corev1.ResourcePods: resource.MustParse("110")}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, standInNodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		now := metav1.Now()
		n.Status = corev1.NodeStatus{Capacity: room, Allocatable: room,
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
				LastHeartbeatTime: now, LastTransitionTime: now}},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}}
		_, err = c.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// The node lifecycle controller lifts the not-ready taint a new Node
	// gets once it sees the node Ready; the scheduler places nothing before.
	waitFor(t, "the stand-in node untainted", func() bool {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, standInNodeName, metav1.GetOptions{})
		return err == nil && len(n.Spec.Taints) == 0
	})

	k := &kubeletStandIn{t: t, c: c, ns: ns, pods: map[string]*standInPod{}, nextIP: 250}
	factory := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "spec.nodeName=" + standInNodeName }))
	inf := factory.Core().V1().Pods().Informer()
	seen := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			k.observe(p)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, o any) { seen(o) }}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	return k
}

// podIP hands out the top of the last /24 of the cluster's pod block, which
// this test binary holds alone; kwok hands out from the block's bottom.
func (k *kubeletStandIn) podIP() string {
	k.nextIP--
	base, block, err := net.ParseCIDR(k.c.PodCIDR)
	if err != nil { // called from the informer's goroutine: reported, not fatal
		k.failf("pod CIDR %q: %v", k.c.PodCIDR, err)
		return ""
	}
	ones, _ := block.Mask.Size()
	ip := base.To4()
	return net.IPv4(ip[0], ip[1], ip[2]+byte(1<<(24-ones))-1, byte(k.nextIP)).String()
}

func (k *kubeletStandIn) failf(format string, args ...any) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.errs = append(k.errs, fmt.Sprintf(format, args...))
}

// observe starts a new pod's container and passes a deletion on.
func (k *kubeletStandIn) observe(p *corev1.Pod) {
	k.mu.Lock()
	sp, known := k.pods[p.Name]
	if !known {
		if p.DeletionTimestamp != nil {
			k.mu.Unlock()
			return
		}
		sp = &standInPod{name: p.Name, ip: k.podIP(), deleting: make(chan struct{}), exited: make(chan struct{})}
		k.pods[p.Name] = sp
	}
	if p.DeletionTimestamp != nil && sp.deletedAt.IsZero() {
		sp.deletedAt = time.Now()
		close(sp.deleting)
	}
	k.mu.Unlock()
	if !known {
		go k.run(p.DeepCopy(), sp)
	}
}

// run is one pod's life: start, readiness, termination.
func (k *kubeletStandIn) run(p *corev1.Pod, sp *standInPod) {
	defer close(sp.exited)
	args, err := k.containerArgs(p)
	if err != nil {
		k.failf("pod %s: %v", p.Name, err)
		return
	}
	port := p.Spec.Containers[0].Ports[0].ContainerPort
	listen := net.JoinHostPort(sp.ip, strconv.Itoa(int(port)))
	args = append(args, "--listen", listen)
	// A real pod has a network namespace of its own; the stand-in's share
	// the host's, so each binds its own pod IP, the peer port too.
	for _, cp := range p.Spec.Containers[0].Ports {
		if cp.Name == "grpc-peers" {
			args = append(args, "--peers-listen", net.JoinHostPort(sp.ip, strconv.Itoa(int(cp.ContainerPort))))
		}
	}
	var ann []struct{ Listen string }
	proc := start(k.t, "", 1, &ann, append([]string{"serve"}, args...)...)
	sp.r = &router{proc: proc, url: "http://" + listen}
	k.setStatus(p.Name, func(s *corev1.PodStatus) {
		now := metav1.Now()
		s.Phase, s.PodIP, s.PodIPs, s.HostIP, s.StartTime = corev1.PodRunning, sp.ip, []corev1.PodIP{{IP: sp.ip}}, "127.0.0.1", &now
		s.Conditions = podConditions(s.Conditions, corev1.ConditionFalse)
		s.ContainerStatuses = []corev1.ContainerStatus{{Name: p.Spec.Containers[0].Name, Image: p.Spec.Containers[0].Image,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}, Started: ptr.To(true)}}
	})
	// The readiness probe (/readyz on the "http" port). The kubelet probes
	// every periodSeconds (2 s); the stand-in probes every 20 ms to keep
	// the test short.
	ready := false
	for deleting := false; !ready && !deleting; {
		select {
		case <-sp.deleting:
			deleting = true
		case <-proc.done:
			k.failf("pod %s: the router exited before it was ready: %v", p.Name, proc.err)
			return
		case <-time.After(20 * time.Millisecond):
			if resp, err := probeClient.Get(sp.r.url + "/readyz"); err == nil {
				resp.Body.Close()
				ready = resp.StatusCode == http.StatusOK
			}
		}
	}
	if ready {
		k.setStatus(p.Name, func(s *corev1.PodStatus) {
			s.Conditions = podConditions(s.Conditions, corev1.ConditionTrue)
			s.ContainerStatuses[0].Ready = true
		})
	}

	select {
	case <-sp.deleting:
	case <-proc.done:
		// Stopped by the test's end (or crashed: then the load fails).
		return
	}
	// The grace period runs from the start of the preStop.
	graceEnd := time.Now().Add(time.Duration(*p.Spec.TerminationGracePeriodSeconds) * time.Second)
	k.preStop(sp.ip)
	_ = proc.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-proc.done:
	case <-time.After(time.Until(graceEnd)):
		k.failf("pod %s: the router did not exit within its grace period of %ds", p.Name, *p.Spec.TerminationGracePeriodSeconds)
		_ = proc.cmd.Process.Kill()
		<-proc.done
	}
	sp.exitErr = proc.err
	err = k.c.Client.CoreV1().Pods(k.ns).Delete(context.Background(), p.Name,
		metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: metav1.NewUIDPreconditions(string(p.UID))})
	if err != nil {
		k.failf("pod %s: deleting the pod object: %v", p.Name, err)
	}
}

// containerArgs are the container's args with its ConfigMap volumes
// written to a directory (as the kubelet mounts them) and their mount
// paths in the args pointing there, and a kubeconfig holding a token of
// the pod's ServiceAccount (what the in-cluster config reads). The
// container's environment (GOGC, GOMEMLIMIT) is not applied.
func (k *kubeletStandIn) containerArgs(p *corev1.Pod) ([]string, error) {
	ctx := context.Background()
	ctr := p.Spec.Containers[0]
	args := slices.Clone(ctr.Args)
	root := k.t.TempDir()
	for _, m := range ctr.VolumeMounts {
		i := slices.IndexFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
		if i < 0 || p.Spec.Volumes[i].ConfigMap == nil {
			continue
		}
		cm, err := k.c.Client.CoreV1().ConfigMaps(k.ns).Get(ctx, p.Spec.Volumes[i].ConfigMap.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		dir := filepath.Join(root, m.Name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		for name, data := range cm.Data {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
				return nil, err
			}
		}
		for j, a := range args {
			if rest, ok := strings.CutPrefix(a, m.MountPath+"/"); ok {
				args[j] = filepath.Join(dir, rest)
			}
		}
	}
	tok, err := k.c.Client.CoreV1().ServiceAccounts(k.ns).CreateToken(ctx, p.Spec.ServiceAccountName,
		&authv1.TokenRequest{Spec: authv1.TokenRequestSpec{}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("a token for service account %s: %w", p.Spec.ServiceAccountName, err)
	}
	kubeconfig := filepath.Join(root, "kubeconfig")
	yaml := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: %q, certificate-authority-data: %q}}]\n"+
		"users: [{name: sa, user: {token: %q}}]\ncontexts: [{name: c, context: {cluster: c, user: sa}}]\ncurrent-context: c\n",
		k.c.Host, base64.StdEncoding.EncodeToString(k.c.CAData), tok.Status.Token)
	if err := os.WriteFile(kubeconfig, []byte(yaml), 0o600); err != nil {
		return nil, err
	}
	return append(args, "--kubeconfig", kubeconfig), nil
}

// setStatus updates the pod's status subresource as the kubelet does.
func (k *kubeletStandIn) setStatus(name string, change func(*corev1.PodStatus)) {
	pods := k.c.Client.CoreV1().Pods(k.ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p, err := pods.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(&p.Status)
		_, err = pods.UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		k.failf("pod %s: status: %v", name, err)
	}
}

// podConditions sets Initialized, ContainersReady and Ready (ready says
// the last two) beside the scheduler's PodScheduled.
func podConditions(conds []corev1.PodCondition, ready corev1.ConditionStatus) []corev1.PodCondition {
	now := metav1.Now()
	out := slices.DeleteFunc(slices.Clone(conds), func(c corev1.PodCondition) bool { return c.Type != corev1.PodScheduled })
	return append(out, corev1.PodCondition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
		corev1.PodCondition{Type: corev1.ContainersReady, Status: ready, LastTransitionTime: now},
		corev1.PodCondition{Type: corev1.PodReady, Status: ready, LastTransitionTime: now})
}

// endpointsFollower is the kube-proxy stand-in: the ready endpoints of one
// Service's EndpointSlices, as they change, and the requests it sent where.
type endpointsFollower struct {
	mu     sync.Mutex
	slices map[string][]string // slice name -> ready "ip:port"
	ready  []string
	next   int
	gone   map[string]time.Time // ip -> when it left the ready list
	picks  map[string][]time.Time
}

// followEndpoints watches the EndpointSlices of service in ns.
func followEndpoints(t *testing.T, c *testenv.Cluster, ns, service string) *endpointsFollower {
	f := &endpointsFollower{slices: map[string][]string{}, gone: map[string]time.Time{}, picks: map[string][]time.Time{}}
	factory := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = discoveryv1.LabelServiceName + "=" + service }))
	inf := factory.Discovery().V1().EndpointSlices().Informer()
	set := func(obj any) {
		if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
			f.update(s.Name, readyAddresses(s))
		}
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: set, UpdateFunc: func(_, o any) { set(o) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if s, ok := obj.(*discoveryv1.EndpointSlice); ok {
				f.update(s.Name, nil)
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory.Start(stop)
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	return f
}

// readyAddresses are a slice's ready, not terminating endpoints on its
// "http" port (nil ready counts as ready, nil terminating as not, as the
// API defines them).
func readyAddresses(s *discoveryv1.EndpointSlice) []string {
	var port int32
	for _, p := range s.Ports {
		if p.Name != nil && *p.Name == "http" && p.Port != nil {
			port = *p.Port
		}
	}
	var out []string
	for _, e := range s.Endpoints {
		c := e.Conditions
		if port == 0 || (c.Ready != nil && !*c.Ready) || (c.Terminating != nil && *c.Terminating) {
			continue
		}
		for _, a := range e.Addresses {
			out = append(out, net.JoinHostPort(a, strconv.Itoa(int(port))))
		}
	}
	return out
}

func (f *endpointsFollower) update(slice string, addrs []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if addrs == nil {
		delete(f.slices, slice)
	} else {
		f.slices[slice] = addrs
	}
	before := f.ready
	f.ready = nil
	for _, a := range f.slices {
		f.ready = append(f.ready, a...)
	}
	slices.Sort(f.ready)
	for _, a := range before {
		if !slices.Contains(f.ready, a) {
			ip, _, _ := net.SplitHostPort(a)
			f.gone[ip] = time.Now()
		}
	}
}

// pick is the next ready endpoint, round robin, as a base URL (one that
// cannot be reached when none is ready, so the request fails and counts).
func (f *endpointsFollower) pick() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.ready) == 0 {
		return "http://no-ready-endpoint.invalid"
	}
	f.next++
	a := f.ready[f.next%len(f.ready)]
	ip, _, _ := net.SplitHostPort(a)
	f.picks[ip] = append(f.picks[ip], time.Now())
	return "http://" + a
}

func (f *endpointsFollower) listed() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.ready)
}

// goneAt is when ip left the ready list (zero: it has not).
func (f *endpointsFollower) goneAt(ip string) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.gone[ip]
}

// lastPick is the last time a request was sent to ip, and how many were
// sent after t0.
func (f *endpointsFollower) lastPick(ip string, t0 time.Time) (last time.Time, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, at := range f.picks[ip] {
		if at.After(t0) {
			last, n = at, n+1
		}
	}
	return last, n
}

// routerRollout is the two-replica router Deployment behind its Service on
// the local control plane, over three simulated vLLM pods it discovers
// through the API server, with the two stand-ins above.
type routerRollout struct {
	c         *testenv.Cluster
	ns        string
	spec      workloads.Router
	kubelet   *kubeletStandIn
	endpoints *endpointsFollower
	applier   *kube.Client
	// workers is the load's concurrency.
	workers int
	// load is the run the preStop waits on (nil: no run yet).
	mu   sync.Mutex
	load *sickLoad
	// old are the pods of the first revision; rolled is when the rollout began.
	old    []*standInPod
	rolled time.Time
}

// startRouterRollout brings the Deployment up and waits until its Service
// lists both replicas.
func startRouterRollout(t *testing.T, workers int) *routerRollout {
	c := testenv.StartCluster(t)
	testenv.ServePodIPs(t)
	c.AddGPUNodes(t, testenv.GPUNodeSpec{Prefix: "rollout", Count: 3, GPUs: 1})
	ns := c.Namespace(t)
	ro := &routerRollout{c: c, ns: ns, workers: workers}
	for _, ip := range kwokVLLMPods(t, c, ns, 3) {
		var info []struct{ Pod string }
		start(t, "", 1, &info, "sim", "--host", ip, "--port", "8000", "--kv-port", "5557", "--time-scale", "10")
	}
	ro.kubelet = startKubeletStandIn(t, c, ns)
	ro.kubelet.preStop = ro.preStop
	ro.spec = workloads.Router{Name: "router", Namespace: ns, Image: "ghcr.io/llmd-dev/llmd-router:test", Replicas: 2,
		Target: workloads.RouterTarget{Namespace: ns, Selector: "app=vllm", HTTPPort: 8000, KVEventsPort: 5557, ReplayPort: 5558,
			ServedModel: simModelName},
		Scorers:      config.DefaultScorers(),
		Limits:       workloads.RouterLimits{MaxQueue: 1024, QueueTimeout: 30 * time.Second, Drain: 2 * time.Minute},
		LogLevel:     "info",
		Service:      workloads.Exposure{Type: "ClusterIP", Port: 8000},
		Resources:    workloads.RouterResources{CPU: "100m", Memory: "128Mi", MemoryLimit: "512Mi"},
		NodeSelector: map[string]string{corev1.LabelHostname: standInNodeName}}
	var err error
	if ro.applier, err = kube.NewClient(c.RESTConfig(), nil); err != nil {
		t.Fatal(err)
	}
	ro.endpoints = followEndpoints(t, c, ns, ro.spec.Name)
	ro.apply(t)
	waitFor(t, "the Service listing both router replicas", func() bool { return len(ro.endpoints.listed()) == 2 })
	ro.kubelet.mu.Lock()
	for _, sp := range ro.kubelet.pods {
		ro.old = append(ro.old, sp)
	}
	ro.kubelet.mu.Unlock()
	return ro
}

// kwokVLLMPods creates n vLLM pods (vllm-0, ...) on kwok's GPU nodes and
// returns their IPs by name once they are Running.
func kwokVLLMPods(t *testing.T, c *testenv.Cluster, ns string, n int) map[string]string {
	t.Helper()
	pods := c.Client.CoreV1().Pods(ns)
	ctx := context.Background()
	for i := range n {
		if _, err := pods.Create(ctx, vllmPod(fmt.Sprintf("vllm-%d", i), map[string]string{"app": "vllm"}), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ips := map[string]string{}
	waitFor(t, "the vLLM pods Running with an IP", func() bool {
		for i := range n {
			name := fmt.Sprintf("vllm-%d", i)
			p, err := pods.Get(ctx, name, metav1.GetOptions{})
			if err != nil || p.Status.PodIP == "" || p.Status.Phase != corev1.PodRunning {
				return false
			}
			ips[name] = p.Status.PodIP
		}
		return true
	})
	return ips
}

// vllmPod is a vLLM-like pod asking for one GPU, for kwok to run.
func vllmPod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			Tolerations: []corev1.Toleration{{Key: testenv.GPUTaint.Key, Operator: corev1.TolerationOpEqual,
				Value: testenv.GPUTaint.Value, Effect: testenv.GPUTaint.Effect}},
			Containers: []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai:v0.11.0",
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}}}},
		},
	}
}

// apply applies the router's objects as the provider does.
func (ro *routerRollout) apply(t *testing.T) {
	objs, err := ro.spec.Objects(false)
	if err != nil {
		t.Fatal(err)
	}
	if err := ro.applier.Apply(context.Background(), objs, true); err != nil {
		t.Fatal(err)
	}
}

// roll changes the scoring (the cost scorer's weight): a new config
// checksum on the pod template, so the Deployment rolls both replicas.
// The preStops wait on l.
func (ro *routerRollout) roll(t *testing.T, l *sickLoad) {
	ro.mu.Lock()
	ro.load = l
	ro.rolled = time.Now()
	ro.mu.Unlock()
	for i := range ro.spec.Scorers {
		ro.spec.Scorers[i].Weight++
	}
	objs, err := ro.spec.Objects(false)
	if err == nil {
		err = ro.applier.Apply(context.Background(), objs, true)
	}
	if err != nil {
		ro.kubelet.failf("applying the scoring change: %v", err)
	}
}

// preStop is the stand-in of the pod's preStop sleep: see the top of the file.
func (ro *routerRollout) preStop(ip string) {
	deadline := time.Now().Add(5 * time.Second)
	for ro.endpoints.goneAt(ip).IsZero() {
		if time.Now().After(deadline) {
			ro.kubelet.failf("router %s still listed 5 s (the preStop) after its pod was deleted", ip)
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	ro.mu.Lock()
	l := ro.load
	ro.mu.Unlock()
	if l != nil {
		l.waitCompleted(l.completed() + 2*ro.workers)
	}
}

// lastNew is the fault table's last column for the rollout: for each old
// router, the time from its pod's deletion to the last request the
// follower sent it, and how many it got after the deletion.
func (ro *routerRollout) lastNew() (time.Duration, string) {
	last := time.Duration(-1)
	var hits []string
	for _, sp := range ro.old {
		ro.kubelet.mu.Lock()
		deleted := sp.deletedAt
		ro.kubelet.mu.Unlock()
		if deleted.IsZero() {
			hits = append(hits, sp.ip+": not deleted")
			continue
		}
		at, n := ro.endpoints.lastPick(sp.ip, deleted)
		hits = append(hits, fmt.Sprintf("%s: %d", sp.ip, n))
		if !at.IsZero() {
			last = max(last, at.Sub(deleted))
		}
	}
	return last, strings.Join(hits, ", ")
}

// check waits until both old routers exited and their pods are gone, and
// expects: each exited cleanly, each left the endpoints within the 5 s its
// preStop covers, the rollout ended before the load did, no stand-in
// failure, and each new replica warmed from a peer.
func (ro *routerRollout) check(t *testing.T, loadEnd time.Time) {
	for _, sp := range ro.old {
		select {
		case <-sp.exited:
		case <-time.After(30 * time.Second):
			t.Fatalf("old router %s (%s) still running 30 s after the rollout began", sp.name, sp.ip)
		}
		if sp.exitErr != nil {
			t.Errorf("old router %s exited with %v:\n%s", sp.name, sp.exitErr, tail(sp.r.stderr.String(), 2000))
		}
		if !strings.Contains(sp.r.stderr.String(), "draining open requests") {
			t.Errorf("old router %s logged no drain", sp.name)
		}
		gone := ro.endpoints.goneAt(sp.ip)
		t.Logf("router pod %s (%s): deleted %.2fs into the rollout, unlisted by the follower %.0f ms after the deletion",
			sp.name, sp.ip, sp.deletedAt.Sub(ro.rolled).Seconds(), float64(gone.Sub(sp.deletedAt).Microseconds())/1000)
		if !sp.deletedAt.Before(loadEnd) {
			t.Errorf("old router %s was deleted after the load ended: the run did not cover the rollout", sp.name)
		}
	}
	waitFor(t, "the Service listing the two new replicas", func() bool {
		l := ro.endpoints.listed()
		for _, sp := range ro.old {
			if slices.ContainsFunc(l, func(a string) bool { return strings.HasPrefix(a, sp.ip+":") }) {
				return false
			}
		}
		return len(l) == 2
	})
	ro.kubelet.mu.Lock()
	defer ro.kubelet.mu.Unlock()
	for _, e := range ro.kubelet.errs {
		t.Error(e)
	}
	// Each new replica started beside a ready peer (maxSurge 1) and took
	// its index instead of replaying the engines from seq 0.
	for _, sp := range ro.kubelet.pods {
		if slices.Contains(ro.old, sp) {
			continue
		}
		fams := metrics(t, sp.r.url+"/metrics")
		resumed, full := sum(fams, "llmd_router_kv_event_resumed_total"), sum(fams, "llmd_router_kv_event_full_replays_total")
		t.Logf("new router pod %s: %v engines resumed from a peer's positions, %v replays from seq 0", sp.name, resumed, full)
		if resumed != 3 || full != 0 {
			t.Errorf("new router pod %s resumed %v engines from a peer and replayed %v from seq 0, want 3 and 0", sp.name, resumed, full)
		}
	}
}
