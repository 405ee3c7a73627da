package sim

import (
	"crypto/sha256"
	"encoding/binary"

	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
)

// The simulator generates text it never computes, so its output tokens only
// have to be valid, deterministic and cheap to render. Qwen's byte-level
// vocabulary starts with the 94 printable ASCII characters at ids 0..93
// ("!" is 0), so ids 64..89 are the single letters "a".."z": a client
// without the tokenizer can render them and a client with it agrees.
const (
	firstLetterID = 'a' - '!'
	numLetters    = 26
)

// outputToken is the i-th output token of a request with the given seed.
func outputToken(seed uint64, i int) uint32 {
	return firstLetterID + uint32(splitmix(seed+uint64(i))%numLetters)
}

// tokenText renders an id produced by outputToken.
func tokenText(id uint32) string {
	if id >= firstLetterID && id < firstLetterID+numLetters {
		return string(rune('!' + id))
	}
	return ""
}

// splitmix is SplitMix64's finaliser: a cheap, well-mixed function of a counter.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// hasher computes vLLM-style chained block hashes, h_i = H(h_{i-1}, tokens_i,
// extra_i) where extra_i is the block's extra-keys tuple (adapter, salt),
// with SHA-256 (vLLM's default algorithm) truncated to its last 8 bytes as
// vLLM's integer event hashes are. The root is random per engine, as in
// vLLM without PYTHONHASHSEED, so nothing downstream can rely on engine
// hashes agreeing across pods.
type hasher struct {
	root uint64
	buf  []byte
}

func (h *hasher) block(parent uint64, tokens []uint32, extra []byte) uint64 {
	b := binary.BigEndian.AppendUint64(h.buf[:0], parent)
	for _, t := range tokens {
		b = binary.LittleEndian.AppendUint32(b, t)
	}
	b = append(b, extra...)
	h.buf = b
	sum := sha256.Sum256(b)
	return binary.BigEndian.Uint64(sum[24:])
}

// extend appends to r.hashes the hash of every full block of r.tokens not
// hashed yet.
func (h *hasher) extend(r *Request, blockSize int) {
	for n := len(r.hashes); (n+1)*blockSize <= len(r.tokens); n++ {
		parent := h.root
		if n > 0 {
			parent = r.hashes[n-1]
		}
		r.hashes = append(r.hashes, h.block(parent, r.tokens[n*blockSize:(n+1)*blockSize], kvevents.VLLMExtraKeys(r.LoRA, r.CacheSalt, n)))
	}
}
