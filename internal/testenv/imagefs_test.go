package testenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

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
	for i, ip := range replicaIPs {
		sim := img.Start(t, Container{
			Command: []string{image.BinaryPath, "sim"},
			Args:    []string{"--host", "$(POD_IP)", "--port", "8000", "--kv-port", "5557", "--time-scale", "20", "--seed", fmt.Sprint(i + 1)},
			PodIP:   ip,
		})
		waitHTTP(t, sim, "http://"+ip+":8000/metrics")
		fmt.Fprintf(&static, "    - {name: vllm-%d, ip: %s}\n", i, ip)
	}
	routerYAML := "model: Qwen/Qwen2.5-7B-Instruct\ndiscovery:\n  static:\n" + static.String() +
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
	for _, want := range []string{"Uid:\t65532\t65532\t65532\t65532", "Gid:\t65532\t65532\t65532\t65532", "NSpid:\t"} {
		if !strings.Contains(string(status), want) {
			t.Errorf("the router's /proc status lacks %q:\n%s", want, status)
		}
	}
	if !strings.Contains(string(status), "NSpid:\t"+fmt.Sprint(router.PID())+"\t1\n") {
		t.Errorf("the router is not PID 1 of its own PID namespace:\n%s", status)
	}

	prompt := make([]uint32, 40)
	for i := range prompt {
		prompt[i] = uint32(1000 + i*37)
	}
	body, _ := json.Marshal(map[string]any{"model": "Qwen/Qwen2.5-7B-Instruct", "prompt": prompt, "max_tokens": 4})
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
	if pod := resp.Header.Get("X-Llmd-Pod"); pod != "vllm-0" && pod != "vllm-1" {
		t.Fatalf("the router names pod %q, not one of the replicas", pod)
	}
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
			t.Fatalf("container exited (%v) before %s answered:\n%s", werr, url, c.Logs())
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
