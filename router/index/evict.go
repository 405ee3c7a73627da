package index

import "math/rand/v2"

// maybeEvict enforces MaxKeys. vLLM reports its own evictions, so the bound
// only bites when removals were lost or offload tiers outgrow the budget. It
// evicts from the engine holding the most blocks, walking its table from a
// random slot, down to 1/16 below the bound so that it does not run on every
// store. Eviction only ever makes the index under-report, never claim a
// block an engine lacks.
func (ix *Index) maybeEvict() {
	limit := int64(ix.cfg.MaxKeys)
	if limit <= 0 || ix.c.keys.Load() <= limit {
		return
	}
	if !ix.evictMu.TryLock() {
		return // another writer is already evicting
	}
	defer ix.evictMu.Unlock()
	target := limit - limit/16
	for ix.c.keys.Load() > target {
		es := ix.largest()
		if es == nil || ix.evictFrom(es, ix.c.keys.Load()-target) == 0 {
			return
		}
	}
}

func (ix *Index) largest() *engine {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	var best *engine
	for _, es := range ix.engines {
		if best == nil || es.size.Load() > best.size.Load() {
			best = es
		}
	}
	return best
}

// evictFrom drops up to n of es's holdings and returns how many it dropped.
func (ix *Index) evictFrom(es *engine, n int64) int64 {
	var d delta
	es.mu.Lock()
	var victims []uint64
	es.blocks.each(rand.IntN(len(es.blocks.slots)+1), func(h, k uint64) bool {
		ix.release(es, k, &d)
		victims = append(victims, h)
		return int64(len(victims)) < n
	})
	for _, h := range victims {
		es.blocks.del(h) // after the walk: deleting shifts entries under it
	}
	d.pairs -= int64(len(victims))
	d.evicted += int64(len(victims))
	es.size.Add(d.pairs)
	es.mu.Unlock()
	ix.c.apply(&d)
	return d.evicted
}
