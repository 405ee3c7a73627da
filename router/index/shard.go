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

type shard struct {
	mu  sync.RWMutex
	gpu table // key -> engine slots holding it on GPU
	off map[uint64]offMasks
	// spec holds speculative holders per key; specUntil their expiry, per
	// (key, slot), in clock nanoseconds.
	spec      map[uint64]uint64
	specUntil map[specKey]int64
	_         [64]byte // keep neighbouring shards' locks off one cache line
}

func (s *shard) init() {
	s.off = make(map[uint64]offMasks)
	s.spec = make(map[uint64]uint64)
	s.specUntil = make(map[specKey]int64)
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
// key. It confirms a speculative entry of the same slot. Callers hold s.mu.
func (s *shard) add(k uint64, t Tier, bit uint64, slot uint8) (newKey, confirmed bool) {
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
		if m := s.spec[k]; m&bit != 0 {
			s.dropSpec(k, m, bit, slot)
			confirmed = true
		}
	}
	return newKey, confirmed
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

// dropSpec removes slot's speculative entry for k; m is s.spec[k]. Callers
// hold s.mu.
func (s *shard) dropSpec(k, m, bit uint64, slot uint8) {
	if m &^= bit; m == 0 {
		delete(s.spec, k)
	} else {
		s.spec[k] = m
	}
	delete(s.specUntil, specKey{k, slot})
}
