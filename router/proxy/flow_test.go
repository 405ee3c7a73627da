package proxy

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// queueFor starts a waiter of flow wanting pod want ("" any) and returns
// once it is in the queue; its channel gets the pod handed to it or the
// error that ended its wait.
func queueFor(t *testing.T, a *admission, flow Flow, want string) <-chan result {
	t.Helper()
	return queueWith(t, a, flow, want, nil, nil)
}

// queueWith is queueFor for a request demanding kv of a pod's KV cache and
// pf of its compute.
func queueWith(t *testing.T, a *admission, flow Flow, want string, kv *kvDemand, pf *prefillDemand) <-chan result {
	t.Helper()
	before := a.depths()[flow.Class] // its class's: a waiter it sheds leaves another
	got := make(chan result, 1)
	go func() {
		pod, err := a.wait(context.Background(), flow, kv, pf, want, nil, time.Now())
		got <- result{pod: pod, err: err}
	}()
	for a.depths()[flow.Class] == before {
		time.Sleep(time.Millisecond)
	}
	return got
}

// served releases pod's slot once and returns which of the waiters got it.
func served(t *testing.T, a *admission, pod string, waiters map[string]<-chan result) string {
	t.Helper()
	a.mu.Lock()
	handed := a.transit[pod] // the last waiter served holds it
	a.mu.Unlock()
	finish(a, pod, handed)
	for name, ch := range waiters {
		select {
		case r := <-ch:
			if r.err != nil || r.pod != pod {
				t.Fatalf("waiter %s got %+v, want the slot on %s", name, r, pod)
			}
			delete(waiters, name)
			return name
		case <-time.After(time.Millisecond):
		}
	}
	t.Fatalf("releasing %s served none of %d waiters", pod, len(waiters))
	return ""
}

// TestFlowServesHigherClassesFirstAndTenantsInTurn: with one slot, the
// queued requests are served the high class first; within a class the
// tenants take turns (one of a, one of b, one of a again), each tenant's
// own in arrival order; the low class last.
func TestFlowServesHigherClassesFirstAndTenantsInTurn(t *testing.T) {
	a := newAdmission(admissionLimits{cap: 1, maxQueue: 16, share: 1}, testClasses, nil)
	if !a.acquire("p", 1, nil, 1) {
		t.Fatal("the first slot")
	}
	waiters := map[string]<-chan result{}
	order := []struct {
		name string
		flow Flow
	}{
		{"low-a", Flow{Class: 2, Tenant: "a"}},
		{"std-a1", Flow{Class: 1, Tenant: "a"}},
		{"std-a2", Flow{Class: 1, Tenant: "a"}},
		{"std-a3", Flow{Class: 1, Tenant: "a"}},
		{"std-b1", Flow{Class: 1, Tenant: "b"}},
		{"high-c", Flow{Class: 0, Tenant: "c"}},
	}
	for _, w := range order {
		waiters[w.name] = queueFor(t, a, w.flow, "")
	}
	var got []string
	for len(waiters) > 0 {
		got = append(got, served(t, a, "p", waiters))
	}
	want := []string{"high-c", "std-a1", "std-b1", "std-a2", "std-a3", "low-a"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("served %v, want %v", got, want)
		}
	}
	a.release("p", nil)
	if a.queued() != 0 || len(a.open) != 0 {
		t.Errorf("left %d queued, slots %v", a.queued(), a.open)
	}
}

// TestFlowAnswersOverShareWith429AndFullQueueByShedding: a tenant holding
// its share of a class's queue is refused with 429 while another tenant
// waits in that class, and not while it waits alone; a full queue sheds the newest waiter of the lowest class
// for a higher newcomer (503), and refuses a newcomer with nothing below
// it (503).
func TestFlowAnswersOverShareWith429AndFullQueueByShedding(t *testing.T) {
	a := newAdmission(admissionLimits{cap: 1, maxQueue: 7, share: 0.5}, testClasses, nil) // a share of 3 waiters
	a.acquire("p", 1, nil, 1)
	for range 4 { // alone in standard, a may pass its share
		queueFor(t, a, Flow{Class: 1, Tenant: "a"}, "")
	}
	queueFor(t, a, Flow{Class: 1, Tenant: "b"}, "")
	_, err := a.wait(context.Background(), Flow{Class: 1, Tenant: "a"}, nil, nil, "", nil, time.Now())
	var shed *ShedError
	if !errors.As(err, &shed) || shed.Code != http.StatusTooManyRequests || shed.Class != "standard" || DecisionStatus(err) != http.StatusTooManyRequests {
		t.Fatalf("a's fifth waiter, b waiting beside it: %v, want 429 over its share of standard", err)
	}
	lowOld := queueFor(t, a, Flow{Class: 2, Tenant: "b"}, "")
	lowNew := queueFor(t, a, Flow{Class: 2, Tenant: "b"}, "")
	// The queue is full (7): a high newcomer sheds b's newest low waiter.
	high := queueFor(t, a, Flow{Class: 0, Tenant: "c"}, "")
	if r := <-lowNew; !errors.As(r.err, &shed) || shed.Code != http.StatusServiceUnavailable || shed.Class != "low" {
		t.Fatalf("the newest low waiter: %+v, want 503 shed from class low", r)
	}
	select {
	case r := <-lowOld:
		t.Fatalf("the older low waiter ended too: %+v", r)
	default:
	}
	// Full again, and a low newcomer has nothing below it.
	if _, err := a.wait(context.Background(), Flow{Class: 2, Tenant: "d"}, nil, nil, "", nil, time.Now()); !errors.As(err, &shed) || shed.Code != http.StatusServiceUnavailable {
		t.Fatalf("a low newcomer to a full queue: %v, want 503", err)
	}
	a.release("p", nil)
	if r := <-high; r.err != nil || r.pod != "p" {
		t.Fatalf("the freed slot went elsewhere than the high waiter: %+v", r)
	}
}

// TestFlowTimeToLiveIs503NamingTheClass: a class's waiter that no slot
// reaches within its TTL gets 503 naming the class, while a class with a
// longer TTL still waits.
func TestFlowTimeToLiveIs503NamingTheClass(t *testing.T) {
	classes := []Class{{"high", time.Minute}, {"batch", 50 * time.Millisecond}}
	a := newAdmission(admissionLimits{cap: 1, maxQueue: 8, share: 1}, classes, nil)
	a.acquire("p", 1, nil, 1)
	long := queueFor(t, a, Flow{Class: 0}, "")
	short := queueFor(t, a, Flow{Class: 1}, "")
	r := <-short
	var shed *ShedError
	if !errors.As(r.err, &shed) || shed.Code != http.StatusServiceUnavailable || shed.Class != "batch" || shed.shedReason() != "no_capacity" {
		t.Fatalf("batch waiter past its TTL: %+v, want 503 of class batch", r)
	}
	a.release("p", nil)
	if r := <-long; r.err != nil || r.pod != "p" {
		t.Fatalf("the high waiter: %+v, want the slot", r)
	}
}

// TestFlowCountsThePeersRequests: a pod whose peers' in-flight requests
// and this replica's reach the capacity takes none, and the room the
// peers free (no local release announces it) reaches a waiter through the
// refill.
func TestFlowCountsThePeersRequests(t *testing.T) {
	var peerLoad atomic.Int64
	peerLoad.Store(2)
	pods := func() []scoring.Pod {
		n := int(peerLoad.Load())
		return []scoring.Pod{{Name: "p", Load: scoring.Load{InFlight: n, PeerInFlight: n}}}
	}
	a := newAdmission(admissionLimits{cap: 3, maxQueue: 8, share: 1}, testClasses, pods)
	if open := a.withRoom(pods(), 1, nil, nil); len(open) != 1 || !a.acquire("p", 1, nil, 1) {
		t.Fatalf("2 of the peers' and none of ours under a cap of 3: open %v", open)
	}
	if open := a.withRoom(pods(), 1, nil, nil); len(open) != 0 || a.acquire("p", 1, nil, 1) {
		t.Fatalf("2 of the peers' and 1 of ours at a cap of 3: still open %v", open)
	}
	w := queueFor(t, a, Flow{Class: 1}, "")
	peerLoad.Store(1) // the peers' request ended: the refill finds the room
	handedTo(t, w, "p", "the waiter after the peers freed room")
}

// TestFlowFromHeadersAndKeys: the tenant and class headers name a request's
// flow; a key's tenant overrides the header and its class is a ceiling the
// header may only lower; an unknown class is an error naming the header
// and the classes; a misconfigured key's class fails setup.
func TestFlowFromHeadersAndKeys(t *testing.T) {
	s := &Server{cfg: Config{QueueTimeout: time.Second, APIKeys: []APIKey{{SHA256: sha256.Sum256([]byte("k")), Tenant: "team-a", Class: "standard"}}}}
	if err := s.setupFlow(); err != nil {
		t.Fatal(err)
	}
	headers := func(kv ...string) func(string) string {
		return func(name string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == name {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	key, ok := s.keyFor(&http.Request{Header: http.Header{"Authorization": {"Bearer k"}}})
	if !ok || key.Tenant != "team-a" {
		t.Fatalf("key k: %+v, %v", key, ok)
	}
	if _, ok := s.keyFor(&http.Request{Header: http.Header{"Authorization": {"Bearer other"}}}); ok {
		t.Fatal("an unknown key was accepted")
	}
	for _, tc := range []struct {
		name string
		get  func(string) string
		key  *APIKey
		want Flow
	}{
		{"no headers", headers(), nil, Flow{Class: 1}},
		{"headers", headers(TenantHeader, "t", PriorityHeader, "high"), nil, Flow{Class: 0, Tenant: "t"}},
		{"key over headers", headers(TenantHeader, "t", PriorityHeader, "high"), key, Flow{Class: 1, Tenant: "team-a"}},
		{"key lowered", headers(PriorityHeader, "low"), key, Flow{Class: 2, Tenant: "team-a"}},
	} {
		if got, err := s.Flow(tc.get, tc.key); err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
	_, err := s.Flow(headers(PriorityHeader, "urgent"), nil)
	if !errors.Is(err, errUnknownClass) || !strings.Contains(err.Error(), PriorityHeader) || !strings.Contains(err.Error(), "high, standard, low") {
		t.Errorf("unknown class: %v, want an error naming the header and the classes", err)
	}
	bad := &Server{cfg: Config{QueueTimeout: time.Second, APIKeys: []APIKey{{Tenant: "x", Class: "gold"}}}}
	if err := bad.setupFlow(); err == nil || !strings.Contains(err.Error(), `"gold"`) {
		t.Errorf("a key of an unknown class: %v, want an error naming it", err)
	}
}
