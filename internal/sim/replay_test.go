package sim

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestReplayTimesEachRequest replays two requests on a table-priced
// engine: the second arrives while the first decodes, so its prefill
// shares a step with the first's decode; the times follow from the table.
func TestReplayTimesEachRequest(t *testing.T) {
	tab := testTable()
	ec := EngineConfig{NumGPUBlocks: 64, BlockSize: 64, MaxNumSeqs: 4, MaxBatchedTokens: 2048, Cost: tab}
	rng := rand.New(rand.NewPCG(1, 2))
	a := &Request{ID: 1, Prompt: randomTokens(rng, make([]uint32, 512)), MaxTokens: 3}
	b := &Request{ID: 2, Prompt: randomTokens(rng, make([]uint32, 64)), MaxTokens: 2, Arrival: 0.070}
	if _, err := Replay(ec, []*Request{a, b}); err != nil {
		t.Fatal(err)
	}
	pre := func(n, c float64) float64 { return tab.Prefill.At(n, c) }
	dec := func(k, c float64) float64 { return tab.Decode.At(k, c) }
	// a: prefill 512 (ends at 61.2 ms), decode at 513 (ends at 72.7 ms);
	// b arrived at 70 ms and prefills beside a's decode at 514.
	t1 := pre(512, 0)
	t2 := t1 + dec(1, 513)
	t3 := t2 + pre(64, 0) + dec(1, 514) - tab.Base()
	t4 := t3 + dec(1, 65)
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"a's first token", a.FirstToken, t1}, {"a's last token", a.Done, t3}, {"b's first token", b.FirstToken, t3}, {"b's last token", b.Done, t4}} {
		if math.Abs(c.got-c.want) > 1e-12 {
			t.Errorf("%s at %.6f s, want %.6f s", c.name, c.got, c.want)
		}
	}
}
