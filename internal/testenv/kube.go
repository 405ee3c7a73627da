package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/llmd-dev/terraform-provider-llmd/internal/freeport"
)

// Cluster is a running Kubernetes control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler) with kwok turning Node objects into
// fake nodes, so Deployments really schedule and roll out to Ready pods. It
// authenticates EKS bearer tokens as EKS does (see MapIAMPrincipal).
type Cluster struct {
	// Host is the apiserver URL (https://127.0.0.1:PORT).
	Host string
	// CAData is the PEM CA that signed the apiserver's certificate.
	CAData []byte
	// Token is a bearer token in group system:masters.
	Token string
	// Kubeconfig is the path of a kubeconfig file for the same admin identity.
	Kubeconfig string
	// PodCIDR is the range kwok gives pod IPs from; see ServePodIPs for binding to them.
	PodCIDR string
	// StartTime is how long the control plane took to become ready.
	StartTime time.Duration
	// Client is a clientset for the admin identity.
	Client kubernetes.Interface
	// FrontProxyCert and FrontProxyKey are the files of the client
	// certificate the aggregation layer presents to aggregated API servers,
	// for tests that call one as the API server does.
	FrontProxyCert, FrontProxyKey string

	eks *eksAuthn // verifies EKS bearer tokens; see MapIAMPrincipal
	// logsErr says why the nodes serve no container logs (see PodLog).
	logsErr error
}

// GPUTaint is the taint EKS puts on GPU node groups and the fleet tolerates.
var GPUTaint = corev1.Taint{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}

// RESTConfig returns a fresh client configuration for the admin identity.
func (c *Cluster) RESTConfig() *rest.Config {
	return &rest.Config{
		Host:            c.Host,
		BearerToken:     c.Token,
		TLSClientConfig: rest.TLSClientConfig{CAData: c.CAData},
		QPS:             200,
		Burst:           400,
	}
}

var (
	kubeOnce sync.Once
	kubeInst *Cluster
	kubeErr  error
)

// StartCluster returns the test binary's control plane, started on first use
// (about 5 s once the binaries are cached; the first build takes minutes).
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	kubeOnce.Do(func() { kubeInst, kubeErr = startCluster() })
	if kubeErr != nil {
		unavailable(t, "Kubernetes control plane", kubeErr,
			"needs Go and the module proxy to build kube-apiserver and kwok into the testenv cache (see TESTING.md); run .ci/run once")
	}
	return kubeInst
}

func startCluster() (*Cluster, error) {
	kubebin, err := kubebinPath()
	if err != nil {
		return nil, err
	}
	kwok, stages, logsCRD, err := kwokPaths()
	if err != nil {
		return nil, err
	}
	began := time.Now()
	dir, err := os.MkdirTemp("", "llmd-testenv-kube-")
	if err != nil {
		return nil, err
	}
	onStop(func(bool) { os.RemoveAll(dir) })
	keys, err := writePKI(dir)
	if err != nil {
		return nil, fmt.Errorf("writing control-plane keys: %w", err)
	}
	podCIDR, err := claimPodCIDR()
	if err != nil {
		return nil, err
	}
	ports := make([]int, 4)
	for i := range ports {
		if ports[i], err = freeport.Port(); err != nil {
			return nil, err
		}
	}
	etcdPort, peerPort, apiPort, kubeletPort := ports[0], ports[1], ports[2], ports[3]
	c := &Cluster{
		Host:       fmt.Sprintf("https://127.0.0.1:%d", apiPort),
		CAData:     keys.CAData,
		Token:      "llmd-testenv-admin",
		Kubeconfig: filepath.Join(dir, "admin.kubeconfig"),
		PodCIDR:    podCIDR,

		FrontProxyCert: keys.ProxyClientCert,
		FrontProxyKey:  keys.ProxyClientKey,
	}
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(c.Token+",admin,admin,system:masters\n"), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(c.Kubeconfig, c.kubeconfigYAML(), 0o600); err != nil {
		return nil, err
	}

	webhook, eks, err := startEKSWebhook(dir, keys)
	if err != nil {
		return nil, fmt.Errorf("starting the EKS token webhook: %w", err)
	}
	c.eks = eks

	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", etcdPort)
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	etcd, err := startProcess("etcd", kubebin, []string{"etcd",
		"--data-dir", filepath.Join(dir, "etcd"), "--name", "default",
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "default=" + peerURL,
		// Test data is disposable: skipping fsync keeps etcd off the disk's critical path.
		"--unsafe-no-fsync", "--log-level", "warn",
	}, nil)
	if err != nil {
		return nil, err
	}
	registerStop(etcd)
	if err := etcd.waitReady(30*time.Second, httpOK(http.DefaultClient, etcdURL+"/health")); err != nil {
		return nil, err
	}

	api, err := startProcess("kube-apiserver", kubebin, []string{"kube-apiserver",
		"--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", fmt.Sprint(apiPort),
		"--tls-cert-file", keys.ServingCert, "--tls-private-key-file", keys.ServingKey,
		"--cert-dir", filepath.Join(dir, "certs"),
		"--token-auth-file", tokens, "--authorization-mode", "RBAC",
		// EKS tokens go to the webhook. Its cache is as short as the apiserver allows
		// (successes are cached 10 s whatever it says), so an expired token is refused within 10 s.
		"--authentication-token-webhook-config-file", webhook, "--authentication-token-webhook-version", "v1",
		"--authentication-token-webhook-cache-ttl", "10s",
		"--service-account-key-file", keys.SAPub, "--service-account-signing-key-file", keys.SAKey,
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-cluster-ip-range", "10.96.0.0/16",
		"--endpoint-reconciler-type", "none", "--allow-privileged",
		// kwok's nodes have an InternalIP (kwok's server, see servingLogs) and
		// a Hostname that resolves nowhere: pods/log goes to the first.
		"--kubelet-preferred-address-types", "InternalIP",
		// The aggregation layer, as kubeadm and EKS configure it: requests
		// to an APIService's group go to its Service with the front proxy's
		// client certificate and the caller in X-Remote-* headers. With no
		// kube-proxy here, the aggregator dials the Service's endpoints (pod
		// IPs that local processes answer on) instead of its cluster IP.
		"--requestheader-client-ca-file", keys.FrontProxyCA,
		"--requestheader-allowed-names", FrontProxyClientName,
		"--requestheader-username-headers", "X-Remote-User",
		"--requestheader-group-headers", "X-Remote-Group",
		"--requestheader-extra-headers-prefix", "X-Remote-Extra-",
		"--proxy-client-cert-file", keys.ProxyClientCert, "--proxy-client-key-file", keys.ProxyClientKey,
		"--enable-aggregator-routing=true",
	}, nil)
	if err != nil {
		return nil, err
	}
	registerStop(api)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(keys.CAData)
	tlsClient := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if err := api.waitReady(90*time.Second, httpOK(tlsClient, c.Host+"/readyz")); err != nil {
		return nil, err
	}

	client, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		return nil, err
	}
	c.Client = client

	common := []string{"--kubeconfig", c.Kubeconfig, "--leader-elect=false", "--secure-port=0"}
	cm, err := startProcess("kube-controller-manager", kubebin, append([]string{"kube-controller-manager",
		"--service-account-private-key-file", keys.SAKey, "--root-ca-file", keys.CACert,
		"--use-service-account-credentials=false", "--controllers=*,-nodeipam,-cloud-node-lifecycle",
		// kwok renews node leases, but on a loaded machine a renewal can come
		// late; past the default 40 s grace the controller marks every pod on the
		// node not ready, and kwok never makes a Running pod ready again.
		"--node-monitor-grace-period=10m",
		// The HPA controller's period (15 s on EKS, which does not let it be
		// set): 2 s keeps autoscaling tests short; the HPA's arithmetic and
		// its behaviour's windows and policies are the same.
		"--horizontal-pod-autoscaler-sync-period=2s",
	}, common...), nil)
	if err != nil {
		return nil, err
	}
	sched, err := startProcess("kube-scheduler", kubebin, append([]string{"kube-scheduler"}, common...), nil)
	if err != nil {
		return nil, err
	}
	nodeIP := strings.Split(podCIDR, "/")[0]
	kwokArgs := []string{"--kubeconfig", c.Kubeconfig,
		"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		"--cidr", podCIDR, "--node-ip", nodeIP}
	if c.logsErr = servingLogs(c.RESTConfig(), logsCRD); c.logsErr == nil {
		// The nodes' kubelet endpoint: kwok's server, on the node IP, serving
		// the logs that Logs objects name (Cluster.PodLog).
		kwokArgs = append(kwokArgs, "--node-port", fmt.Sprint(kubeletPort), "--enable-crds", "Logs",
			"--server-address", net.JoinHostPort(nodeIP, fmt.Sprint(kubeletPort)))
	}
	for _, s := range stages {
		kwokArgs = append(kwokArgs, "--config", s)
	}
	kw, err := startProcess("kwok", kwok, kwokArgs, nil)
	if err != nil {
		return nil, err
	}
	registerStop(cm, sched, kw)

	// The controller manager is ready for Deployments once it has made the default service account.
	err = cm.waitReady(60*time.Second, func() error {
		_, err := client.CoreV1().ServiceAccounts("default").Get(context.Background(), "default", metav1.GetOptions{})
		return err
	})
	if err != nil {
		return nil, err
	}
	for _, p := range []*process{sched, kw} {
		if ended, err := p.exited(); ended {
			return nil, fmt.Errorf("%s exited at start (%v); log %s:\n%s", p.name, err, p.logPath, p.logTail(40))
		}
	}
	if err := warmPodIPPool(client); err != nil {
		return nil, fmt.Errorf("kwok's first pod IP: %w (kwok log %s)", err, kw.logPath)
	}
	c.StartTime = time.Since(began)
	return c, nil
}

// warmPodIPPool has kwok hand out its first pod IP to one pod alone. kwok
// v0.8.0 makes a CIDR's IP pool when it first needs one, with a Load and
// then a Store (PodController.ipPool, pkg/kwok/controllers/pod_controller.go),
// so pods of a fresh kwok that start at once can each make a pool and get
// the same first IPs: seen as two running pods on 10.250.0.2, whose
// processes could not both bind it. Once the pool exists, every pod shares
// it (its Get holds a lock). The pod runs on a node of its own, tainted so
// nothing else lands there, and both are gone before the cluster is handed
// out.
func warmPodIPPool(client kubernetes.Interface) error {
	ctx := context.Background()
	const name = "testenv-first-pod-ip"
	taint := corev1.Taint{Key: "llmd.dev/testenv", Value: "first-pod-ip", Effect: corev1.TaintEffectNoSchedule}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{taint}}, Status: corev1.NodeStatus{Allocatable: gpuNodeResources(0), Capacity: gpuNodeResources(0)}}
	if _, err := client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return err
	}
	defer client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{NodeName: name,
		Tolerations: []corev1.Toleration{{Key: taint.Key, Operator: corev1.TolerationOpExists}},
		Containers:  []corev1.Container{{Name: "pause", Image: "registry.invalid/pause:1"}}}}
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		return err
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		p, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err == nil && p.Status.PodIP != "" {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pod %s has no IP after 30s (%v)", name, err)
		}
	}
	if err := client.CoreV1().Pods("default").Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		return err
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pod %s not gone 30s after its deletion", name)
		}
	}
}

// httpOK is a readiness check: GET url through client answers 200.
func httpOK(client *http.Client, url string) func() error {
	return func() error {
		resp, err := client.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}

func (c *Cluster) kubeconfigYAML() []byte {
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: testenv
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: admin
  user:
    token: %s
contexts:
- name: testenv
  context: {cluster: testenv, user: admin}
current-context: testenv
`, c.Host, base64Std(c.CAData), c.Token))
}

// GPUNodeSpec describes fake nodes shaped like an EKS g5.xlarge GPU node group.
type GPUNodeSpec struct {
	// Prefix names the nodes Prefix-0, Prefix-1, ...
	Prefix string
	// Count is the number of nodes.
	Count int
	// GPUs per node (nvidia.com/gpu capacity); g5.xlarge has 1.
	GPUs int
	// Labels are added to every node, as EKS adds a node group's labels.
	Labels map[string]string
}

// AddGPUNodes creates fake GPU nodes (tainted nvidia.com/gpu=true:NoSchedule and
// labelled like an EKS managed node group) and waits until kwok reports them Ready.
// The nodes are deleted when the test ends.
func (c *Cluster) AddGPUNodes(t testing.TB, spec GPUNodeSpec) []string {
	t.Helper()
	var nodes []*corev1.Node
	for i := 0; i < spec.Count; i++ {
		name := fmt.Sprintf("%s-%d", spec.Prefix, i)
		node := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        name,
				Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
				Labels: map[string]string{
					"kubernetes.io/hostname":           name,
					"node.kubernetes.io/instance-type": "g5.xlarge",
					"eks.amazonaws.com/nodegroup":      spec.Prefix,
					"nvidia.com/gpu.present":           "true",
					"type":                             "kwok",
				},
			},
			Spec: corev1.NodeSpec{Taints: []corev1.Taint{GPUTaint}},
			Status: corev1.NodeStatus{
				Capacity:    gpuNodeResources(spec.GPUs),
				Allocatable: gpuNodeResources(spec.GPUs),
			},
		}
		for k, v := range spec.Labels {
			node.Labels[k] = v
		}
		nodes = append(nodes, node)
	}
	return c.addNodes(t, nodes)
}

// addNodes creates fake nodes, deletes them when the test ends and waits
// until kwok reports them Ready.
func (c *Cluster) addNodes(t testing.TB, nodes []*corev1.Node) []string {
	t.Helper()
	ctx := context.Background()
	var names []string
	for _, node := range nodes {
		if _, err := c.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			t.Fatalf("testenv: creating node %s: %v", node.Name, err)
		}
		names = append(names, node.Name)
	}
	t.Cleanup(func() {
		for _, n := range names {
			if err := c.Client.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("testenv: deleting node %s: %v", n, err)
			}
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range names {
		for {
			node, err := c.Client.CoreV1().Nodes().Get(ctx, n, metav1.GetOptions{})
			if err == nil && nodeReady(node) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("testenv: node %s not Ready after 30s (kwok log: %s)", n, filepath.Join(logDir, "kwok.log"))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return names
}

func gpuNodeResources(gpus int) corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("4"),
		corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
		"nvidia.com/gpu":      *resource.NewQuantity(int64(gpus), resource.DecimalSI),
	}
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Namespace creates a namespace unique to the test and deletes it at the end.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "t-"}}
	created, err := c.Client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("testenv: creating namespace: %v", err)
	}
	t.Cleanup(func() {
		_ = c.Client.CoreV1().Namespaces().Delete(context.Background(), created.Name, metav1.DeleteOptions{})
	})
	return created.Name
}
