package index

import "math/bits"

// table is an open-addressing map from uint64 to uint64 (Robin Hood linear
// probing, backward-shift deletion). It exists for memory: a Go map's
// power-of-two growth leaves it between 7/16 and 7/8 full (28-46 B per entry
// of 16 measured at 1M entries), while this table grows by 1.5x up to 7/8 and
// sizes itself by multiply-shift instead of a mask, so it averages about
// 23 B per entry. Callers serialise access.
type table struct {
	slots   []slot
	n       int
	zeroVal uint64 // the value of key 0, which marks empty slots
	hasZero bool
}

type slot struct{ key, val uint64 }

const minTableSize = 8

// home is the slot a key hashes to: the key is spread by an odd multiplier
// (engine hashes from tests or Python's hash() can be small integers) and
// scaled onto the table's length.
func (t *table) home(k uint64) int {
	hi, _ := bits.Mul64(k*k0, uint64(len(t.slots)))
	return int(hi)
}

// dist is how far slot i is from key k's home.
func (t *table) dist(k uint64, i int) int {
	d := i - t.home(k)
	if d < 0 {
		d += len(t.slots)
	}
	return d
}

func (t *table) len() int {
	if t.hasZero {
		return t.n + 1
	}
	return t.n
}

// find returns k's slot index or -1.
func (t *table) find(k uint64) int {
	if len(t.slots) == 0 {
		return -1
	}
	i := t.home(k)
	for d := 0; ; d++ {
		s := t.slots[i]
		if s.key == k {
			return i
		}
		// Robin Hood order: k would sit before any key closer to its home.
		if s.key == 0 || t.dist(s.key, i) < d {
			return -1
		}
		if i++; i == len(t.slots) {
			i = 0
		}
	}
}

func (t *table) get(k uint64) (uint64, bool) {
	if k == 0 {
		return t.zeroVal, t.hasZero
	}
	if i := t.find(k); i >= 0 {
		return t.slots[i].val, true
	}
	return 0, false
}

func (t *table) put(k, v uint64) { t.swap(k, v) }

// swap sets k to v and returns the previous value, in one probe.
func (t *table) swap(k, v uint64) (old uint64, had bool) {
	if k == 0 {
		old, had = t.zeroVal, t.hasZero
		t.zeroVal, t.hasZero = v, true
		return old, had
	}
	if i := t.find(k); i >= 0 {
		old, t.slots[i].val = t.slots[i].val, v
		return old, true
	}
	if (t.n+1)*8 > len(t.slots)*7 {
		t.grow()
	}
	t.insert(slot{k, v})
	return 0, false
}

// ref returns a pointer to k's value, inserting k with value 0 if absent,
// in one probe (the per-block update of a key's holders). The pointer is
// valid until the table next changes.
func (t *table) ref(k uint64) *uint64 {
	if k == 0 {
		t.hasZero = true
		return &t.zeroVal
	}
	if i := t.find(k); i >= 0 {
		return &t.slots[i].val
	}
	if (t.n+1)*8 > len(t.slots)*7 {
		t.grow()
	}
	return &t.slots[t.insert(slot{k, 0})].val
}

// clear empties the table but keeps its size: a purged engine refills.
func (t *table) clear() {
	clear(t.slots)
	t.n, t.zeroVal, t.hasZero = 0, 0, false
}

// insert places a key known to be absent and returns its slot.
func (t *table) insert(cur slot) int {
	at := -1
	i := t.home(cur.key)
	for d := 0; ; d++ {
		s := &t.slots[i]
		if s.key == 0 {
			*s = cur
			t.n++
			if at < 0 {
				at = i
			}
			return at
		}
		if sd := t.dist(s.key, i); sd < d {
			*s, cur = cur, *s
			d = sd
			if at < 0 {
				at = i
			}
		}
		if i++; i == len(t.slots) {
			i = 0
		}
	}
}

func (t *table) grow() { t.resize(max(minTableSize, len(t.slots)+len(t.slots)/2)) }

// reserve makes room for n entries without growing. Keys inserted in
// another table's slot order (an imported snapshot) arrive sorted by home:
// into a table that grows on the way, each early prefix of them homes into
// the start of the smaller table and probes grow quadratically
// (BENCHMARKS.md, the warm start at 256 pods).
func (t *table) reserve(n int) {
	if need := n*8/7 + 1; need > len(t.slots) {
		t.resize(need)
	}
}

func (t *table) resize(size int) {
	old := t.slots
	t.slots = make([]slot, size)
	t.n = 0
	for _, s := range old {
		if s.key != 0 {
			t.insert(s)
		}
	}
}

func (t *table) del(k uint64) {
	if k == 0 {
		t.zeroVal, t.hasZero = 0, false
		return
	}
	i := t.find(k)
	if i < 0 {
		return
	}
	// Shift the following displaced keys one step back towards their home.
	for {
		j := i + 1
		if j == len(t.slots) {
			j = 0
		}
		s := t.slots[j]
		if s.key == 0 || t.dist(s.key, j) == 0 {
			break
		}
		t.slots[i] = s
		i = j
	}
	t.slots[i] = slot{}
	t.n--
}

// each calls fn for every entry, starting at slot start (any value) so that
// partial walks such as eviction do not always favour the same keys. fn must
// not modify the table.
func (t *table) each(start int, fn func(k, v uint64) bool) {
	if t.hasZero && !fn(0, t.zeroVal) {
		return
	}
	n := len(t.slots)
	for i := 0; i < n; i++ {
		s := t.slots[(start+i)%n]
		if s.key != 0 && !fn(s.key, s.val) {
			return
		}
	}
}
