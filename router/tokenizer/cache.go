package tokenizer

import "strings"

// Real text repeats its words, so each call's scratch remembers the ids of the
// pieces it has merged. The cache lives in the pooled scratch rather than in
// the Tokenizer so that concurrent requests never contend on it; it is bounded
// and simply starts over when full.
const (
	maxCachedPiece = 64      // bytes; longer pieces are rare and cheap to miss
	maxCachedWords = 1 << 15 // entries before the cache starts over
)

type cachedIDs struct{ off, n uint32 }

// lookup appends the cached ids of piece, if any.
func (sc *scratch) lookup(dst []uint32, piece string) ([]uint32, bool) {
	e, ok := sc.cache[piece]
	if !ok {
		return dst, false
	}
	return append(dst, sc.arena[e.off:e.off+e.n]...), true
}

// remember caches the ids of piece.
func (sc *scratch) remember(piece string, ids []uint32) {
	if sc.cache == nil || len(sc.cache) >= maxCachedWords {
		sc.cache = make(map[string]cachedIDs, 1024)
		sc.arena = sc.arena[:0]
	}
	sc.cache[strings.Clone(piece)] = cachedIDs{uint32(len(sc.arena)), uint32(len(ids))}
	sc.arena = append(sc.arena, ids...)
}
