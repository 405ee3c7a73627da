package index

import (
	"sync"
	"sync/atomic"
)

// orphan is a stored block whose parent the index has not seen: it is kept by
// engine hash and by the hash of its own tokens, so that its key can be
// computed the moment its parent's key is known. It is never chained from the
// root, because that would claim a prefix the engine may not hold.
type orphan struct {
	hash, tokens, extra uint64
	tier                Tier
}

// engine is one engine core's view: its engine-hash -> own-key map, which
// resolves parents and BlockRemoved, and its orphans. Its events apply in
// order under mu; different engines apply in parallel.
type engine struct {
	mu   sync.Mutex
	id   Engine
	slot int

	blocks   table               // engine hash -> own key
	waiting  map[uint64][]orphan // parent engine hash -> orphans waiting on it
	orphanOf map[uint64]uint64   // orphan engine hash -> the parent it waits on

	blockSize int
	dropped   bool // the engine left the index; holders of a stale pointer retry

	size atomic.Int64 // len(blocks), readable without mu for eviction
}

func newEngine(id Engine, slot int) *engine {
	es := &engine{id: id, slot: slot}
	es.reset()
	return es
}

func (es *engine) reset() {
	es.blocks.clear()
	es.waiting = make(map[uint64][]orphan)
	es.orphanOf = make(map[uint64]uint64)
	es.size.Store(0)
}
