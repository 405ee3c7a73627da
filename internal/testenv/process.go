package testenv

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
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
