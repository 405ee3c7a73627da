// Package freeport finds TCP ports on loopback that a process about to
// start can bind: free now, and outside the kernel's ephemeral range, so
// that no outgoing connection takes one in the meantime. The test ground
// (internal/testenv) and the live bench's router replicas (internal/bench)
// use it.
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Port returns a TCP port on 127.0.0.1 that is free now and lies below
// the kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768-60999 by
// default), from which every outgoing connection takes its source port. A
// port from that range, as a listen on port 0 picks, can be taken by any
// connection of any test before the part binds it: seen as etcd exiting with
// "bind: address already in use" while other packages' tests ran, which
// failed every control-plane test of that binary. The port is free when
// Port returns; whoever binds it next gets it, so bind it at once.
func Port() (int, error) {
	ports, err := Ports(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// Ports returns n adjacent free ports p, p+1, ... p+n-1, chosen as Port
// chooses one.
func Ports(n int) ([]int, error) {
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
