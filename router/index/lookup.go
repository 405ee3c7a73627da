package index

import "math/bits"

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

// Lookup reports, for a prompt's chained keys (see Keys), each engine's count
// of leading blocks held. Engines holding no leading block are left out. dst
// is reused, so a caller that keeps it allocates nothing. Each key costs one
// shard read lock; no lock is held across keys, so a concurrent event may be
// seen for some keys and not others, as with any snapshot-free reader.
func (ix *Index) Lookup(keys []uint64, dst []Match) []Match {
	dst = dst[:0]
	var anyEnd, gpuEnd, specN [MaxEngines]int32
	alive, aliveGPU := ^uint64(0), ^uint64(0)
	now := int64(-1)
	for i, k := range keys {
		sh := ix.shardOf(k)
		sh.mu.RLock()
		gpu, off := sh.held(k)
		var spec uint64
		if len(sh.spec) > 0 {
			if e, ok := sh.spec[k]; ok {
				if now < 0 {
					now = ix.cfg.Now().UnixNano()
				}
				spec = sh.liveSpec(k, e, now)
			}
		}
		sh.mu.RUnlock()
		real := gpu | off.cpu | off.storage
		g := gpu | spec
		held := real | spec
		// Record where each engine's run of leading blocks ends.
		for dead := alive &^ held; dead != 0; dead &= dead - 1 {
			anyEnd[trailingZeros(dead)] = int32(i)
		}
		for dead := aliveGPU &^ g; dead != 0; dead &= dead - 1 {
			gpuEnd[trailingZeros(dead)] = int32(i)
		}
		alive &= held
		aliveGPU &= g
		for s := alive & spec &^ real; s != 0; s &= s - 1 {
			specN[trailingZeros(s)]++
		}
		if alive == 0 {
			break
		}
	}
	for b := alive; b != 0; b &= b - 1 {
		anyEnd[trailingZeros(b)] = int32(len(keys))
	}
	for b := aliveGPU; b != 0; b &= b - 1 {
		gpuEnd[trailingZeros(b)] = int32(len(keys))
	}
	slots := ix.slots.Load()
	for slot := range anyEnd {
		if anyEnd[slot] > 0 && slots[slot].Pod != "" {
			dst = append(dst, Match{Engine: slots[slot], Blocks: int(anyEnd[slot]),
				GPUBlocks: int(gpuEnd[slot]), Speculative: int(specN[slot])})
		}
	}
	return dst
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
