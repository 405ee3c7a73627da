package sim

import "testing"

// TestFreedBlocksWithoutHashAreReusedFirst checks the free queue's order
// after a release: a block that holds no hash (a partial tail) goes to the
// front and is handed out before any cached block is evicted, as vLLM's
// BlockPool.free_blocks prepends such blocks.
func TestFreedBlocksWithoutHashAreReusedFirst(t *testing.T) {
	p := newBlockPool(3, &eventLog{})
	a := p.allocate(nil, 1)
	if !p.cache(a[0], 42) {
		t.Fatal("block not cached")
	}
	p.release(a)
	b := p.allocate(nil, 2) // the two blocks never used
	p.release(b)
	got := p.allocate(nil, 1)
	if _, ok := p.cached[42]; !ok || got[0] == a[0] {
		t.Fatalf("allocation took block %d and evicted the cached block %d; want an uncached one first", got[0], a[0])
	}
	// The uncached blocks come back first-freed first: b's tail, then its head.
	if got[0] != b[1] {
		t.Errorf("allocation took block %d, want b's tail %d", got[0], b[1])
	}
}
