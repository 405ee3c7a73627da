package sim

// blockPool is vLLM V1's paged KV cache for one engine: a fixed number of
// blocks, a map from block hash to the cached block holding it, reference
// counts, and a free queue in LRU order whose front is evicted first. A free
// block keeps its hash (and stays a prefix-cache hit) until it is reused.
type blockPool struct {
	blocks []block
	// head and tail of the intrusive free queue; -1 when empty.
	head, tail int32
	nfree      int
	cached     map[uint64]int32
	ev         *eventLog
	frontBuf   []int32 // release's uncached blocks, reused
}

type block struct {
	hash       uint64
	hasHash    bool
	ref        int32
	prev, next int32
	free       bool
}

func newBlockPool(n int, ev *eventLog) *blockPool {
	p := &blockPool{blocks: make([]block, n), head: -1, tail: -1, cached: make(map[uint64]int32, n), ev: ev}
	for i := range p.blocks {
		p.blocks[i] = block{prev: -1, next: -1}
		p.pushFree(int32(i))
	}
	return p
}

// capacity is the number of blocks; numFree counts blocks a new allocation
// may take, cached or not.
func (p *blockPool) capacity() int { return len(p.blocks) }
func (p *blockPool) numFree() int  { return p.nfree }

// usage is vllm:kv_cache_usage_perc: the share of blocks held by requests
// (vLLM's BlockPool.get_usage, which leaves the null block out).
func (p *blockPool) usage() float64 {
	return 1 - float64(p.nfree)/float64(len(p.blocks))
}

func (p *blockPool) pushFree(id int32) {
	b := &p.blocks[id]
	b.free, b.prev, b.next = true, p.tail, -1
	if p.tail >= 0 {
		p.blocks[p.tail].next = id
	} else {
		p.head = id
	}
	p.tail = id
	p.nfree++
}

func (p *blockPool) pushFreeFront(id int32) {
	b := &p.blocks[id]
	b.free, b.prev, b.next = true, -1, p.head
	if p.head >= 0 {
		p.blocks[p.head].prev = id
	} else {
		p.tail = id
	}
	p.head = id
	p.nfree++
}

func (p *blockPool) unlinkFree(id int32) {
	b := &p.blocks[id]
	if b.prev >= 0 {
		p.blocks[b.prev].next = b.next
	} else {
		p.head = b.next
	}
	if b.next >= 0 {
		p.blocks[b.next].prev = b.prev
	} else {
		p.tail = b.prev
	}
	b.free, b.prev, b.next = false, -1, -1
	p.nfree--
}

// hits appends to dst the cached blocks of the longest cached prefix of
// hashes.
func (p *blockPool) hits(dst []int32, hashes []uint64) []int32 {
	for _, h := range hashes {
		id, ok := p.cached[h]
		if !ok {
			break
		}
		dst = append(dst, id)
	}
	return dst
}

// touch takes a reference on cached blocks a request reuses, pulling free
// ones out of the eviction queue.
func (p *blockPool) touch(ids []int32) {
	for _, id := range ids {
		b := &p.blocks[id]
		if b.ref == 0 && b.free {
			p.unlinkFree(id)
		}
		b.ref++
	}
}

// allocate appends n blocks from the front of the free queue to dst,
// evicting (and reporting) the cached hashes they held. The caller checks
// numFree first.
func (p *blockPool) allocate(dst []int32, n int) []int32 {
	for range n {
		id := p.head
		p.unlinkFree(id)
		b := &p.blocks[id]
		if b.hasHash {
			delete(p.cached, b.hash)
			p.ev.removed(b.hash)
			b.hasHash = false
		}
		b.ref = 1
		dst = append(dst, id)
	}
	return dst
}

// release drops a request's references, last block first, so that a
// request's tail blocks are evicted before its head (vLLM frees in reverse
// for the same reason: later blocks are less likely to be shared). A freed
// block without a hash can never be a hit, so it goes to the front of the
// free queue, to be reused first, and only cached blocks queue up in LRU
// order behind the others (vLLM v0.32.0 BlockPool.free_blocks: prepend_n
// of the blocks without a hash, append_n of the rest).
func (p *blockPool) release(ids []int32) {
	front := p.frontBuf[:0]
	for i := len(ids) - 1; i >= 0; i-- {
		b := &p.blocks[ids[i]]
		b.ref--
		if b.ref != 0 {
			continue
		}
		if b.hasHash {
			p.pushFree(ids[i])
		} else {
			front = append(front, ids[i])
		}
	}
	// The first freed ends up first in the queue.
	for i := len(front) - 1; i >= 0; i-- {
		p.pushFreeFront(front[i])
	}
	p.frontBuf = front[:0]
}

// cache registers block id under hash and reports whether it did. A hash
// already held by another block (two requests prefilled the same prefix in
// the same window) leaves id uncached: the simulator keeps one copy per hash.
func (p *blockPool) cache(id int32, hash uint64) bool {
	if _, dup := p.cached[hash]; dup {
		return false
	}
	b := &p.blocks[id]
	b.hash, b.hasHash = hash, true
	p.cached[hash] = id
	return true
}

// clear drops every cached hash of free blocks (vLLM's reset_prefix_cache,
// published as AllBlocksCleared); it fails while any block is in use.
func (p *blockPool) clear() bool {
	if p.nfree != len(p.blocks) {
		return false
	}
	for i := range p.blocks {
		p.blocks[i].hasHash = false
	}
	clear(p.cached)
	p.ev.cleared()
	return true
}

// freeAmong counts the blocks of ids sitting in the free queue: reusing them
// takes them out of it, so they count against what an allocation may take.
func (p *blockPool) freeAmong(ids []int32) int {
	n := 0
	for _, id := range ids {
		if p.blocks[id].free {
			n++
		}
	}
	return n
}
