package testenv

import (
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// podNetwork is the range that ServePodIPs routes to loopback; every control
// plane takes one /22 of it for kwok's pod IPs (1,022 addresses: a 256-pod
// fleet and its churn fit, where a /24's 254 do not).
const podNetwork = "10.250.0.0/16"

var (
	cidrLocks   = map[string]*os.File{}
	routeOnce   sync.Once
	routeErr    error
	routeCIDRMu sync.Mutex
)

// claimPodCIDR reserves a 10.250.4N.0/22 for this test binary's kwok, holding a
// lock file for the life of the process so parallel test binaries never hand
// out the same pod IPs. It returns the block's first address with its prefix
// length, as kwok's --cidr takes it.
func claimPodCIDR() (string, error) {
	dir, err := podCIDRDir()
	if err != nil {
		return "", err
	}
	for n := 0; n < 64; n++ {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("block22-%d.lock", n)), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return "", err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close()
			continue
		}
		block := fmt.Sprintf("10.250.%d.0/22", 4*n)
		if held := listenersIn(block); len(held) > 0 {
			// A process of a test binary that has ended (an orphan of a
			// killed run) still serves in the block: kwok would hand its
			// IPs to new pods, and their processes could not bind them.
			fmt.Fprintf(os.Stderr, "testenv: skipping pod CIDR %s, still served by:\n  %s\n", block, strings.Join(held, "\n  "))
			f.Close()
			continue
		}
		routeCIDRMu.Lock()
		cidrLocks[f.Name()] = f
		routeCIDRMu.Unlock()
		onStop(func(bool) {
			routeCIDRMu.Lock()
			delete(cidrLocks, f.Name())
			routeCIDRMu.Unlock()
			f.Close()
		})
		return fmt.Sprintf("10.250.%d.1/22", 4*n), nil
	}
	return "", fmt.Errorf("all pod CIDRs under %s are taken by other test binaries", podNetwork)
}

// podCIDRDir holds the pod-CIDR locks. It is machine-wide (not in the cache,
// which a run may relocate) because the route and the IPs are machine-wide.
func podCIDRDir() (string, error) {
	dir := filepath.Join(os.TempDir(), "llmd-testenv-podcidr")
	return dir, os.MkdirAll(dir, 0o755)
}

// ServePodIPs makes kwok's fake pod IPs reachable on this machine: it routes
// 10.250.0.0/16 to loopback (an AnyIP route, needs root), so a local process can
// listen on a pod's IP and answer requests sent there, as a vLLM container would.
// ClusterIPs still do not route (there is no kube-proxy): clients reach pods
// through their IPs or a Service's EndpointSlices. The route is removed when the
// last test binary holding a pod CIDR stops.
func ServePodIPs(t testing.TB) {
	t.Helper()
	routeOnce.Do(func() { routeErr = addPodRoute() })
	if routeErr != nil {
		unavailable(t, "pod IPs on loopback", routeErr, "run the tests as root with iproute2 installed (apt-get install iproute2)")
	}
}

func addPodRoute() error {
	ip, err := exec.LookPath("ip")
	if err != nil {
		return fmt.Errorf("ip (iproute2) not on PATH: %w", err)
	}
	show, err := exec.Command(ip, "route", "show", "table", "local", podNetwork).Output()
	if err != nil {
		return fmt.Errorf("ip route show: %w", err)
	}
	if !strings.Contains(string(show), podNetwork) {
		if out, err := exec.Command(ip, "route", "add", "local", podNetwork, "dev", "lo").CombinedOutput(); err != nil {
			return fmt.Errorf("ip route add local %s dev lo: %v: %s", podNetwork, err, out)
		}
	}
	// Whichever binary stops last removes the route, whoever added it.
	onStop(func(bool) {
		if !otherPodCIDRsHeld() {
			_ = exec.Command(ip, "route", "del", "local", podNetwork, "dev", "lo").Run()
		}
	})
	return nil
}

// otherPodCIDRsHeld reports whether another test binary still holds a pod CIDR
// and so may still serve on pod IPs.
func otherPodCIDRsHeld() bool {
	dir, err := podCIDRDir()
	if err != nil {
		return true
	}
	locks, _ := filepath.Glob(filepath.Join(dir, "*.lock"))
	routeCIDRMu.Lock()
	defer routeCIDRMu.Unlock()
	for _, l := range locks {
		if _, ours := cidrLocks[l]; ours {
			continue
		}
		f, err := os.Open(l)
		if err != nil {
			continue
		}
		busy := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil
		f.Close()
		if busy {
			return true
		}
	}
	return false
}

// listenersIn lists the TCP listeners on addresses in cidr as ss prints
// them, with their processes. It returns nil when ss cannot run: the check
// is a guard, and ServePodIPs reports a missing iproute2.
func listenersIn(cidr string) []string {
	_, block, err := net.ParseCIDR(cidr)
	if err != nil {
		return nil
	}
	out, err := exec.Command("ss", "-Hltnp").Output()
	if err != nil {
		return nil
	}
	var held []string
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 4 {
			continue
		}
		host, _, err := net.SplitHostPort(fields[3])
		if err != nil {
			continue
		}
		if ip := net.ParseIP(host); ip != nil && block.Contains(ip) {
			held = append(held, line)
		}
	}
	return held
}

func base64Std(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
