package index

import "sync"

// numShards spreads keys over independently locked maps so that engines
// applying events in parallel, and readers, rarely meet on one lock.
const numShards = 128

// offMasks are the holders of a key on the offload tiers. They live in their
// own map because most fleets have none, which keeps a GPU entry at 16 bytes.
type offMasks struct{ cpu, storage uint64 }

type specKey struct {
	key  uint64
	slot uint8
}

// specEntry is a key's speculative holders, a bit per engine slot, and the
// expiry of one of them (slot's, in clock nanoseconds): a key one engine
// holds, the common case, costs one map entry. Its other holders' expiries
// live in shard.specMore.
type specEntry struct {
	mask  uint64
	until int64
	slot  uint8
}

type shard struct {
	mu  sync.RWMutex
	gpu table // key -> engine slots holding it on GPU
	off map[uint64]offMasks
	// spec holds each speculated key's holders and one holder's expiry;
	// specMore the expiries of the others, per (key, slot).
	spec     map[uint64]specEntry
	specMore map[specKey]int64
	_        [64]byte // keep neighbouring shards' locks off one cache line
}

func (s *shard) init() {
	s.off = make(map[uint64]offMasks)
	s.spec = make(map[uint64]specEntry)
	s.specMore = make(map[specKey]int64)
}

func (ix *Index) shardOf(k uint64) *shard { return &ix.shards[k>>57] }

// held returns every tier's holders of k; callers hold s.mu.
func (s *shard) held(k uint64) (gpu uint64, off offMasks) {
	gpu, _ = s.gpu.get(k)
	if len(s.off) > 0 {
		off = s.off[k]
	}
	return gpu, off
}

func exists(gpu uint64, off offMasks) bool { return gpu|off.cpu|off.storage != 0 }

// add marks slot bit as holding k on tier t and reports whether k is a new
// key. It confirms a speculative entry of the same slot, and reports whether
// there was one and whether it was held. Callers hold s.mu.
func (s *shard) add(k uint64, t Tier, bit uint64, slot uint8) (newKey, confirmed, wasHeld bool) {
	var gpu uint64
	var off offMasks
	if len(s.off) > 0 {
		off = s.off[k]
	}
	if t == TierGPU {
		gpu = s.gpu.or(k, bit) // one probe on the hot path
	} else {
		gpu, _ = s.gpu.get(k)
		o := off
		if t == TierCPU {
			o.cpu |= bit
		} else {
			o.storage |= bit
		}
		s.off[k] = o
	}
	newKey = !exists(gpu, off)
	if len(s.spec) > 0 {
		if e, ok := s.spec[k]; ok && e.mask&bit != 0 {
			wasHeld = s.dropSpec(k, e, slot)
			confirmed = true
		}
	}
	return newKey, confirmed, wasHeld
}

// del clears slot bit from k on tier t. It reports whether k lost its last
// holder and whether the slot still holds k on another tier. Callers hold s.mu.
func (s *shard) del(k uint64, t Tier, bit uint64) (goneKey, stillHeld bool) {
	gpu, off := s.held(k)
	switch t {
	case TierGPU:
		gpu &^= bit
	case TierCPU:
		off.cpu &^= bit
	default:
		off.storage &^= bit
	}
	s.put(k, gpu, off)
	return !exists(gpu, off), (gpu|off.cpu|off.storage)&bit != 0
}

// clearSlot removes slot bit from k on every tier and reports whether k lost
// its last holder. Callers hold s.mu.
func (s *shard) clearSlot(k uint64, bit uint64) (goneKey bool) {
	gpu, off := s.held(k)
	if !exists(gpu, off) {
		return false
	}
	gpu &^= bit
	off.cpu &^= bit
	off.storage &^= bit
	s.put(k, gpu, off)
	return !exists(gpu, off)
}

// put stores masks, deleting empty entries so the maps hold only live keys.
func (s *shard) put(k uint64, gpu uint64, off offMasks) {
	if gpu == 0 {
		s.gpu.del(k)
	} else {
		s.gpu.put(k, gpu)
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
func (s *shard) specOf(k uint64, slot uint8) (e specEntry, until int64, ok bool) {
	e = s.spec[k]
	switch {
	case e.mask&(1<<slot) == 0:
		return e, 0, false
	case e.slot == slot:
		return e, e.until, true
	}
	return e, s.specMore[specKey{k, slot}], true
}

// setSpecUntil moves the expiry of slot's entry for k, e being s.spec[k],
// which holds slot. Callers hold s.mu.
func (s *shard) setSpecUntil(k uint64, e specEntry, slot uint8, until int64) {
	if e.slot == slot {
		e.until = until
		s.spec[k] = e
		return
	}
	s.specMore[specKey{k, slot}] = until
}

// holdSpec gives slot a speculative entry for k that expires at until, or
// moves the expiry of the one it has, and reports whether the entry is new
// and whether the one it had was held. Callers hold s.mu.
func (s *shard) holdSpec(k uint64, slot uint8, until int64) (added, wasHeld bool) {
	e, u, ok := s.specOf(k, slot)
	switch {
	case ok:
		s.setSpecUntil(k, e, slot, until)
		return false, u == heldUntilSettled
	case e.mask == 0:
		s.spec[k] = specEntry{mask: 1 << slot, until: until, slot: slot}
	default:
		e.mask |= 1 << slot
		s.spec[k] = e
		s.specMore[specKey{k, slot}] = until
	}
	return true, false
}

// dropSpec removes slot's speculative entry for k, e being s.spec[k], which
// holds slot, and reports whether the entry was held. Callers hold s.mu.
func (s *shard) dropSpec(k uint64, e specEntry, slot uint8) (wasHeld bool) {
	e.mask &^= 1 << slot
	switch {
	case e.slot == slot:
		wasHeld = e.until == heldUntilSettled
		if e.mask == 0 {
			delete(s.spec, k)
			return wasHeld
		}
		// Another holder's expiry moves into the entry.
		e.slot = uint8(trailingZeros(e.mask))
		sk := specKey{k, e.slot}
		e.until = s.specMore[sk]
		delete(s.specMore, sk)
	default:
		sk := specKey{k, slot}
		wasHeld = s.specMore[sk] == heldUntilSettled
		delete(s.specMore, sk)
	}
	s.spec[k] = e
	return wasHeld
}
