package index

import (
	"math"
	"sync"
	"sync/atomic"
)

// specItem is one settled speculative entry in expiry order. Entries join
// the queue when their Hold settles, with the same TTL for all, so insertion
// order is expiry order and the queue needs no heap.
type specItem struct {
	key   uint64
	until int64
	slot  uint16
}

type specQueue struct {
	mu      sync.Mutex
	items   []specItem
	head    int
	pending atomic.Int64 // len(items)-head, checked without the lock
}

// heldUntilSettled is the expiry of a speculative entry whose request has
// not started: it outlives any clock until its Hold settles.
const heldUntilSettled = int64(math.MaxInt64)

// Speculate records that the router just sent a request whose prompt has
// these keys to engine e, so the next decisions see the blocks the engine is
// about to cache before its BlockStored arrives; keys e already holds on GPU
// are skipped. The entries are held, whatever the time, until the returned
// Hold settles: the request waits in e's queue until then, and its prefix is
// e's to compute. From Settle on they expire after SpeculationTTL unless an
// event confirms them. A later Speculate of a key holds it again.
func (ix *Index) Speculate(e Engine, keys []uint64) (*Hold, error) {
	es, err := ix.engineFor(e)
	if err != nil {
		return nil, err
	}
	h := &Hold{ix: ix, es: es, keys: make([]uint64, 0, len(keys))}
	var d delta
	for _, k := range keys {
		sh := ix.shardOf(k)
		sh.mu.Lock()
		if gpu, _ := sh.gpu.get(k); !sh.has(holders(gpu), es.slot) {
			added, wasHeld := sh.holdSpec(k, es.slot, heldUntilSettled)
			if added {
				d.spec++
			}
			if !wasHeld {
				d.specHeld++
			}
			h.keys = append(h.keys, k)
		}
		sh.mu.Unlock()
	}
	ix.c.apply(&d)
	ix.sweepSpec()
	return h, nil
}

// Hold is one request's speculative entries, held until Settle.
type Hold struct {
	ix       *Index
	es       *engine
	keys     []uint64
	settled  atomic.Bool
	onSettle func()
}

// OnSettle makes the first Settle call fn, after the entries' TTL has
// started (to tell peer replicas the request started). Call it before the
// Hold is shared with whoever settles it; a nil Hold ignores it.
func (h *Hold) OnSettle(fn func()) {
	if h != nil {
		h.onSettle = fn
	}
}

// Settle starts the TTL of the entries h still holds: call it when the
// request's first response byte arrives (its prefill is done, the engine's
// BlockStored is on its way) or its attempt ends without one. Only the first
// call counts; a nil Hold does nothing. Entries an event confirmed are left
// alone. A (key, engine) has one entry, however many Holds hold it: the
// first of them to settle starts its TTL, while a later request for the
// same prefix on the same engine may still be waiting (a Speculate after
// that Settle holds it again). The first request's own BlockStored usually
// confirms the entry within the TTL.
func (h *Hold) Settle() {
	if h == nil || !h.settled.CompareAndSwap(false, true) {
		return
	}
	if h.onSettle != nil {
		defer h.onSettle()
	}
	ix := h.ix
	if ix.existing(h.es.id) != h.es {
		return // the engine left; its entries went with it
	}
	until := ix.cfg.Now().UnixNano() + int64(ix.cfg.SpeculationTTL)
	q := &ix.spec
	q.mu.Lock()
	queued := len(q.items)
	for _, k := range h.keys {
		sh := ix.shardOf(k)
		sh.mu.Lock()
		if e, u, ok := sh.specOf(k, h.es.slot); ok && u == heldUntilSettled {
			sh.setSpecUntil(k, e, h.es.slot, until)
			q.items = append(q.items, specItem{key: k, until: until, slot: uint16(h.es.slot)})
		}
		sh.mu.Unlock()
	}
	settled := int64(len(q.items) - queued)
	q.pending.Add(settled)
	q.mu.Unlock()
	ix.c.apply(&delta{specHeld: -settled})
	ix.sweepSpec()
}

// sweepSpec removes expired speculative entries. Lookup already ignores
// them; sweeping frees their memory.
func (ix *Index) sweepSpec() {
	q := &ix.spec
	if q.pending.Load() == 0 {
		return
	}
	now := ix.cfg.Now().UnixNano()
	var d delta
	q.mu.Lock()
	for q.head < len(q.items) && q.items[q.head].until <= now {
		it := q.items[q.head]
		q.head++
		q.pending.Add(-1)
		sh := ix.shardOf(it.key)
		sh.mu.Lock()
		// A later Speculate of the same (key, slot) moved its expiry: leave it.
		if e, u, ok := sh.specOf(it.key, int(it.slot)); ok && u == it.until {
			sh.dropSpec(it.key, e, int(it.slot))
			d.spec--
			d.specExpired++
		}
		sh.mu.Unlock()
	}
	if q.head > len(q.items)/2 {
		q.items = append(q.items[:0], q.items[q.head:]...)
		q.head = 0
	}
	q.mu.Unlock()
	ix.c.apply(&d)
}

// clearSpec drops every speculative entry of slot and returns how many, and
// how many of them were held. Queue items left behind find nothing when
// they expire.
func (ix *Index) clearSpec(slot int) (n, held int64) {
	for i := range ix.shards {
		sh := &ix.shards[i]
		sh.mu.Lock()
		for k, e := range sh.spec {
			if sh.has(e.holders, slot) {
				if sh.dropSpec(k, e, slot) {
					held++
				}
				n++
			}
		}
		sh.mu.Unlock()
	}
	return n, held
}

// liveSpec is group w of a key's speculative holders, e, filtered to those
// not yet expired. Callers hold s.mu (read).
func (s *shard) liveSpec(k uint64, e specEntry, w int, now int64) uint64 {
	live := s.word(e.holders, w)
	for b := live; b != 0; b &= b - 1 {
		slot := w*groupSize + trailingZeros(b)
		until := e.until
		if slot != int(e.slot) {
			until = s.specMore[specKey{k, uint16(slot)}]
		}
		if until <= now {
			live &^= 1 << (slot % groupSize)
		}
	}
	return live
}
