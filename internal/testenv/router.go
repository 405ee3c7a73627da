package testenv

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	routerOnce sync.Once
	routerBin  string
	routerErr  error
)

// RouterBinary builds llmd-router (cgo, libzmq) once per test binary, so
// tests can start real `llmd-router sim` and `serve` processes where a
// cluster's pods would run.
func RouterBinary(t testing.TB) string {
	t.Helper()
	routerOnce.Do(func() {
		dir, err := os.MkdirTemp("", "llmd-testenv-router-")
		if err != nil {
			routerErr = err
			return
		}
		onStop(func(bool) { os.RemoveAll(dir) })
		routerBin = filepath.Join(dir, "llmd-router")
		cmd := exec.Command("go", "build", "-o", routerBin, "./router/cmd/llmd-router")
		cmd.Dir = filepath.Join(sourceDir(), "..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			routerErr = fmt.Errorf("go build ./router/cmd/llmd-router: %v\n%s", err, out)
		}
	})
	if routerErr != nil {
		unavailable(t, "llmd-router", routerErr, "needs Go and libzmq3-dev (make deps)")
	}
	return routerBin
}

// RouterProcess is a running llmd-router subcommand.
type RouterProcess struct {
	// Announced are the JSON lines it printed on stdout at start (a sim prints one per replica).
	Announced []map[string]any
	cmd       *exec.Cmd
	stderr    *strings.Builder
	mu        *sync.Mutex
	done      chan struct{}
}

// Stop ends the process (SIGTERM, SIGKILL after 10 s) and waits for it.
func (p *RouterProcess) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// StartRouter runs `llmd-router args...`, waits for `lines` JSON lines on its
// stdout (its announcement) and stops it with SIGTERM when the test ends.
func StartRouter(t testing.TB, lines int, args ...string) *RouterProcess {
	t.Helper()
	cmd := exec.Command(RouterBinary(t), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &RouterProcess{cmd: cmd, stderr: &strings.Builder{}, mu: &sync.Mutex{}}
	cmd.Stderr = lockedWriter{p}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting llmd-router %s: %v", strings.Join(args, " "), err)
	}
	p.done = make(chan struct{})
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("llmd-router %s stderr:\n%s", args[0], p.Stderr())
		}
	})
	got := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for len(p.Announced) < lines && sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				got <- fmt.Errorf("announcement line %q: %w", sc.Text(), err)
				return
			}
			p.Announced = append(p.Announced, m)
		}
		if len(p.Announced) < lines {
			got <- fmt.Errorf("stdout ended after %d of %d announcement lines", len(p.Announced), lines)
			return
		}
		got <- nil
		for sc.Scan() {
		}
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("llmd-router %s: %v\n%s", args[0], err, p.Stderr())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("llmd-router %s did not announce itself in 60s:\n%s", args[0], p.Stderr())
	}
	return p
}

// Stderr is what the process wrote to stderr so far.
func (p *RouterProcess) Stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

type lockedWriter struct{ p *RouterProcess }

func (w lockedWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.stderr.Write(b)
}
