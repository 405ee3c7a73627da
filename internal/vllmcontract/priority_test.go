package vllmcontract

import (
	"fmt"
	"testing"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
)

// Runners fill the engine's KV cache (poolBlocks of 64 tokens) so that a
// waiting request of waiterPrompt tokens fits only once a runner ends, and
// the runners end one at a time: runnerPrompt tokens (54 blocks, 216 in
// all, leaving 39 free) and runnerOutput+i*20 output tokens each (239
// blocks at their longest), while a waiter needs 50.
const (
	runners      = 4
	runnerPrompt = 3400
	runnerOutput = 300
	waiterPrompt = 3200
)

// TestEnginesServeTheHighClassFirst runs the engine under the fleet's
// vllm.scheduling_policy "priority" behind a router with the flags
// llmd_prefix_router renders for such a fleet (--engine-priority, the
// pending bound of 2, the fleet's max_num_seqs as each pod's cap). With
// the engine's KV cache full of running requests, two low-class requests
// wait in the engine, the pending bound shuts the pod to a third low one,
// and a high-class request still goes to the engine (the bound counts its
// own class and higher) and starts there before both low ones: the
// engine's waiting queue orders by the priority the router set from the
// class (vLLM v0.32.0 vllm/v1/core/sched/request_queue.py
// PriorityRequestQueue), not by arrival.
func TestEnginesServeTheHighClassFirst(t *testing.T) {
	f := testFleet()
	if f.VLLM.SchedulingPolicy != workloads.PolicyPriority {
		t.Fatalf("the pool's fleet runs scheduling policy %q, want priority", f.VLLM.SchedulingPolicy)
	}
	e := engines(t)[0]
	routerURL, _ := startRouter(t, routerConfig(t, f, []*testenv.Engine{e}),
		"--engine-priority", "--max-pending-per-pod=2", fmt.Sprintf("--max-in-flight-per-pod=%d", f.VLLM.MaxNumSeqs))

	type result struct {
		name string
		s    streamed
		err  error
	}
	done := make(chan result, runners+4)
	send := func(name, class string, seed uint64, promptLen, output int) {
		go func() {
			s, err := streamInClass(routerURL, class, tokenPrompt(seed, promptLen), output)
			done <- result{name, s, err}
		}()
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: engine running %v, waiting %v", what,
					series(t, e.URL, "vllm:num_requests_running", nil), series(t, e.URL, "vllm:num_requests_waiting", nil))
			}
		}
	}
	waiting := func(n float64) func() bool {
		return func() bool { return series(t, e.URL, "vllm:num_requests_waiting", nil) == n }
	}
	for i := range runners {
		send(fmt.Sprintf("runner %d", i), "low", 9000+uint64(i), runnerPrompt, runnerOutput+20*i)
	}
	waitFor("the runners to run", func() bool { return series(t, e.URL, "vllm:num_requests_running", nil) == runners })
	send("low 1", "low", 9100, waiterPrompt, 4)
	waitFor("low 1 to wait in the engine", waiting(1))
	send("low 2", "low", 9101, waiterPrompt, 4)
	waitFor("low 2 to wait in the engine", waiting(2))
	send("low 3", "low", 9102, waiterPrompt, 4) // held in the router: two low ones are unanswered
	send("high", "high", 9103, waiterPrompt, 4)
	waitFor("high to wait in the engine beside low 1 and low 2", waiting(3))
	if series(t, e.URL, "vllm:num_requests_running", nil) != runners {
		t.Fatal("a runner ended before the waiters queued: the test's KV arithmetic no longer holds on this engine")
	}

	first := map[string]time.Time{}
	for range runners + 4 {
		r := <-done
		if r.err != nil {
			t.Fatalf("%s: %v", r.name, r.err)
		}
		first[r.name] = r.s.Chunks[0].At
	}
	t.Logf("first tokens after high's: low 1 %s, low 2 %s, low 3 %s", first["low 1"].Sub(first["high"]),
		first["low 2"].Sub(first["high"]), first["low 3"].Sub(first["high"]))
	for _, low := range []string{"low 1", "low 2", "low 3"} {
		if !first["high"].Before(first[low]) {
			t.Errorf("high started at %s, not before %s at %s", first["high"].Format("15:04:05.000"), low, first[low].Format("15:04:05.000"))
		}
	}
	if !first["low 1"].Before(first["low 2"]) || !first["low 2"].Before(first["low 3"]) {
		t.Errorf("the low class out of arrival order: %s, %s, %s", first["low 1"].Format("15:04:05.000"),
			first["low 2"].Format("15:04:05.000"), first["low 3"].Format("15:04:05.000"))
	}
}
