package bench

import (
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/internal/sim"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
)

// TestTwoRoutersSpreadConnectionsAndFinishEveryRequest runs the default
// policy behind two router replicas on a small contended workload: every
// request must finish, both replicas must decide requests, and each client
// connection must keep its replica, as kube-proxy pins a keep-alive
// connection to the endpoint it picked.
func TestTwoRoutersSpreadConnectionsAndFinishEveryRequest(t *testing.T) {
	w := contended()
	w.NumPrompts = 2 * w.NumPrefixes
	policy := PolicyBest + routersSep + "2"
	if Routers(policy) != 2 {
		t.Fatalf("Routers(%q) = %d, want 2", policy, Routers(policy))
	}
	rep, err := RunVirtual(w, []string{policy}, LiveLag(1))
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Policies[0]
	if s.Completed != w.NumPrompts || s.Failed != 0 {
		t.Fatalf("%s: %d of %d requests completed, %d failed", policy, s.Completed, w.NumPrompts, s.Failed)
	}
	if len(s.RouterRequests) != 2 || s.RouterRequests[0]+s.RouterRequests[1] != w.NumPrompts {
		t.Fatalf("%s: router requests %v, want two counts summing to %d", policy, s.RouterRequests, w.NumPrompts)
	}
	for k, n := range s.RouterRequests {
		if n < w.NumPrompts/4 {
			t.Errorf("%s: router %d decided %d of %d requests: the Service did not spread the connections", policy, k, n, w.NumPrompts)
		}
	}

	// The same run at the simulator's level: each connection stays on one replica.
	ds, err := w.SimDataset()
	if err != nil {
		t.Fatal(err)
	}
	scorers, _, _ := RouterScorers(policy)
	ps := make([]sim.Picker, 2)
	for k := range ps {
		if ps[k], err = virtualPicker(policy, scorers, w.Seed); err != nil {
			t.Fatal(err)
		}
	}
	lag := LiveLag(1)
	res, err := sim.RunVirtual(sim.VirtualConfig{Engine: w.engineConfig(), Replicas: w.Replicas, Workload: ds,
		Concurrency: w.MaxConcurrency, Picker: ps[0], Routers: ps, EventDelay: lag.EventDelay, ScrapeInterval: lag.Scrape,
		SpeculationTTL: lag.SpeculationTTL, RouterCost: lag.PerRequest, Form: kvevents.FormMap, Seed: w.Seed})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Records) != w.NumPrompts {
		t.Fatalf("%d of %d requests finished", len(res.Records), w.NumPrompts)
	}
	connRouter := map[int]int{}
	for _, r := range res.Records {
		if k, ok := connRouter[r.Conn]; ok && k != r.Router {
			t.Fatalf("connection %d reached router %d, then router %d", r.Conn, k, r.Router)
		}
		connRouter[r.Conn] = r.Router
	}
	if res.RouterRequests[0] != s.RouterRequests[0] {
		t.Errorf("the simulator's router counts %v differ from the report's %v", res.RouterRequests, s.RouterRequests)
	}
}
