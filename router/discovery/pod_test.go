package discovery_test

import (
	"strings"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/router/config"
	"github.com/llmd-dev/terraform-provider-llmd/router/discovery"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
)

// TestEndpointsPerDataParallelRank: rank r of a pod publishes and replays on
// the pod's ports + r, as vLLM offsets them; without data parallelism a pod
// has one endpoint at its own addresses.
func TestEndpointsPerDataParallelRank(t *testing.T) {
	d := config.Discovery{Ports: config.Ports{HTTP: 8000, KVEvents: 5557, Replay: 5600}, Topic: "kv"}
	a := discovery.Addresses{Discovery: d, Model: "m"}
	pod := a.Fill(discovery.Pod{Name: "p", IP: "10.0.0.7"})
	one, err := a.Endpoints(pod)
	if err != nil || len(one) != 1 || one[0] != (kvevents.Endpoint{Pod: "p", Addr: "tcp://10.0.0.7:5557", ReplayAddr: "tcp://10.0.0.7:5600", Topic: "kv"}) {
		t.Fatalf("without data parallelism: %+v, %v", one, err)
	}
	a.Discovery.DataParallelSize = 3
	ranks, err := a.Endpoints(pod)
	if err != nil || len(ranks) != 3 {
		t.Fatalf("DP 3: %+v, %v", ranks, err)
	}
	for r, ep := range ranks {
		want := kvevents.Endpoint{Pod: "p", Addr: "tcp://10.0.0.7:" + []string{"5557", "5558", "5559"}[r],
			ReplayAddr: "tcp://10.0.0.7:" + []string{"5600", "5601", "5602"}[r], Topic: "kv"}
		if ep != want {
			t.Errorf("rank %d: %+v, want %+v", r, ep, want)
		}
	}
	noReplay, err := a.Endpoints(discovery.Pod{Name: "q", KVEvents: "tcp://[fd00::1]:7000"})
	if err != nil || noReplay[2].Addr != "tcp://[fd00::1]:7002" || noReplay[2].ReplayAddr != "" {
		t.Errorf("IPv6 without replay: %+v, %v", noReplay, err)
	}
	if _, err := a.Endpoints(discovery.Pod{Name: "r", KVEvents: "ipc:///tmp/kv"}); err == nil || !strings.Contains(err.Error(), "r rank 1") {
		t.Errorf("a non-tcp address offset without a clear error: %v", err)
	}
}
