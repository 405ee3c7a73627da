package testenv

import (
	"net"
	"strings"
	"testing"
)

// TestListenersInFindsAServedPodIP proves the guard claimPodCIDR uses to
// skip a block an earlier binary's orphan still serves in: a listener on one
// of this binary's pod IPs is found in its /22 and in no other.
func TestListenersInFindsAServedPodIP(t *testing.T) {
	ip := testPodIPs(t, 1)[0]
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	block := (&net.IPNet{IP: net.ParseIP(ip).Mask(net.CIDRMask(22, 32)), Mask: net.CIDRMask(22, 32)}).String()
	held := listenersIn(block)
	if len(held) != 1 || !strings.Contains(held[0], l.Addr().String()) {
		t.Fatalf("listeners in %s: %q, want the one on %s", block, held, l.Addr())
	}
	other := "10.250.252.0/22"
	if strings.HasPrefix(block, "10.250.252.") {
		other = "10.250.248.0/22"
	}
	if held := listenersIn(other); len(held) != 0 {
		t.Fatalf("listeners in %s: %q, want none", other, held)
	}
}
