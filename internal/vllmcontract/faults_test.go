package vllmcontract

import (
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestSickEngineLosesNoRequest routes a steady load over both engines
// through a real router, then freezes one engine (SIGSTOP: its sockets
// stay open and nothing answers, as a hung pod) and later kills it (as an
// OOM kill does). Every request must still succeed: what the frozen or
// dead engine had not begun to answer moves to the healthy one. The
// latencies say what the fault cost.
func TestSickEngineLosesNoRequest(t *testing.T) {
	es := engines(t)
	sick := es[1]
	t.Cleanup(func() {
		sick.Resume()
		if sick.Exited() {
			sick.Restart(t) // the pool's later users get a serving engine
		}
	})
	routerURL, _ := startRouter(t, routerConfig(t, testFleet(), es))

	var (
		stop     atomic.Bool
		ok, bad  atomic.Int64
		mu       sync.Mutex
		failures []string
		slowest  []time.Duration
		wg       sync.WaitGroup
	)
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				began := time.Now()
				status, out, err := tryPost(routerURL+"/v1/completions", map[string]any{"model": servedName,
					"prompt": tokenPrompt(uint64(w*10000+i), 300), "max_tokens": 8, "ignore_eos": true})
				mu.Lock()
				slowest = append(slowest, time.Since(began))
				if err != nil {
					status, out = 0, []byte(err.Error())
				}
				if status != http.StatusOK {
					failures = append(failures, string(out))
				}
				mu.Unlock()
				if status == http.StatusOK {
					ok.Add(1)
				} else {
					bad.Add(1)
				}
			}
		}()
	}
	phase := func(name string, d time.Duration) {
		before := ok.Load()
		time.Sleep(d)
		served := ok.Load() - before
		t.Logf("%s: %d requests served in %s", name, served, d)
		if served == 0 {
			t.Errorf("%s: no request served in %s; the healthy engine did not take the load", name, d)
		}
	}
	phase("both engines", 3*time.Second)
	sick.Pause()
	phase(sick.Name+" frozen", 8*time.Second)
	sick.Kill()
	phase(sick.Name+" killed", 5*time.Second)
	stop.Store(true)
	wg.Wait()

	sort.Slice(slowest, func(i, j int) bool { return slowest[i] > slowest[j] })
	t.Logf("%d served, %d failed; slowest %v", ok.Load(), bad.Load(), slowest[:min(3, len(slowest))])
	if bad.Load() != 0 {
		t.Errorf("%d requests failed while an engine froze and died; first: %s", bad.Load(), failures[0])
	}
}
