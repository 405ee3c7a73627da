package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/llmd-dev/terraform-provider-llmd/internal/freeport"
	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
)

// The serve tests run the real binary, built once per test run, as
// separate processes: the router under test and simulated replicas, each
// replica its own process so that one can be killed.

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// binary builds llmd-router once for every test in the package, with the
// race detector when LLMD_TEST_RACE=1.
func binary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "llmd-router-test"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "llmd-router")
		args := []string{"build", "-o", binPath}
		if os.Getenv("LLMD_TEST_RACE") == "1" {
			// The processes under test are not covered by go test -race.
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// syncBuffer collects a process's stderr for failure messages.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// proc is a started llmd-router process.
type proc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	done   chan struct{}
	err    error // valid after done
}

// start runs llmd-router with args, pinned to the CPU list cpus with
// taskset unless cpus is "", and decodes `lines` JSON lines of its stdout
// into out (a pointer to a slice). The process is stopped with SIGTERM at
// the end of the test unless it already exited.
func start(t testing.TB, cpus string, lines int, out any, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binary(t), args...)
	if cpus != "" {
		cmd = exec.Command("taskset", append([]string{"-c", cpus, binary(t)}, args...)...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlives a killed test binary
	p := &proc{cmd: cmd, stderr: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop(t, syscall.SIGTERM, 10*time.Second)
		if strings.Contains(p.stderr.String(), "WARNING: DATA RACE") {
			t.Errorf("llmd-router %s reported a data race", args[0])
		}
		if t.Failed() {
			t.Logf("%s stderr:\n%s", args[0], tail(p.stderr.String(), 4000))
		}
	})
	dec := json.NewDecoder(bufio.NewReader(stdout))
	lineCh := make(chan error, 1)
	go func() {
		var raw []json.RawMessage
		for range lines {
			var m json.RawMessage
			if err := dec.Decode(&m); err != nil {
				lineCh <- err
				return
			}
			raw = append(raw, m)
		}
		b, _ := json.Marshal(raw)
		lineCh <- json.Unmarshal(b, out)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case err := <-lineCh:
		if err != nil {
			t.Fatalf("llmd-router %s: reading its announcement: %v\n%s", args[0], err, p.stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("llmd-router %s did not announce itself in 60s:\n%s", args[0], p.stderr.String())
	}
	return p
}

// stop signals the process and waits up to wait before killing it. It
// returns the exit error (nil for status 0).
func (p *proc) stop(t testing.TB, sig os.Signal, wait time.Duration) error {
	select {
	case <-p.done:
		return p.err
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
	case <-time.After(wait):
		t.Errorf("%q did not exit %s after %v; killing it", p.cmd.Args, wait, sig)
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return p.err
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// startReplicas runs n simulated replicas, one process each, on free ports.
func startReplicas(t testing.TB, n int, args ...string) ([]sim.ReplicaInfo, []*proc) {
	t.Helper()
	infos := make([]sim.ReplicaInfo, n)
	procs := make([]*proc, n)
	for i := range n {
		var one []sim.ReplicaInfo
		httpPort, kvPort := stablePorts(t)
		procs[i] = start(t, "", 1, &one, append([]string{"sim", "--replicas", "1", "--port", httpPort, "--kv-port", kvPort,
			"--seed", fmt.Sprint(i + 1)}, args...)...)
		infos[i] = one[0]
		// Every process names its one replica sim-0; the router needs distinct names.
		infos[i].Pod = fmt.Sprintf("sim-%d", i)
	}
	return infos, procs
}

// stablePorts are an HTTP port and a KV-event port pair (kv, kv+1 for the
// replay socket), below the kernel's ephemeral range (freeport.Port). A
// router redialling a dead engine's port in the ephemeral range can connect
// to itself (the kernel may pick that very port as the source) and hold it,
// so an engine restarted on its old ports would find them taken.
func stablePorts(t testing.TB) (httpPort, kvPort string) {
	t.Helper()
	front, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	kv, err := freeport.Ports(2)
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(front), strconv.Itoa(kv[0])
}

// podsFile writes infos as the JSON lines `llmd-router sim` prints.
func podsFile(t testing.TB, infos []sim.ReplicaInfo) string {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	for _, info := range infos {
		if err := enc.Encode(info); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "pods.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// router is a running `llmd-router serve`.
type router struct {
	*proc
	url string
}

// startRouter runs `llmd-router serve` on a free port over the pods and
// waits until it is ready and has seen every pod's /metrics.
func startRouter(t *testing.T, infos []sim.ReplicaInfo, args ...string) *router {
	t.Helper()
	return startServe(t, len(infos), append([]string{"--pods-file", podsFile(t, infos)}, args...)...)
}

// startServe runs `llmd-router serve` on a free port with args and waits
// until /readyz answers 200 and discovery reports pods pods.
func startServe(t *testing.T, pods int, args ...string) *router {
	t.Helper()
	var ann []struct{ Listen string }
	p := start(t, "", 1, &ann, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	r := &router{proc: p, url: "http://" + ann[0].Listen}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(r.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && r.gauge(t, "llmd_router_pods") == float64(pods) {
				return r
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("router not ready with %d pods in 20s: %v\n%s", pods, err, p.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// metrics scrapes a Prometheus text endpoint.
func metrics(t testing.TB, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing %s: %v", url, err)
	}
	return fams
}

// sum adds the values of every series of a family whose labels include
// the given name=value pairs; histograms count observations. A missing
// family is -1, so a check for presence cannot pass by a zero default.
func sum(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f, ok := fams[name]
	if !ok {
		return -1
	}
	total := 0.0
series:
	for _, m := range f.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
				}
			}
			if !found {
				continue series
			}
		}
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Histogram != nil:
			total += float64(m.Histogram.GetSampleCount())
		case m.Untyped != nil:
			total += m.Untyped.GetValue()
		}
	}
	return total
}

// gauge reads one family of the router's /metrics.
func (r *router) gauge(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	return sum(metrics(t, r.url+"/metrics"), name, labels...)
}
