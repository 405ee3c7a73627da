package index

import (
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// MaxEngines is how many engines one Index tracks. A key's holders are a
// set per tier that stays one word while its engines' slots lie in one
// group of 56 (see holders); 4,096 engines need 74 of the 128 groups that
// word can name, and bound the slot bitmap and table an Index keeps.
const MaxEngines = 4096

// Tier is where an engine holds a block.
type Tier uint8

const (
	// TierGPU is vLLM's GPU KV cache, the only tier a request reuses directly.
	TierGPU Tier = iota
	// TierCPU is the CPU offload cache.
	TierCPU
	// TierStorage is any other offload medium (disk, remote store).
	TierStorage
)

// TierOf maps a KV-event medium to its tier; vLLM means GPU when it sends none.
func TierOf(medium string) Tier {
	switch medium {
	case "", "GPU":
		return TierGPU
	case "CPU":
		return TierCPU
	}
	return TierStorage
}

// Engine identifies one vLLM engine core: a pod, and the data-parallel rank
// inside it (0 without data parallelism). Each rank has its own KV cache,
// hash map and event sequence.
type Engine struct {
	Pod  string
	Rank int
}

// String renders the engine as pod or pod#dpN.
func (e Engine) String() string {
	if e.Rank == 0 {
		return e.Pod
	}
	return fmt.Sprintf("%s#dp%d", e.Pod, e.Rank)
}

// Config sets an Index's bounds.
type Config struct {
	// BlockSize is the fleet's block size in tokens; 0 learns it from the
	// first BlockStored. Events of another size count as mismatches.
	BlockSize int
	// MaxKeys bounds the number of keys; beyond it blocks are evicted. 0 means
	// no bound (vLLM's own evictions, reported as BlockRemoved, still apply).
	MaxKeys int
	// MaxOrphansPerEngine bounds orphans kept per engine (default 1<<16).
	MaxOrphansPerEngine int
	// SpeculationTTL is how long a speculative entry lives after its Hold
	// settles (the request's first byte) unless an event confirms it
	// (default 2s).
	SpeculationTTL time.Duration
	// Now is the clock, replaced in tests (default time.Now).
	Now func() time.Time
}

// Index maps block keys to the engines holding them. Writers (one goroutine
// per engine's event stream, plus speculation) lock one shard per block;
// readers take a shard's read lock per key and never a global lock.
type Index struct {
	cfg       Config
	blockSize atomic.Int64
	shards    [numShards]shard

	mu      sync.Mutex // guards engines and slot assignment
	engines map[Engine]*engine
	// slots maps a slot number to its engine for readers, replaced whole on
	// every change so Lookup reads it without the lock.
	slots atomic.Pointer[[]Engine]
	used  [MaxEngines / 64]uint64

	spec    specQueue
	evictMu sync.Mutex
	c       counters
}

// New returns an empty Index.
func New(cfg Config) *Index {
	if cfg.MaxOrphansPerEngine <= 0 {
		cfg.MaxOrphansPerEngine = 1 << 16
	}
	if cfg.SpeculationTTL <= 0 {
		cfg.SpeculationTTL = 2 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	ix := &Index{cfg: cfg, engines: make(map[Engine]*engine)}
	ix.blockSize.Store(int64(cfg.BlockSize))
	ix.slots.Store(new([]Engine))
	for i := range ix.shards {
		ix.shards[i].init()
	}
	return ix
}

// BlockSize is the fleet's block size: configured, or learned from the first
// BlockStored; 0 until known.
func (ix *Index) BlockSize() int { return int(ix.blockSize.Load()) }

// engineFor returns e's state, assigning a slot on first use.
func (ix *Index) engineFor(e Engine) (*engine, error) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if es := ix.engines[e]; es != nil {
		return es, nil
	}
	slot := -1
	for w, u := range ix.used {
		if u != ^uint64(0) {
			slot = w*64 + bits.TrailingZeros64(^u)
			break
		}
	}
	if slot < 0 {
		return nil, fmt.Errorf("indexing engine %s: all %d engine slots in use", e, MaxEngines)
	}
	ix.used[slot/64] |= 1 << (slot % 64)
	es := newEngine(e, slot)
	ix.engines[e] = es
	ix.publishSlot(slot, e)
	return es, nil
}

// existing returns e's state or nil, without assigning a slot.
func (ix *Index) existing(e Engine) *engine {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	return ix.engines[e]
}

// publishSlot swaps in a new slot table, as long as the highest slot in
// use; callers hold ix.mu.
func (ix *Index) publishSlot(slot int, e Engine) {
	old := *ix.slots.Load()
	t := make([]Engine, max(len(old), slot+1))
	copy(t, old)
	t[slot] = e
	for len(t) > 0 && t[len(t)-1].Pod == "" {
		t = t[:len(t)-1]
	}
	ix.slots.Store(&t)
}

// Engines lists the engines the index currently tracks.
func (ix *Index) Engines() []Engine {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	out := make([]Engine, 0, len(ix.engines))
	for e := range ix.engines {
		out = append(out, e)
	}
	return out
}
