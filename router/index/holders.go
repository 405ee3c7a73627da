package index

import "math/bits"

// holders is a set of engine slots: a key's holders on one tier, or its
// speculative holders. Slots are grouped groupSize to a word. A set whose
// slots lie in one group is inline: the group's number above the group's
// bits (bit 63 clear). Any other set is overflowBit plus the index of a
// bitmap (one word per group) in its shard's arena. Slots are handed out
// lowest first, so on a fleet of up to groupSize engines every set is
// inline and costs the 8 bytes the former 64-bit mask did; on larger fleets
// a key one engine holds, the common case (BENCHMARKS.md, issue 29), stays
// inline too. The empty set is 0.
type holders uint64

const (
	groupSize   = 56
	groupBits   = 1<<groupSize - 1
	overflowBit = 1 << 63
	// maxGroups is what the 7 bits between the group's bits and
	// overflowBit number.
	maxGroups = 1 << (63 - groupSize)
)

func (h holders) inline() bool { return h&overflowBit == 0 }

// group is an inline set's group number.
func (h holders) group() int { return int(h >> groupSize) }

// word returns the bits of group w in h.
func (s *shard) word(h holders, w int) uint64 {
	if h.inline() {
		if h != 0 && h.group() == w {
			return uint64(h) & groupBits
		}
		return 0
	}
	if ws := s.over[uint32(h)]; w < len(ws) {
		return ws[w]
	}
	return 0
}

// groups is one past the highest group h may have bits in.
func (s *shard) groups(h holders) int {
	switch {
	case h == 0:
		return 0
	case h.inline():
		return h.group() + 1
	}
	return len(s.over[uint32(h)])
}

func (s *shard) has(h holders, slot int) bool {
	return s.word(h, slot/groupSize)&(1<<(slot%groupSize)) != 0
}

// with returns h with slot added; it may spill an inline set to the arena.
func (s *shard) with(h holders, slot int) holders {
	w, bit := slot/groupSize, uint64(1)<<(slot%groupSize)
	switch {
	case h == 0:
		return holders(uint64(w)<<groupSize | bit)
	case h.inline() && h.group() == w:
		return h | holders(bit)
	case h.inline():
		i := s.newOverflow(max(h.group(), w) + 1)
		ws := s.over[i]
		ws[h.group()], ws[w] = uint64(h)&groupBits, bit
		return overflowBit | holders(i)
	}
	i := uint32(h)
	if ws := s.over[i]; w >= len(ws) {
		s.over[i] = append(ws, make([]uint64, w+1-len(ws))...)
	}
	s.over[i][w] |= bit
	return h
}

// without returns h with slot removed: inline again once what is left lies
// in one group, 0 once nothing is.
func (s *shard) without(h holders, slot int) holders {
	w, bit := slot/groupSize, uint64(1)<<(slot%groupSize)
	if h.inline() {
		if h == 0 || h.group() != w {
			return h
		}
		if h &^= holders(bit); uint64(h)&groupBits == 0 {
			return 0
		}
		return h
	}
	i := uint32(h)
	ws := s.over[i]
	if w < len(ws) {
		ws[w] &^= bit
	}
	only, n := 0, 0
	for j, x := range ws {
		if x != 0 {
			only, n = j, n+1
		}
	}
	if n > 1 {
		return h
	}
	s.freeOverflow(i)
	if n == 0 {
		return 0
	}
	return holders(uint64(only)<<groupSize | ws[only])
}

// first is h's lowest slot; h is not empty.
func (s *shard) first(h holders) int {
	for w := range s.groups(h) {
		if x := s.word(h, w); x != 0 {
			return w*groupSize + bits.TrailingZeros64(x)
		}
	}
	return -1
}

// newOverflow returns the index of a zeroed arena bitmap of n groups.
func (s *shard) newOverflow(n int) uint32 {
	s.overflows++
	if k := len(s.freeOver); k > 0 {
		i := s.freeOver[k-1]
		s.freeOver = s.freeOver[:k-1]
		ws := s.over[i][:0]
		s.over[i] = append(ws, make([]uint64, n)...)
		return i
	}
	s.over = append(s.over, make([]uint64, n))
	return uint32(len(s.over) - 1)
}

// freeOverflow returns bitmap i to the arena; its memory serves the next.
func (s *shard) freeOverflow(i uint32) {
	s.overflows--
	s.freeOver = append(s.freeOver, i)
}
