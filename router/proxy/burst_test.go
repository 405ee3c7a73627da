package proxy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/llmd-dev/terraform-provider-llmd/router/scoring"
)

// TestBurstDecisionsSeeEachOther: a burst of new prompts, decided all at
// once on every core, is spread over the pods as one router deciding them
// in turn spreads it, every pod the same count: each decision sees the
// requests placed before it. Decisions that read the pods' loads at the
// same moment would both find the same pod least loaded and leave it a
// request ahead (a pod with one more conversation keeps its later turns,
// and sets a multi-turn run's length). The prompts are equally long and
// share no block, so only the loads decide. The burst is repeated, each
// round on pods left as the last one left them, because two decisions
// overlap only when both cores reach one at once.
func TestBurstDecisionsSeeEachOther(t *testing.T) {
	const pods, perPod, rounds = 8, 8, 20
	s := scrapedServer(t, pods)
	flow := Flow{Class: s.defaultClass}
	for round := range rounds {
		reqs := make([]*scoring.Request, pods*perPod)
		for i := range reqs {
			body := fmt.Sprintf(`{"model":"m","prompt":"%02d %03d %s"}`, round, i,
				strings.Repeat("the lighthouse keeper counts the ships at night ", 8))
			var err error
			if reqs[i], err = s.parse("/v1/completions", []byte(body)); err != nil {
				t.Fatal(err)
			}
		}
		slots := make([]slot, len(reqs))
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i, req := range reqs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				var err error
				if slots[i], err = s.routeChooser(req, flow)(context.Background(), nil); err != nil {
					t.Error(err)
				}
			}()
		}
		close(start)
		wg.Wait()
		by := map[string]int{}
		for _, sl := range slots {
			by[sl.pod]++
		}
		for _, sl := range slots {
			if sl.release != nil {
				sl.release()
			}
		}
		if len(by) != pods || slices.ContainsFunc(slices.Collect(maps.Values(by)), func(n int) bool { return n != perPod }) {
			t.Fatalf("round %d: the burst's %d requests per pod: %v, want %d on every pod", round, len(reqs), by, perPod)
		}
	}
}

// BenchmarkRoutedDecisions is routed decisions taken from every core at
// once over 64 pods (a new 100-token prompt each, released at once): what
// deciding one at a time costs a burst.
func BenchmarkRoutedDecisions(b *testing.B) {
	s := scrapedServer(b, 64)
	reqs := make([]*scoring.Request, 1024)
	for i := range reqs {
		var err error
		body := fmt.Sprintf(`{"model":"m","prompt":"%04d %s"}`, i, strings.Repeat("the lighthouse keeper counts the ships at night ", 10))
		if reqs[i], err = s.parse("/v1/completions", []byte(body)); err != nil {
			b.Fatal(err)
		}
	}
	flow := Flow{Class: s.defaultClass}
	var next atomic.Int64
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			sl, err := s.routeChooser(reqs[next.Add(1)%int64(len(reqs))], flow)(context.Background(), nil)
			if err != nil {
				b.Error(err)
				return
			}
			sl.release()
		}
	})
}

// scrapedServer is newServer with the default configuration over n idle
// pods, pod-0 to pod-(n-1), once every pod has been scraped: the cost
// scorer counts a pod without a fresh scrape as if each request the router
// has there were waiting, so a burst begun while the first scrapes come in
// leans to the pods scraped first.
func scrapedServer(tb testing.TB, n int) *Server {
	tb.Helper()
	urls := map[string]string{}
	for i := range n {
		urls[fmt.Sprintf("pod-%d", i)] = okPod(tb).URL
	}
	s, fleet := newServer(tb, urls, Config{})
	waitUntil(tb, "every pod scraped", func() bool {
		return !slices.ContainsFunc(fleet.Pods(nil), func(p scoring.Pod) bool { return !p.Load.Fresh })
	})
	return s
}
