package index

import (
	"errors"
	"fmt"
)

// Stored is one BlockStored event as the index applies it.
type Stored struct {
	// Hashes are the engine's block hashes, one per full block.
	Hashes []uint64
	// Parent is the engine hash before the first block, valid when HasParent.
	Parent    uint64
	HasParent bool
	// Tokens are BlockSize tokens per block, or none on offload tiers.
	Tokens    []uint32
	BlockSize int
	// LoRA names the adapter ("" for the base model).
	LoRA string
	// Extra holds per-block extra keys (see ExtraHash), or nil.
	Extra [][]byte
	Tier  Tier
}

// Store applies a BlockStored from engine e. Blocks whose parent is unknown
// become orphans; storing a block links any orphans waiting on it.
func (ix *Index) Store(e Engine, s *Stored) error {
	if len(s.Tokens) > 0 && (s.BlockSize <= 0 || len(s.Tokens) != len(s.Hashes)*s.BlockSize) {
		return fmt.Errorf("storing blocks of %s: %d tokens for %d blocks of %d", e, len(s.Tokens), len(s.Hashes), s.BlockSize)
	}
	if s.Extra != nil && len(s.Extra) != len(s.Hashes) {
		return fmt.Errorf("storing blocks of %s: %d extra keys for %d blocks", e, len(s.Extra), len(s.Hashes))
	}
	var d delta
	err := ix.withEngine(e, true, func(es *engine) {
		ix.learnBlockSize(es, s.BlockSize, &d)
		if len(s.Tokens) == 0 {
			ix.storeKnown(es, s, &d)
		} else {
			ix.storeChain(es, s, &d)
		}
		es.size.Add(d.pairs)
	})
	ix.c.apply(&d)
	ix.sweepSpec()
	ix.maybeEvict()
	return err
}

// withEngine runs fn under e's lock, retrying if e was dropped in between.
func (ix *Index) withEngine(e Engine, create bool, fn func(*engine)) error {
	for {
		var es *engine
		if create {
			var err error
			if es, err = ix.engineFor(e); err != nil {
				return err
			}
		} else if es = ix.existing(e); es == nil {
			return nil
		}
		es.mu.Lock()
		if !es.dropped {
			fn(es)
			es.mu.Unlock()
			return nil
		}
		es.mu.Unlock()
	}
}

func (ix *Index) learnBlockSize(es *engine, bs int, d *delta) {
	if bs <= 0 {
		return
	}
	if es.blockSize == 0 {
		es.blockSize = bs
	}
	ix.blockSize.CompareAndSwap(0, int64(bs))
	if bs != es.blockSize || int64(bs) != ix.blockSize.Load() {
		d.mismatches++
	}
}

// storeChain keys each block from its parent's key and its own tokens.
func (ix *Index) storeChain(es *engine, s *Stored, d *delta) {
	bs := s.BlockSize
	parent, known := RootKey(s.LoRA), true
	if s.HasParent {
		parent, known = es.blocks.get(s.Parent)
	}
	prev := s.Parent
	for i, h := range s.Hashes {
		th := TokenHash(s.Tokens[i*bs : (i+1)*bs])
		var xh uint64
		if s.Extra != nil {
			xh = ExtraHash(s.Extra[i])
		}
		if !known {
			// A block already keyed (stored earlier with a known chain) gives
			// the rest of the chain its parent back.
			if k, ok := es.blocks.get(h); ok {
				parent, known, prev = k, true, h
				ix.hold(es, h, k, s.Tier, d)
				continue
			}
			ix.addOrphan(es, prev, orphan{hash: h, tokens: th, extra: xh, tier: s.Tier}, d)
			prev = h
			continue
		}
		k := BlockKey(parent, th, xh)
		ix.hold(es, h, k, s.Tier, d)
		parent, prev = k, h
	}
}

// storeKnown applies a token-less BlockStored (an offload tier copying blocks
// it got from the GPU): only hashes the engine already keyed can be placed.
func (ix *Index) storeKnown(es *engine, s *Stored, d *delta) {
	for _, h := range s.Hashes {
		if k, ok := es.blocks.get(h); ok {
			ix.hold(es, h, k, s.Tier, d)
		} else {
			d.unresolved++
		}
	}
}

// hold records that es holds key k (engine hash h) on tier t and links the
// orphans that were waiting on h.
func (ix *Index) hold(es *engine, h, k uint64, t Tier, d *delta) {
	old, had := es.blocks.swap(h, k)
	if had && old != k {
		ix.release(es, old, d)
	}
	if !had {
		d.pairs++
	}
	sh := ix.shardOf(k)
	sh.mu.Lock()
	newKey, confirmed, wasHeld := sh.add(k, t, es.slot)
	sh.mu.Unlock()
	if newKey {
		d.keys++
	}
	if confirmed {
		d.specConfirmed++
		d.spec--
	}
	if wasHeld {
		d.specHeld--
	}
	d.stored++
	if len(es.waiting) > 0 {
		ix.link(es, h, k, d)
	}
}

// release drops es's holding of k on every tier.
func (ix *Index) release(es *engine, k uint64, d *delta) {
	sh := ix.shardOf(k)
	sh.mu.Lock()
	gone := sh.clearSlot(k, es.slot)
	sh.mu.Unlock()
	if gone {
		d.keys--
	}
}

// Remove applies a BlockRemoved from engine e for tier t.
func (ix *Index) Remove(e Engine, hashes []uint64, t Tier) {
	var d delta
	_ = ix.withEngine(e, false, func(es *engine) {
		for _, h := range hashes {
			k, ok := es.blocks.get(h)
			if !ok {
				ix.removeOrphan(es, h, t, &d)
				continue
			}
			sh := ix.shardOf(k)
			sh.mu.Lock()
			gone, still := sh.del(k, t, es.slot)
			sh.mu.Unlock()
			if gone {
				d.keys--
			}
			if !still {
				es.blocks.del(h)
				d.pairs--
			}
			d.removed++
		}
		es.size.Add(d.pairs)
	})
	ix.c.apply(&d)
	ix.sweepSpec()
}

// Purge forgets everything engine e holds, keeping its slot: for
// AllBlocksCleared, an engine restart, or a gap that replay cannot cover.
func (ix *Index) Purge(e Engine) {
	var d delta
	_ = ix.withEngine(e, false, func(es *engine) { ix.purge(es, &d) })
	ix.c.apply(&d)
}

func (ix *Index) purge(es *engine, d *delta) {
	ix.purgeBlocks(es, d)
	n, held := ix.clearSpec(es.slot)
	d.spec, d.specHeld = d.spec-n, d.specHeld-held
	d.purges++
}

// purgeBlocks forgets the blocks and orphans of es, not its speculative
// entries.
func (ix *Index) purgeBlocks(es *engine, d *delta) {
	es.blocks.each(0, func(_, k uint64) bool {
		ix.release(es, k, d)
		return true
	})
	d.pairs -= int64(es.blocks.len())
	d.orphans -= int64(len(es.orphanOf))
	es.reset()
}

// Drop purges engine e and frees its slot: the pod is gone.
func (ix *Index) Drop(e Engine) {
	var d delta
	_ = ix.withEngine(e, false, func(es *engine) {
		ix.purge(es, &d)
		es.dropped = true
		ix.mu.Lock()
		delete(ix.engines, e)
		ix.used[es.slot/64] &^= 1 << (es.slot % 64)
		ix.publishSlot(es.slot, Engine{})
		ix.mu.Unlock()
	})
	ix.c.apply(&d)
}

// DropPod drops every engine (data-parallel rank) of pod, speculative
// ones included, freeing their slots.
func (ix *Index) DropPod(pod string) {
	for _, e := range ix.Engines() {
		if e.Pod == pod {
			ix.Drop(e)
		}
	}
}

var errNoEngine = errors.New("no such engine")

// EngineBlockSize returns the block size learned from engine e's events.
func (ix *Index) EngineBlockSize(e Engine) (int, error) {
	bs, found := 0, false
	_ = ix.withEngine(e, false, func(es *engine) { bs, found = es.blockSize, true })
	if !found {
		return 0, fmt.Errorf("block size of %s: %w", e, errNoEngine)
	}
	return bs, nil
}
