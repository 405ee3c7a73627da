package index

import (
	"math/bits"
	"slices"
)

func trailingZeros(x uint64) int { return bits.TrailingZeros64(x) }

// Match is one engine's hold on a looked-up prefix.
type Match struct {
	Engine Engine
	// Blocks is how many leading blocks the engine holds on any tier.
	Blocks int
	// GPUBlocks is how many leading blocks it holds on GPU, the ones a request
	// reuses without a load from an offload tier.
	GPUBlocks int
	// Speculative is how many of the leading Blocks are held only by a
	// speculative entry.
	Speculative int
}

// cand is one group of the engines holding a prompt's first key, the only
// engines a lookup follows: at its first match, which of them still hold
// every key so far on any tier and on GPU, and where their Matches start.
type cand struct {
	group    int
	first    uint64
	any, gpu uint64
	base     int
}

// Lookup reports, for a prompt's chained keys (see Keys), each engine's count
// of leading blocks held. Engines holding no leading block are left out. dst
// is reused, so a caller that keeps it allocates nothing (nor does a lookup
// whose first key's holders span at most four groups of engines). Each key
// costs one shard read lock and a few word operations per group of engines
// still matching; no lock is held across keys, so a concurrent event may be
// seen for some keys and not others, as with any snapshot-free reader.
func (ix *Index) Lookup(keys []uint64, dst []Match) []Match {
	dst = dst[:0]
	if len(keys) == 0 {
		return dst
	}
	slots := *ix.slots.Load()
	var buf [4]cand
	cands := buf[:0]
	now := int64(-1)
	for i, k := range keys {
		sh := ix.shardOf(k)
		sh.mu.RLock()
		gpu, off := sh.held(k)
		var e specEntry
		if len(sh.spec) > 0 {
			e = sh.spec[k]
			if e.holders != 0 && now < 0 {
				now = ix.cfg.Now().UnixNano()
			}
		}
		if i == 0 {
			cands, dst = sh.candidates(cands, dst, gpu, off, e.holders, slots, len(keys))
		}
		alive := false
		for j := range cands {
			c := &cands[j]
			if c.any == 0 {
				continue
			}
			g := sh.word(gpu, c.group)
			real := g | sh.word(off.cpu, c.group) | sh.word(off.storage, c.group)
			var spec uint64
			if e.holders != 0 {
				spec = sh.liveSpec(k, e, c.group, now)
			}
			g |= spec
			held := real | spec
			// Record where each engine's run of leading blocks ends.
			for dead := c.any &^ held; dead != 0; dead &= dead - 1 {
				dst[c.rank(dead)].Blocks = i
			}
			for dead := c.gpu &^ g; dead != 0; dead &= dead - 1 {
				dst[c.rank(dead)].GPUBlocks = i
			}
			c.any &= held
			c.gpu &= g
			for s := c.any & spec &^ real; s != 0; s &= s - 1 {
				dst[c.rank(s)].Speculative++
			}
			alive = alive || c.any != 0
		}
		sh.mu.RUnlock()
		if !alive {
			break
		}
	}
	// Slots freed since the first key's holders were read have no engine.
	return slices.DeleteFunc(dst, func(m Match) bool { return m.Engine.Pod == "" || m.Blocks == 0 })
}

// rank is the index in dst of the engine at the lowest bit of b.
func (c *cand) rank(b uint64) int {
	return c.base + bits.OnesCount64(c.first&(b&-b-1))
}

// candidates appends to cands every group holding the first key on any
// tier or speculatively, and to dst a Match per engine of theirs, which
// the walk then shortens; n is the prompt's length in keys. Callers hold
// s.mu (read).
func (s *shard) candidates(cands []cand, dst []Match, gpu holders, off offHolders, spec holders, slots []Engine,
	n int) ([]cand, []Match) {
	groups := max(s.groups(gpu), s.groups(off.cpu), s.groups(off.storage), s.groups(spec))
	for w := range groups {
		m := s.word(gpu, w) | s.word(off.cpu, w) | s.word(off.storage, w) | s.word(spec, w)
		if m == 0 {
			continue
		}
		cands = append(cands, cand{group: w, first: m, any: m, gpu: m, base: len(dst)})
		for b := m; b != 0; b &= b - 1 {
			var e Engine
			if slot := w*groupSize + trailingZeros(b); slot < len(slots) {
				e = slots[slot]
			}
			dst = append(dst, Match{Engine: e, Blocks: n, GPUBlocks: n})
		}
	}
	return cands, dst
}

// LookupTokens is Lookup for a prompt's token ids, cut into blocks of the
// fleet's block size (nothing matches while it is unknown). Prompts of up to
// 256 blocks are keyed without allocating.
func (ix *Index) LookupTokens(tokens []uint32, lora string, extra [][]byte, dst []Match) []Match {
	bs := ix.BlockSize()
	if bs <= 0 {
		return dst[:0]
	}
	var buf [256]uint64
	return ix.Lookup(Keys(buf[:0], tokens, bs, lora, extra), dst)
}
