package testenv

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// process is one long-running part (moto_server, etcd, kube-apiserver, ...)
// with its output in a log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	waitErr error
}

var (
	logDirOnce sync.Once
	logDir     string
	logDirErr  error
)

// runLogDir is one directory per test binary for the parts' logs.
func runLogDir() (string, error) {
	logDirOnce.Do(func() {
		logDir, logDirErr = os.MkdirTemp("", "llmd-testenv-logs-")
	})
	return logDir, logDirErr
}

// startProcess starts bin with args, its output going to a log file. The child
// gets SIGKILL if the test binary dies, so no part outlives a crashed test.
func startProcess(name, bin string, args []string, env []string) (*process, error) {
	return startProcessTee(name, bin, args, env, nil)
}

// startProcessTee is startProcess with the output also going to also, when
// it is not nil.
func startProcessTee(name, bin string, args []string, env []string, also io.Writer) (*process, error) {
	dir, err := runLogDir()
	if err != nil {
		return nil, fmt.Errorf("creating log directory: %w", err)
	}
	logPath := filepath.Join(dir, name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", logPath, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	var out io.Writer = logFile
	if also != nil {
		out = io.MultiWriter(logFile, also)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, bin, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, with its error.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// waitReady polls ready until it returns nil, the process exits, or the timeout passes.
func (p *process) waitReady(timeout time.Duration, ready func() error) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	for {
		if ended, err := p.exited(); ended {
			return fmt.Errorf("%s exited before it was ready (%v); log %s:\n%s", p.name, err, p.logPath, p.logTail(40))
		}
		if last = ready(); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s: %v; log %s:\n%s", p.name, timeout, last, p.logPath, p.logTail(40))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stop ends the process group politely, then forcibly.
func (p *process) stop() {
	if ended, _ := p.exited(); ended {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// logTail returns the last n lines of the process's log, for error messages.
func (p *process) logTail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	return tail(string(b), n)
}

// registerStop makes Main stop the processes.
func registerStop(procs ...*process) {
	onStop(func(bool) {
		for i := len(procs) - 1; i >= 0; i-- {
			procs[i].stop()
		}
	})
}

// finishLogs keeps the parts' logs (printing where) after a failed run and
// removes them after a clean one.
func finishLogs(keep bool) {
	if logDir == "" {
		return
	}
	if keep {
		fmt.Fprintf(os.Stderr, "testenv: logs of the parts kept in %s\n", logDir)
		return
	}
	os.RemoveAll(logDir)
}

// FreePort returns a TCP port on 127.0.0.1 that is free now and lies below
// the kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768-60999 by
// default), from which every outgoing connection takes its source port. A
// port from that range, as a listen on port 0 picks, can be taken by any
// connection of any test before the part binds it: seen as etcd exiting with
// "bind: address already in use" while other packages' tests ran, which
// failed every control-plane test of that binary.
func FreePort() (int, error) {
	ports, err := FreePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// FreePorts returns n adjacent free ports p, p+1, ... p+n-1, chosen as
// FreePort chooses one.
func FreePorts(n int) ([]int, error) {
	var got []int
	for len(got) < n {
		p := int(nextFreePort.Add(1))
		if p >= ephemeralPortStart() {
			return nil, fmt.Errorf("finding a free port: none left below the ephemeral range, which starts at %d", ephemeralPortStart())
		}
		if len(got) > 0 && p != got[len(got)-1]+1 {
			got = got[:0] // another goroutine took the next one
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			got = got[:0]
			continue
		}
		l.Close()
		got = append(got, p)
	}
	return got, nil
}

// nextFreePort starts at a random point of 20000-29999, so the test
// binaries of packages running at the same time rarely probe the same ports.
var nextFreePort = func() *atomic.Int64 {
	var n atomic.Int64
	n.Store(20000 + rand.Int64N(10000))
	return &n
}()

// ephemeralPortStart is the first port of the kernel's ephemeral range, or
// Linux's default where it cannot be read.
var ephemeralPortStart = sync.OnceValue(func() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	fields := strings.Fields(string(b))
	if len(fields) != 2 {
		return 32768
	}
	first, err := strconv.Atoi(fields[0])
	if err != nil {
		return 32768
	}
	return first
})
