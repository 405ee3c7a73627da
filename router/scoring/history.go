package scoring

import (
	"container/list"
	"encoding/binary"
	"hash/maphash"
	"sync"
)

// HistoryType names the routing-history scorer in the configuration.
const HistoryType = "history"

// History is approximate prefix affinity from the router's own decisions,
// the way the Gateway API Inference Extension's default prefix scorer works:
// the prompt's characters are cut into blocks of block_chars, each block
// hashed chained on the one before, and after each decision the chosen pod
// is recorded as holding those hashes (an LRU of capacity_per_pod hashes per
// pod). A pod scores the share of the request's leading blocks it is
// recorded with. It never sees the engines' real caches: the benchmark's
// "approx" policy, and the baseline precise routing must beat.
//
// A request without text (token-id prompts, the virtual-time simulator) is
// hashed over its token ids, four bytes each.
//
// Parameters:
//   - block_chars (64): characters per block;
//   - max_blocks (256): leading blocks considered;
//   - capacity_per_pod (31250): hashes remembered per pod.
type History struct {
	blockChars, maxBlocks, capacity int
	seed                            maphash.Seed

	mu   sync.Mutex
	pods map[string]*podHistory
}

// podHistory is one pod's LRU of block hashes.
type podHistory struct {
	order *list.List // of uint64, most recent at the front
	at    map[uint64]*list.Element
}

var (
	_ Scorer   = (*History)(nil)
	_ Observer = (*History)(nil)
)

// NewHistory returns a routing-history scorer; non-positive parameters take
// the defaults.
func NewHistory(blockChars, maxBlocks, capacityPerPod int) *History {
	h := &History{blockChars: blockChars, maxBlocks: maxBlocks, capacity: capacityPerPod,
		seed: maphash.MakeSeed(), pods: make(map[string]*podHistory)}
	if h.blockChars <= 0 {
		h.blockChars = 64
	}
	if h.maxBlocks <= 0 {
		h.maxBlocks = 256
	}
	if h.capacity <= 0 {
		h.capacity = 31250
	}
	return h
}

// Type implements Scorer.
func (*History) Type() string { return HistoryType }

// hashes returns the request's chained block hashes.
func (h *History) hashes(r *Request) []uint64 {
	data := []byte(r.Text)
	if r.Text == "" {
		data = make([]byte, 0, 4*len(r.Tokens))
		for _, t := range r.Tokens {
			data = binary.LittleEndian.AppendUint32(data, t)
		}
	}
	n := min(len(data)/h.blockChars, h.maxBlocks)
	out := make([]uint64, n)
	var prev [8]byte
	for i := range n {
		var mh maphash.Hash
		mh.SetSeed(h.seed)
		mh.Write(prev[:])
		mh.Write(data[i*h.blockChars : (i+1)*h.blockChars])
		out[i] = mh.Sum64()
		binary.LittleEndian.PutUint64(prev[:], out[i])
	}
	return out
}

// Score implements Scorer.
func (h *History) Score(s *State, out []float64) {
	hs := h.hashes(s.Req)
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, p := range s.Pods {
		out[i] = 0
		ph := h.pods[p.Name]
		if ph == nil || len(hs) == 0 {
			continue
		}
		n := 0
		for _, x := range hs {
			if _, ok := ph.at[x]; !ok {
				break
			}
			n++
		}
		out[i] = float64(n) / float64(len(hs))
	}
}

// Picked implements Observer: the chosen pod is now assumed to hold every
// block of the request.
func (h *History) Picked(s *State, chosen int) {
	hs := h.hashes(s.Req)
	name := s.Pods[chosen].Name
	h.mu.Lock()
	defer h.mu.Unlock()
	ph := h.pods[name]
	if ph == nil {
		ph = &podHistory{order: list.New(), at: make(map[uint64]*list.Element)}
		h.pods[name] = ph
	}
	for _, x := range hs {
		if e, ok := ph.at[x]; ok {
			ph.order.MoveToFront(e)
			continue
		}
		ph.at[x] = ph.order.PushFront(x)
		if ph.order.Len() > h.capacity {
			old := ph.order.Remove(ph.order.Back()).(uint64)
			delete(ph.at, old)
		}
	}
}

// Forget implements Observer.
func (h *History) Forget(pod string) {
	h.mu.Lock()
	delete(h.pods, pod)
	h.mu.Unlock()
}
