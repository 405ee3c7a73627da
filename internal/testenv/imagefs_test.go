package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/llmd-dev/terraform-provider-llmd/internal/image"
)

// TestRouterImageServesFromItsRootfs runs the router image the way a pod
// would: two simulated vLLM replicas and the router, each the image's binary
// started in its own root filesystem unpacked from the image's layers, bound
// to pod IPs, the router configured by a file as a config map would give it.
// A request sent to the router's pod IP must reach a replica and come back.
func TestRouterImageServesFromItsRootfs(t *testing.T) {
	img := RouterImageRootfs(t)
	if want := []string{image.BinaryPath, "serve"}; strings.Join(img.Config.Entrypoint, " ") != strings.Join(want, " ") {
		t.Fatalf("entrypoint %q, want %q", img.Config.Entrypoint, want)
	}

	help := img.Start(t, Container{Args: []string{"--help"}})
	if err := help.Wait(30 * time.Second); err != nil {
		t.Fatalf("serve --help in the image: %v\n%s", err, help.Logs())
	}
	if !strings.Contains(help.Logs(), "-listen") || !strings.Contains(help.Logs(), "-pods-file") {
		t.Fatalf("serve --help printed no usage of serve's flags:\n%s", help.Logs())
	}

	version := img.Start(t, Container{Command: []string{image.BinaryPath, "version"}})
	if err := version.Wait(30 * time.Second); err != nil {
		t.Fatalf("llmd-router version in the image: %v\n%s", err, version.Logs())
	}
	labels := img.Config.Labels
	if want := "llmd-router " + labels["org.opencontainers.image.version"] + " (commit " + labels["org.opencontainers.image.revision"]; !strings.HasPrefix(version.Logs(), want) {
		t.Fatalf("llmd-router version in the image printed %q, want it to start %q", version.Logs(), want)
	}

	ips := testPodIPs(t, 3)
	routerIP, replicaIPs := ips[0], ips[1:]
	var static strings.Builder
	for i, ip := range startReplicas(t, img, replicaIPs) {
		fmt.Fprintf(&static, "    - {name: vllm-%d, ip: %s}\n", i, ip)
	}
	routerYAML := "model: " + simModel + "\ndiscovery:\n  static:\n" + static.String() +
		"  ports: {http: 8000, kv_events: 5557, replay: 5558}\n"
	router := img.Start(t, Container{
		Args:  []string{"--listen", "$(POD_IP):8000", "--config", "/etc/llmd/router.yaml"},
		PodIP: routerIP,
		Files: map[string][]byte{"/etc/llmd/router.yaml": []byte(routerYAML)},
	})
	url := "http://" + routerIP + ":8000"
	waitHTTP(t, router, url+"/healthz")
	waitHTTP(t, router, url+"/readyz")

	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", router.PID()))
	if err != nil {
		t.Fatalf("reading the router's process status: %v", err)
	}
	for _, want := range []string{"Uid:\t65532\t65532\t65532\t65532", "Gid:\t65532\t65532\t65532\t65532"} {
		if !strings.Contains(string(status), want) {
			t.Errorf("the router's /proc status lacks %q:\n%s", want, status)
		}
	}
	if !strings.Contains(string(status), "NSpid:\t"+fmt.Sprint(router.PID())+"\t1\n") {
		t.Errorf("the router is not PID 1 of its own PID namespace:\n%s", status)
	}
	if pod := routedRequest(t, router, url); pod != "vllm-0" && pod != "vllm-1" {
		t.Fatalf("the router names pod %q, not one of the replicas", pod)
	}
}

// TestRouterImageDiscoversPodsInCluster runs the image as a router pod
// does in a cluster: kwok schedules two vLLM pods and a router pod, simulated
// replicas from the image answer on the vLLM pods' IPs, and the router,
// started from the image on its own pod's IP with a service account mounted
// and the in-cluster environment, finds the vLLM pods through the API server.
func TestRouterImageDiscoversPodsInCluster(t *testing.T) {
	img := RouterImageRootfs(t)
	c := StartCluster(t)
	ServePodIPs(t)
	c.AddGPUNodes(t, GPUNodeSpec{Prefix: "imagefs", Count: 3, GPUs: 1})
	ns := c.Namespace(t)
	ctx := context.Background()
	tolerate := []corev1.Toleration{{Key: GPUTaint.Key, Operator: corev1.TolerationOpEqual, Value: GPUTaint.Value, Effect: GPUTaint.Effect}}
	ips := map[string]string{}
	for name, app := range map[string]string{"vllm-0": "vllm", "vllm-1": "vllm", "router": "router"} {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": app}},
			Spec: corev1.PodSpec{Tolerations: tolerate, TerminationGracePeriodSeconds: ptr.To[int64](1),
				Containers: []corev1.Container{{Name: app, Image: img.Reference}}},
		}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(ips) < 3 {
		list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range list.Items {
			if p.Status.PodIP != "" && p.Status.Phase == corev1.PodRunning {
				ips[p.Name] = p.Status.PodIP
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pods with IPs after 30s: %v", ips)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if ips["vllm-0"] == ips["vllm-1"] || ips["router"] == ips["vllm-0"] || ips["router"] == ips["vllm-1"] {
		t.Fatalf("kwok gave two running pods one IP: %v", ips)
	}
	startReplicas(t, img, []string{ips["vllm-0"], ips["vllm-1"]})

	host, port, err := net.SplitHostPort(strings.TrimPrefix(c.Host, "https://"))
	if err != nil {
		t.Fatal(err)
	}
	const sa = "/var/run/secrets/kubernetes.io/serviceaccount/"
	router := img.Start(t, Container{
		Args:  []string{"--listen", "$(POD_IP):8000", "--config", "/etc/llmd/router.yaml"},
		Env:   []string{"KUBERNETES_SERVICE_HOST=" + host, "KUBERNETES_SERVICE_PORT=" + port},
		PodIP: ips["router"],
		Files: map[string][]byte{
			"/etc/llmd/router.yaml": []byte("model: " + simModel + "\ndiscovery:\n  kubernetes: {namespace: " + ns + ", selector: app=vllm}\n"),
			sa + "token":            []byte(c.Token),
			sa + "ca.crt":           c.CAData,
			sa + "namespace":        []byte(ns),
		},
	})
	url := "http://" + ips["router"] + ":8000"
	waitHTTP(t, router, url+"/readyz")
	seen := map[string]bool{}
	for range 6 {
		seen[routedRequest(t, router, url)] = true
	}
	for pod := range seen {
		if pod != "vllm-0" && pod != "vllm-1" {
			t.Fatalf("requests went to %v, not only to the cluster's vLLM pods", seen)
		}
	}
}

// simModel is the model `llmd-router sim` serves by default.
const simModel = "Qwen/Qwen2.5-7B-Instruct"

// startReplicas runs one simulated vLLM replica from the image on each pod
// IP, at vLLM's ports (HTTP 8000, KV events 5557, replay 5558), and waits
// until each serves; it returns the IPs.
func startReplicas(t *testing.T, img *Image, ips []string) []string {
	t.Helper()
	for i, ip := range ips {
		sim := img.Start(t, Container{
			Command: []string{image.BinaryPath, "sim"},
			Args:    []string{"--host", "$(POD_IP)", "--port", "8000", "--kv-port", "5557", "--time-scale", "20", "--seed", fmt.Sprint(i + 1)},
			PodIP:   ip,
		})
		waitHTTP(t, sim, "http://"+ip+":8000/metrics")
	}
	return ips
}

// routedRequest sends one token-id completion through the router and
// returns the pod the router says it chose.
func routedRequest(t *testing.T, router *ContainerProcess, url string) string {
	t.Helper()
	prompt := make([]uint32, 40)
	for i := range prompt {
		prompt[i] = uint32(1000 + i*37)
	}
	body, _ := json.Marshal(map[string]any{"model": simModel, "prompt": prompt, "max_tokens": 4})
	resp, err := http.Post(url+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("routed request: %v\n%s", err, router.Logs())
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("routed request: %d %s\n%s", resp.StatusCode, answer, router.Logs())
	}
	var completion struct {
		Choices []struct{ Text string }
		Usage   struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(answer, &completion); err != nil || len(completion.Choices) != 1 || completion.Usage.CompletionTokens != 4 {
		t.Fatalf("routed request answered %s (%v), want one choice of 4 tokens", answer, err)
	}
	return resp.Header.Get("X-Llmd-Pod")
}

// testPodIPs reserves n pod IPs of a pod CIDR of this test binary's own, so
// they collide neither with kwok's nor with another test binary's.
func testPodIPs(t *testing.T, n int) []string {
	t.Helper()
	ServePodIPs(t)
	cidr, err := claimPodCIDR()
	if err != nil {
		t.Fatal(err)
	}
	base, _, err := net.ParseCIDR(cidr)
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for i := range n {
		ip := base.To4()
		ips = append(ips, net.IPv4(ip[0], ip[1], ip[2], byte(10+i)).String())
	}
	return ips
}

// waitHTTP polls url until it answers 200, failing if the container exits first.
func waitHTTP(t *testing.T, c *ContainerProcess, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		if ended, werr := c.Exited(); ended {
			t.Fatalf("container exited (%v) before %s answered:\n%s\nlisteners in the pod network: %q", werr, url, c.Logs(), listenersIn(podNetwork))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v after 30s\n%s", url, err, c.Logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestExpandArgsLikeKubernetes(t *testing.T) {
	env := []string{"POD_IP=10.250.3.4", "EMPTY="}
	got := expandArgs([]string{"$(POD_IP):8000", "$$(POD_IP)", "$(MISSING)", "a$(EMPTY)b", "cost $5", "$"}, env)
	want := []string{"10.250.3.4:8000", "$(POD_IP)", "$(MISSING)", "ab", "cost $5", "$"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("expandArgs = %q, want %q", got, want)
	}
}
