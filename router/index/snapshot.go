package index

import "fmt"

// Block is one block an engine holds: its engine hash, the router's key for
// it, and the tiers holding it (bit t set for Tier t).
type Block struct {
	Hash, Key uint64
	Tiers     uint8
}

// EngineSnapshot is what the index knows of one engine, for a replica
// warming its index from a peer's (DESIGN.md decision 6): the block size
// learnt from its events and the blocks it holds. Orphans (blocks whose
// parent the index has not seen) are left out: they are no prefix yet, and
// the events replayed after the snapshot bring them again.
type EngineSnapshot struct {
	BlockSize int
	Blocks    []Block
}

// allTiers is the mask of every Tier.
const allTiers = 1<<TierGPU | 1<<TierCPU | 1<<TierStorage

// Export returns what the index holds of engine e, and false when e is
// not in the index. It is consistent for e: e's events wait while it runs.
func (ix *Index) Export(e Engine) (EngineSnapshot, bool) {
	var s EngineSnapshot
	found := false
	_ = ix.withEngine(e, false, func(es *engine) {
		found = true
		s.BlockSize = es.blockSize
		s.Blocks = make([]Block, 0, es.blocks.len())
		es.blocks.each(0, func(h, k uint64) bool {
			sh := ix.shardOf(k)
			sh.mu.RLock()
			gpu, off := sh.held(k)
			var tiers uint8
			for t, hs := range [...]holders{TierGPU: gpu, TierCPU: off.cpu, TierStorage: off.storage} {
				if sh.has(hs, es.slot) {
					tiers |= 1 << t
				}
			}
			sh.mu.RUnlock()
			if tiers != 0 {
				s.Blocks = append(s.Blocks, Block{Hash: h, Key: k, Tiers: tiers})
			}
			return true
		})
	})
	return s, found
}

// Import makes engine e hold exactly the blocks of s, replacing whatever
// the index held of it (its speculative entries stay). A block naming no
// tier, or a tier the index does not know, is refused whole: s comes from
// another process.
func (ix *Index) Import(e Engine, s EngineSnapshot) error {
	if s.BlockSize < 0 {
		return fmt.Errorf("import %s: block size %d", e, s.BlockSize)
	}
	for _, b := range s.Blocks {
		if b.Tiers == 0 || b.Tiers&^allTiers != 0 {
			return fmt.Errorf("import %s: block %#x has tiers %#b", e, b.Hash, b.Tiers)
		}
	}
	var d delta
	err := ix.withEngine(e, true, func(es *engine) {
		ix.purgeBlocks(es, &d)
		es.blocks.reserve(len(s.Blocks))
		before := d.pairs
		ix.learnBlockSize(es, s.BlockSize, &d)
		for _, b := range s.Blocks {
			for t := TierGPU; t <= TierStorage; t++ {
				if b.Tiers&(1<<t) != 0 {
					ix.hold(es, b.Hash, b.Key, t, &d)
				}
			}
		}
		es.size.Add(d.pairs - before)
	})
	ix.c.apply(&d)
	ix.maybeEvict()
	return err
}

// Digest summarises what the index holds of engine e: its blocks and an
// order-independent hash of every (engine hash, key, tiers), so that two
// replicas' indexes are compared without moving them (GET /v1/index).
// ok is false when e is not in the index.
func (ix *Index) Digest(e Engine) (blocks int, digest uint64, ok bool) {
	s, ok := ix.Export(e)
	for _, b := range s.Blocks {
		digest += mix(mix(b.Hash, b.Key), uint64(b.Tiers))
	}
	return len(s.Blocks), digest, ok
}
