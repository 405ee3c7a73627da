package scoring

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// rendezvousPick is the pod Rendezvous scores 1 for a request with key,
// failing unless exactly one pod scores 1 and the rest 0.
func rendezvousPick(t *testing.T, key uint64, pods []Pod) string {
	t.Helper()
	s := &State{Pods: pods, Keys: []uint64{key, key + 1}}
	out := make([]float64, len(pods))
	for i := range out {
		out[i] = 0.5 // scorers must overwrite what out held
	}
	Rendezvous{}.Score(s, out)
	chosen := ""
	for i, v := range out {
		switch {
		case v == 1 && chosen == "":
			chosen = pods[i].Name
		case v != 0:
			t.Fatalf("key %x: scores %v, want one 1 and the rest 0", key, out)
		}
	}
	if chosen == "" {
		t.Fatalf("key %x: scores %v, no pod chosen", key, out)
	}
	return chosen
}

func podsNamed(n int) []Pod {
	pods := make([]Pod, n)
	for i := range pods {
		pods[i].Name = fmt.Sprintf("qwen-7d9f8c6b5-%05d", i)
	}
	return pods
}

// TestRendezvousIgnoresCandidateOrder: the pod a key goes to depends on the
// key and the pod names only, so two router replicas listing the fleet in
// different orders agree.
func TestRendezvousIgnoresCandidateOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	pods := podsNamed(8)
	for range 1000 {
		key := rng.Uint64()
		want := rendezvousPick(t, key, pods)
		shuffled := append([]Pod(nil), pods...)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		if got := rendezvousPick(t, key, shuffled); got != want {
			t.Fatalf("key %x: %s in one order, %s in another", key, want, got)
		}
	}
}

// TestRendezvousSpreadsKeys: new prefixes spread evenly over the fleet: each
// pod's count of 80,000 keys within 5 binomial standard deviations of its
// share (4.7% at 8 pods, 14% at 64).
func TestRendezvousSpreadsKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{8, 64} {
		pods := podsNamed(n)
		const keys = 80000
		count := map[string]int{}
		for range keys {
			count[rendezvousPick(t, rng.Uint64(), pods)]++
		}
		share := float64(keys) / float64(n)
		sd := math.Sqrt(share * (1 - 1/float64(n)))
		for _, p := range pods {
			if c := float64(count[p.Name]); math.Abs(c-share) > 5*sd {
				t.Errorf("%d pods: %s got %d of %d keys, share %.0f +- %.0f", n, p.Name, count[p.Name], keys, share, 5*sd)
			}
		}
	}
}

// TestRendezvousMovesOnlyTheLeaversKeys: when a pod leaves, the prefixes it
// was first for move and no other prefix does.
func TestRendezvousMovesOnlyTheLeaversKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	pods := podsNamed(8)
	rest := append(append([]Pod(nil), pods[:3]...), pods[4:]...)
	moved := 0
	for range 10000 {
		key := rng.Uint64()
		before, after := rendezvousPick(t, key, pods), rendezvousPick(t, key, rest)
		switch {
		case before == pods[3].Name:
			moved++
		case after != before:
			t.Fatalf("key %x moved from %s to %s though %s stayed", key, before, after, before)
		}
	}
	if moved == 0 {
		t.Fatal("the leaving pod was first for no key")
	}
}

// TestRendezvousOnlyForUncachedRequests: a request some pod holds, or one
// without a full block, scores 0 everywhere.
func TestRendezvousOnlyForUncachedRequests(t *testing.T) {
	pods := podsNamed(4)
	for name, s := range map[string]*State{
		"a hit":         {Pods: pods, Keys: []uint64{1}, AnyHit: true},
		"no full block": {Pods: pods},
	} {
		out := []float64{0.5, 0.5, 0.5, 0.5}
		Rendezvous{}.Score(s, out)
		for i, v := range out {
			if v != 0 {
				t.Errorf("%s: pod %d scored %v, want 0", name, i, v)
			}
		}
	}
}
