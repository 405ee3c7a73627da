package index

import (
	"math/bits"
	"sync/atomic"
)

// Per-entry memory, measured by BenchmarkMemory (HeapInuse delta after GC
// over 1,000,000 keys) and used for Stats.MemoryBytes.
const (
	bytesPerKey    = 24 // GPU table entry of a key
	bytesPerPair   = 26 // engine-hash table entry of each (key, engine)
	bytesPerOrphan = 80 // map entries by hash and by parent, not measured
	// bytesPerOverflow is an arena bitmap of a key whose holders span
	// groups: at 256 engines on round robin's holders per key, B/key less
	// the key's and its pairs' entries over the keys that spill.
	bytesPerOverflow = 40
)

// Stats are the index's counters and gauges for export as metrics.
type Stats struct {
	// Gauges.
	Keys        int64 // distinct block keys held by any engine on any tier
	Pairs       int64 // (key, engine) holdings
	Orphans     int64 // blocks waiting for their parent
	Speculative int64 // live speculative (key, engine) entries
	// SpeculativeHeld counts the Speculative entries held until their
	// request's first byte: the blocks queued requests will compute.
	SpeculativeHeld int64
	MemoryBytes     int64 // estimate from the measured per-entry sizes

	// Counters.
	BlocksStored        int64 // blocks applied from BlockStored
	BlocksRemoved       int64 // blocks applied from BlockRemoved
	Purges              int64 // engines wiped (cleared, restarted, gap, removed)
	Evicted             int64 // (key, engine) holdings dropped by the memory bound
	OrphansLinked       int64 // orphans that got a key when their parent appeared
	OrphansDropped      int64 // orphans refused past MaxOrphansPerEngine
	Unresolved          int64 // token-less blocks (offload tiers) of unknown hash
	BlockSizeMismatches int64 // BlockStored events whose block size disagrees
	SpecConfirmed       int64 // speculative entries confirmed by an event
	SpecExpired         int64 // speculative entries that outlived their TTL
}

type counters struct {
	keys, pairs, orphans, spec, specHeld                     atomic.Int64
	stored, removed, purges, evicted, linked, orphansDropped atomic.Int64
	unresolved, mismatches, specConfirmed, specExpired       atomic.Int64
}

// delta gathers one operation's counter changes so that they are published
// with a handful of atomic adds instead of several per block.
type delta struct {
	keys, pairs, orphans, spec, specHeld                     int64
	stored, removed, purges, evicted, linked, orphansDropped int64
	unresolved, mismatches, specConfirmed, specExpired       int64
}

func add(c *atomic.Int64, v int64) {
	if v != 0 {
		c.Add(v)
	}
}

func (c *counters) apply(d *delta) {
	add(&c.keys, d.keys)
	add(&c.pairs, d.pairs)
	add(&c.orphans, d.orphans)
	add(&c.spec, d.spec)
	add(&c.specHeld, d.specHeld)
	add(&c.stored, d.stored)
	add(&c.removed, d.removed)
	add(&c.purges, d.purges)
	add(&c.evicted, d.evicted)
	add(&c.linked, d.linked)
	add(&c.orphansDropped, d.orphansDropped)
	add(&c.unresolved, d.unresolved)
	add(&c.mismatches, d.mismatches)
	add(&c.specConfirmed, d.specConfirmed)
	add(&c.specExpired, d.specExpired)
}

// Stats returns a snapshot of the counters.
func (ix *Index) Stats() Stats {
	c := &ix.c
	s := Stats{
		Keys: c.keys.Load(), Pairs: c.pairs.Load(), Orphans: c.orphans.Load(),
		Speculative: c.spec.Load(), SpeculativeHeld: c.specHeld.Load(),
		BlocksStored: c.stored.Load(), BlocksRemoved: c.removed.Load(), Purges: c.purges.Load(),
		Evicted: c.evicted.Load(), OrphansLinked: c.linked.Load(), OrphansDropped: c.orphansDropped.Load(),
		Unresolved: c.unresolved.Load(), BlockSizeMismatches: c.mismatches.Load(),
		SpecConfirmed: c.specConfirmed.Load(), SpecExpired: c.specExpired.Load(),
	}
	var overflows int64
	for i := range ix.shards {
		sh := &ix.shards[i]
		sh.mu.RLock()
		overflows += int64(sh.overflows)
		sh.mu.RUnlock()
	}
	s.MemoryBytes = s.Keys*bytesPerKey + s.Pairs*bytesPerPair + s.Orphans*bytesPerOrphan + overflows*bytesPerOverflow
	return s
}

// HolderCounts returns how many keys have n holders on any tier, at index
// n, speculation left out: the distribution a key's holder set is sized
// for. It read-locks each shard in turn and walks its keys.
func (ix *Index) HolderCounts() []int64 {
	var hist []int64
	count := func(n int) {
		for len(hist) <= n {
			hist = append(hist, 0)
		}
		hist[n]++
	}
	for i := range ix.shards {
		sh := &ix.shards[i]
		sh.mu.RLock()
		sh.gpu.each(0, func(k, _ uint64) bool {
			count(sh.holderCount(sh.held(k)))
			return true
		})
		for k, off := range sh.off {
			if gpu, _ := sh.held(k); gpu == 0 {
				count(sh.holderCount(0, off))
			}
		}
		sh.mu.RUnlock()
	}
	return hist
}

// holderCount is how many engines hold a key on any tier. Callers hold s.mu.
func (s *shard) holderCount(gpu holders, off offHolders) int {
	n := 0
	for w := range max(s.groups(gpu), s.groups(off.cpu), s.groups(off.storage)) {
		n += bits.OnesCount64(s.word(gpu, w) | s.word(off.cpu, w) | s.word(off.storage, w))
	}
	return n
}
