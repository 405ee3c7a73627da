package index

import "math/bits"

// The router keys blocks by its own chained hash of their tokens, so it needs
// neither vLLM's hash algorithm nor its seed (PROTOCOLS.md section 2). The
// hash only has to agree with itself inside one router process; it is a
// multiply-fold in the style of wyhash because it runs over every token the
// router ingests and every prompt it routes.
const (
	k0 = 0x9e3779b97f4a7c15
	k1 = 0xc2b2ae3d27d4eb4f
	k2 = 0x165667b19e3779f9
	k3 = 0x27d4eb2f165667c5
)

func mix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a^k0, b^k1)
	return hi ^ lo
}

// TokenHash hashes one block's tokens. Orphans are kept by it, so that their
// key can be computed once their parent's key is known without keeping the
// tokens themselves.
func TokenHash(tokens []uint32) uint64 {
	h := uint64(len(tokens)) * k2
	i := 0
	for ; i+4 <= len(tokens); i += 4 {
		a := uint64(tokens[i]) | uint64(tokens[i+1])<<32
		b := uint64(tokens[i+2]) | uint64(tokens[i+3])<<32
		h = mix(h^a, b^k3)
	}
	for ; i < len(tokens); i++ {
		h = mix(h, uint64(tokens[i]))
	}
	return h
}

// bytesHash is FNV-1a folded through mix; it serves the short, rare inputs
// (LoRA names, extra keys).
func bytesHash(b []byte) uint64 {
	h := uint64(0xcbf29ce484222325)
	for _, c := range b {
		h = (h ^ uint64(c)) * 0x100000001b3
	}
	return mix(h, uint64(len(b)))
}

// ExtraHash hashes the msgpack encoding of one block's vLLM extra-keys tuple
// (multimodal hashes, cache salt, LoRA name); nil means no extra keys.
func ExtraHash(raw []byte) uint64 {
	if raw == nil {
		return 0
	}
	return bytesHash(raw)
}

// RootKey is the parent key of a chain's first block. The LoRA adapter is
// mixed in here, and thereby into every key of the chain, because the same
// tokens under different adapters are different KV blocks.
func RootKey(lora string) uint64 {
	if lora == "" {
		return k2
	}
	return mix(k2, bytesHash([]byte(lora)))
}

// BlockKey chains one block onto its parent's key.
func BlockKey(parent, tokenHash, extraHash uint64) uint64 {
	return mix(mix(parent, tokenHash), extraHash^k3)
}

// Keys appends to dst the chained keys of every full block of tokens, as a
// request is looked up: the same function the index applies to BlockStored
// token ids. extra holds per-block extra keys (see ExtraHash) and may be
// shorter than the block count or nil.
func Keys(dst []uint64, tokens []uint32, blockSize int, lora string, extra [][]byte) []uint64 {
	if blockSize <= 0 {
		return dst
	}
	k := RootKey(lora)
	for i := 0; (i+1)*blockSize <= len(tokens); i++ {
		var x []byte
		if i < len(extra) {
			x = extra[i]
		}
		k = BlockKey(k, TokenHash(tokens[i*blockSize:(i+1)*blockSize]), ExtraHash(x))
		dst = append(dst, k)
	}
	return dst
}
