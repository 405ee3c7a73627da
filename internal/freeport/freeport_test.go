package freeport

import (
	"fmt"
	"net"
	"testing"
)

// TestPortsLieBelowTheEphemeralRange: every port handed out is free,
// below the range outgoing connections take their source ports from, never
// handed out twice, and a run of two is adjacent.
func TestPortsLieBelowTheEphemeralRange(t *testing.T) {
	seen := map[int]bool{}
	for range 20 {
		ports, err := Ports(2)
		if err != nil {
			t.Fatal(err)
		}
		if ports[1] != ports[0]+1 {
			t.Fatalf("Ports(2) = %v, not adjacent", ports)
		}
		for _, p := range ports {
			if p >= ephemeralPortStart() {
				t.Fatalf("port %d is in the ephemeral range, which starts at %d", p, ephemeralPortStart())
			}
			if seen[p] {
				t.Fatalf("port %d handed out twice", p)
			}
			seen[p] = true
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				t.Fatalf("port %d handed out but not free: %v", p, err)
			}
			l.Close()
		}
	}
}

// TestPortSkipsAPortInUse: a port something listens on is passed over.
func TestPortSkipsAPortInUse(t *testing.T) {
	var held net.Listener
	for held == nil {
		next := int(nextFreePort.Load()) + 1
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", next))
		if err != nil {
			nextFreePort.Add(1) // taken by something else already: try the one after
			continue
		}
		held = l
	}
	defer held.Close()
	p, err := Port()
	if err != nil {
		t.Fatal(err)
	}
	if heldPort := held.Addr().(*net.TCPAddr).Port; p == heldPort {
		t.Fatalf("Port returned %d, which a listener holds", p)
	}
}
