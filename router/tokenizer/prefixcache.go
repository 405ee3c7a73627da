package tokenizer

import (
	"hash/maphash"
	"strings"
	"sync"
	"sync/atomic"
)

// PrefixCache remembers the ids of recently encoded segments (the text
// between added tokens: in a rendered chat, one message each), so a prompt
// that repeats a recent prompt's text is not tokenized again (DESIGN.md,
// decision 7). A segment seen before is answered whole; a segment that
// shares a long prefix with one seen before (a growing conversation sent as
// one text, a document with a new question) resumes from the last point of
// the cached one that the shared prefix covers (resume.go says why the ids
// are then the same as an uncached encoding's) and encodes the rest.
//
// Memory is bounded by a byte budget (text, ids, marks and index entries);
// the least recently used segments go first. A PrefixCache is safe for
// concurrent use; lookups and inserts take one mutex, the encoding runs
// outside it.
type PrefixCache struct {
	tok      *Tokenizer
	maxBytes int64
	seed     maphash.Seed

	mu       sync.Mutex
	whole    map[uint64]*cachedSegment // hash of the whole text
	prefixes map[uint64]*cachedSegment // chained hash of the text's first k*prefixStride bytes
	lru      cachedSegment             // sentinel: lru.next is the most recent
	bytes    int64
	segments int

	hits, resumed, misses, evicted, reusedBytes, encodedBytes atomic.Int64
}

// cachedSegment is one cached segment; immutable once in the cache, so readers
// use it after the lock is released.
type cachedSegment struct {
	text       string
	ids        []uint32
	marks      []mark
	whole      uint64
	prefixes   []uint64
	size       int64
	prev, next *cachedSegment
}

const (
	// minCachedSegment: shorter segments (role names, the newline between
	// messages) cost less to encode than to look up.
	minCachedSegment = 512
	// prefixStride is the granularity at which a segment's prefixes are
	// indexed: a shared prefix shorter than this is not found.
	prefixStride = 4096
	// segmentOverhead estimates the struct, its list links and the map
	// entries of one segment, and mapEntryBytes one more prefix key.
	segmentOverhead = 160
	mapEntryBytes   = 48
)

// NewPrefixCache returns a cache of t's encodings holding at most maxBytes
// (estimated); maxBytes <= 0 gives a cache that holds nothing.
func (t *Tokenizer) NewPrefixCache(maxBytes int64) *PrefixCache {
	c := &PrefixCache{tok: t, maxBytes: maxBytes, seed: maphash.MakeSeed(),
		whole: map[uint64]*cachedSegment{}, prefixes: map[uint64]*cachedSegment{}}
	c.lru.next, c.lru.prev = &c.lru, &c.lru
	return c
}

// Encode is Tokenizer.Encode through the cache: the same ids.
func (c *PrefixCache) Encode(text string, addSpecial bool) ([]uint32, error) {
	return c.tok.appendEncode(nil, text, addSpecial, c)
}

// AppendEncode is Tokenizer.AppendEncode through the cache.
func (c *PrefixCache) AppendEncode(dst []uint32, text string, addSpecial bool) ([]uint32, error) {
	return c.tok.appendEncode(dst, text, addSpecial, c)
}

// PrefixCacheStats are a PrefixCache's counters since it was made.
type PrefixCacheStats struct {
	// Hits are segments answered whole, Resumed segments resumed from a
	// cached one's prefix, Misses segments encoded from their start (only
	// segments long enough to be cached are counted).
	Hits, Resumed, Misses int64
	// ReusedBytes is the text whose ids came from the cache, EncodedBytes
	// the text of counted segments that was encoded.
	ReusedBytes, EncodedBytes int64
	// Evicted counts segments dropped to stay within MaxBytes.
	Evicted int64
	// Segments and Bytes are what the cache holds now, MaxBytes its bound.
	Segments        int
	Bytes, MaxBytes int64
}

// Stats returns the cache's counters.
func (c *PrefixCache) Stats() PrefixCacheStats {
	c.mu.Lock()
	n, b := c.segments, c.bytes
	c.mu.Unlock()
	return PrefixCacheStats{Hits: c.hits.Load(), Resumed: c.resumed.Load(), Misses: c.misses.Load(),
		ReusedBytes: c.reusedBytes.Load(), EncodedBytes: c.encodedBytes.Load(), Evicted: c.evicted.Load(),
		Segments: n, Bytes: b, MaxBytes: c.maxBytes}
}

// encodeText is Tokenizer.encodeText through the cache.
func (c *PrefixCache) encodeText(dst []uint32, s string, sc *scratch) []uint32 {
	t := c.tok
	if len(s) < minCachedSegment || c.maxBytes <= 0 {
		return t.encodeText(dst, s, sc)
	}
	var whole uint64
	whole, sc.strides = c.hashes(sc.strides[:0], s)
	base, from, same := c.find(s, whole, sc.strides)
	if same {
		c.hits.Add(1)
		c.reusedBytes.Add(int64(len(s)))
		return append(dst, base.ids...)
	}
	start := len(dst)
	var marks []mark
	switch {
	case base != nil:
		k := lastMark(base.marks, from)
		m := base.marks[k]
		c.resumed.Add(1)
		c.reusedBytes.Add(int64(m.off))
		c.encodedBytes.Add(int64(len(s)) - int64(m.off))
		dst = append(dst, base.ids[:m.ids]...)
		marks = append(make([]mark, 0, k+1+(len(s)-int(m.off))/markEvery), base.marks[:k+1]...)
		dst, marks = t.encodeMarked(dst, s[m.off:], int(m.off), int(m.ids), marks, sc)
	case t.resume != nil:
		c.misses.Add(1)
		c.encodedBytes.Add(int64(len(s)))
		dst, marks = t.encodeMarked(dst, s, 0, 0, make([]mark, 0, len(s)/markEvery), sc)
	default:
		c.misses.Add(1)
		c.encodedBytes.Add(int64(len(s)))
		dst = t.encodeText(dst, s, sc)
	}
	c.insert(&cachedSegment{text: strings.Clone(s), ids: append([]uint32(nil), dst[start:]...), marks: marks,
		whole: whole, prefixes: append([]uint64(nil), sc.strides...)})
	return dst
}

// hashes returns the hash of the whole of s and appends the chained hashes
// of its first k*prefixStride bytes, k = 1, 2, ..., when the tokenizer can
// resume (otherwise only whole segments are reused).
func (c *PrefixCache) hashes(dst []uint64, s string) (uint64, []uint64) {
	var h maphash.Hash
	h.SetSeed(c.seed)
	i := 0
	for ; c.tok.resume != nil && i+prefixStride <= len(s); i += prefixStride {
		h.WriteString(s[i : i+prefixStride])
		dst = append(dst, h.Sum64())
	}
	h.WriteString(s[i:])
	return h.Sum64() ^ uint64(len(s)), dst
}

// find returns a cached segment of the same text (same), or the one
// sharing the longest prefix with s that the index finds and the length of
// that prefix, when a mark lies within it. It returns nil when nothing is
// reusable.
func (c *PrefixCache) find(s string, whole uint64, prefixes []uint64) (e *cachedSegment, shared int, same bool) {
	c.mu.Lock()
	if e := c.whole[whole]; e != nil && e.text == s {
		c.touch(e)
		c.mu.Unlock()
		return e, len(s), true
	}
	for k := len(prefixes) - 1; k >= 0 && e == nil; k-- {
		e = c.prefixes[prefixes[k]]
	}
	if e != nil {
		c.touch(e)
	}
	c.mu.Unlock()
	if e == nil {
		return nil, 0, false
	}
	// The hashes only choose the candidate; the bytes decide.
	shared = commonPrefix(e.text, s)
	if lastMark(e.marks, shared) < 0 {
		return nil, 0, false
	}
	return e, shared, false
}

// insert adds e as the most recent segment and evicts the least recent
// ones past the budget. A segment larger than the whole budget is not kept.
func (c *PrefixCache) insert(e *cachedSegment) {
	e.size = int64(len(e.text)) + 4*int64(len(e.ids)) + 12*int64(len(e.marks)) +
		(8+mapEntryBytes)*int64(len(e.prefixes)) + segmentOverhead
	if e.size > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.whole[e.whole]; old != nil && old.text == e.text {
		return // encoded meanwhile by a concurrent request
	}
	c.whole[e.whole] = e
	for _, k := range e.prefixes {
		c.prefixes[k] = e
	}
	e.next, e.prev = c.lru.next, &c.lru
	e.next.prev, c.lru.next = e, e
	c.bytes += e.size
	c.segments++
	for c.bytes > c.maxBytes {
		c.remove(c.lru.prev)
		c.evicted.Add(1)
	}
}

// touch makes e the most recent segment. Called with mu held.
func (c *PrefixCache) touch(e *cachedSegment) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.next, e.prev = c.lru.next, &c.lru
	e.next.prev, c.lru.next = e, e
}

// remove drops e and the index entries that still point to it. Called with
// mu held.
func (c *PrefixCache) remove(e *cachedSegment) {
	e.prev.next, e.next.prev = e.next, e.prev
	if c.whole[e.whole] == e {
		delete(c.whole, e.whole)
	}
	for _, k := range e.prefixes {
		if c.prefixes[k] == e {
			delete(c.prefixes, k)
		}
	}
	c.bytes -= e.size
	c.segments--
}
