package index

import "sync"

// numShards spreads keys over independently locked maps so that engines
// applying events in parallel, and readers, rarely meet on one lock.
const numShards = 128

// offHolders are the holders of a key on the offload tiers. They live in
// their own map because most fleets have none, which keeps a GPU entry at
// 16 bytes.
type offHolders struct{ cpu, storage holders }

type specKey struct {
	key  uint64
	slot uint16
}

// specEntry is a key's speculative holders and the expiry of one of them
// (slot's, in clock nanoseconds): a key one engine holds, the common case,
// costs one map entry. Its other holders' expiries live in shard.specMore.
type specEntry struct {
	holders holders
	until   int64
	slot    uint16
}

type shard struct {
	mu  sync.RWMutex
	gpu table // key -> holders on GPU
	off map[uint64]offHolders
	// spec holds each speculated key's holders and one holder's expiry;
	// specMore the expiries of the others, per (key, slot).
	spec     map[uint64]specEntry
	specMore map[specKey]int64
	// over is the arena of holder sets that span groups (see holders);
	// freeOver its free bitmaps, overflows how many are in use.
	over      [][]uint64
	freeOver  []uint32
	overflows int
	_         [64]byte // keep neighbouring shards' locks off one cache line
}

func (s *shard) init() {
	s.off = make(map[uint64]offHolders)
	s.spec = make(map[uint64]specEntry)
	s.specMore = make(map[specKey]int64)
}

func (ix *Index) shardOf(k uint64) *shard { return &ix.shards[k>>57] }

// held returns every tier's holders of k; callers hold s.mu.
func (s *shard) held(k uint64) (gpu holders, off offHolders) {
	v, _ := s.gpu.get(k)
	if len(s.off) > 0 {
		off = s.off[k]
	}
	return holders(v), off
}

func exists(gpu holders, off offHolders) bool { return gpu|off.cpu|off.storage != 0 }

// holds says whether slot holds k on any tier.
func (s *shard) holds(gpu holders, off offHolders, slot int) bool {
	return s.has(gpu, slot) || s.has(off.cpu, slot) || s.has(off.storage, slot)
}

// add marks slot as holding k on tier t and reports whether k is a new
// key. It confirms a speculative entry of the same slot, and reports whether
// there was one and whether it was held. Callers hold s.mu.
func (s *shard) add(k uint64, t Tier, slot int) (newKey, confirmed, wasHeld bool) {
	var gpu holders
	var off offHolders
	if len(s.off) > 0 {
		off = s.off[k]
	}
	if t == TierGPU {
		v := s.gpu.ref(k) // one probe on the hot path
		gpu = holders(*v)
		*v = uint64(s.with(gpu, slot))
	} else {
		gpu, _ = s.held(k)
		o := off
		if t == TierCPU {
			o.cpu = s.with(o.cpu, slot)
		} else {
			o.storage = s.with(o.storage, slot)
		}
		s.off[k] = o
	}
	newKey = !exists(gpu, off)
	if len(s.spec) > 0 {
		if e, ok := s.spec[k]; ok && s.has(e.holders, slot) {
			wasHeld = s.dropSpec(k, e, slot)
			confirmed = true
		}
	}
	return newKey, confirmed, wasHeld
}

// del clears slot from k on tier t. It reports whether k lost its last
// holder and whether the slot still holds k on another tier. Callers hold s.mu.
func (s *shard) del(k uint64, t Tier, slot int) (goneKey, stillHeld bool) {
	gpu, off := s.held(k)
	switch t {
	case TierGPU:
		gpu = s.without(gpu, slot)
	case TierCPU:
		off.cpu = s.without(off.cpu, slot)
	default:
		off.storage = s.without(off.storage, slot)
	}
	s.put(k, gpu, off)
	return !exists(gpu, off), s.holds(gpu, off, slot)
}

// clearSlot removes slot from k on every tier and reports whether k lost
// its last holder. Callers hold s.mu.
func (s *shard) clearSlot(k uint64, slot int) (goneKey bool) {
	gpu, off := s.held(k)
	if !exists(gpu, off) {
		return false
	}
	gpu = s.without(gpu, slot)
	off.cpu = s.without(off.cpu, slot)
	off.storage = s.without(off.storage, slot)
	s.put(k, gpu, off)
	return !exists(gpu, off)
}

// put stores holders, deleting empty entries so the maps hold only live keys.
func (s *shard) put(k uint64, gpu holders, off offHolders) {
	if gpu == 0 {
		s.gpu.del(k)
	} else {
		s.gpu.put(k, uint64(gpu))
	}
	if off.cpu|off.storage == 0 {
		if len(s.off) > 0 {
			delete(s.off, k)
		}
	} else {
		s.off[k] = off
	}
}

// specOf returns k's speculative entry (zero if none) and, when slot is
// one of its holders, slot's expiry. Callers hold s.mu.
func (s *shard) specOf(k uint64, slot int) (e specEntry, until int64, ok bool) {
	e = s.spec[k]
	switch {
	case !s.has(e.holders, slot):
		return e, 0, false
	case int(e.slot) == slot:
		return e, e.until, true
	}
	return e, s.specMore[specKey{k, uint16(slot)}], true
}

// setSpecUntil moves the expiry of slot's entry for k, e being s.spec[k],
// which holds slot. Callers hold s.mu.
func (s *shard) setSpecUntil(k uint64, e specEntry, slot int, until int64) {
	if int(e.slot) == slot {
		e.until = until
		s.spec[k] = e
		return
	}
	s.specMore[specKey{k, uint16(slot)}] = until
}

// holdSpec gives slot a speculative entry for k that expires at until, or
// moves the expiry of the one it has, and reports whether the entry is new
// and whether the one it had was held. Callers hold s.mu.
func (s *shard) holdSpec(k uint64, slot int, until int64) (added, wasHeld bool) {
	e, u, ok := s.specOf(k, slot)
	switch {
	case ok:
		s.setSpecUntil(k, e, slot, until)
		return false, u == heldUntilSettled
	case e.holders == 0:
		s.spec[k] = specEntry{holders: s.with(0, slot), until: until, slot: uint16(slot)}
	default:
		e.holders = s.with(e.holders, slot)
		s.spec[k] = e
		s.specMore[specKey{k, uint16(slot)}] = until
	}
	return true, false
}

// dropSpec removes slot's speculative entry for k, e being s.spec[k], which
// holds slot, and reports whether the entry was held. Callers hold s.mu.
func (s *shard) dropSpec(k uint64, e specEntry, slot int) (wasHeld bool) {
	e.holders = s.without(e.holders, slot)
	switch {
	case int(e.slot) == slot:
		wasHeld = e.until == heldUntilSettled
		if e.holders == 0 {
			delete(s.spec, k)
			return wasHeld
		}
		// Another holder's expiry moves into the entry.
		e.slot = uint16(s.first(e.holders))
		sk := specKey{k, e.slot}
		e.until = s.specMore[sk]
		delete(s.specMore, sk)
	default:
		sk := specKey{k, uint16(slot)}
		wasHeld = s.specMore[sk] == heldUntilSettled
		delete(s.specMore, sk)
	}
	s.spec[k] = e
	return wasHeld
}
