package sim

import "github.com/llmd-dev/terraform-provider-llmd/router/kvevents"

// eventLog collects the KV events of one engine step in the order the
// engine produced them, as vLLM's KVEventBatch does, reusing its storage
// from step to step.
type eventLog struct {
	events []kvevents.Event
	n      int
	out    kvevents.Batch
}

// stored records full blocks [from, to) newly cached for request r: their
// hashes, the hash of the block before them (none for a chain's first
// block), their tokens, and under an adapter or a cache_salt the adapter's
// name and each block's extra keys, as vLLM's BlockStored carries them.
func (l *eventLog) stored(r *Request, from, to, blockSize int) {
	e := l.next(kvevents.BlockStored)
	e.BlockHashes = append(e.BlockHashes, r.hashes[from:to]...)
	if from > 0 {
		e.ParentHash, e.HasParent = r.hashes[from-1], true
	}
	e.TokenIDs = append(e.TokenIDs, r.tokens[from*blockSize:to*blockSize]...)
	e.BlockSize = blockSize
	e.Medium = "GPU"
	e.LoRAName = r.LoRA
	if r.LoRA != "" || r.CacheSalt != "" {
		for i := from; i < to; i++ {
			e.ExtraKeys = append(e.ExtraKeys, kvevents.VLLMExtraKeys(r.LoRA, r.CacheSalt, i))
		}
	}
}

// removed records one evicted block; consecutive evictions share one event.
func (l *eventLog) removed(hash uint64) {
	if l.n > 0 && l.events[l.n-1].Kind == kvevents.BlockRemoved {
		e := &l.events[l.n-1]
		e.BlockHashes = append(e.BlockHashes, hash)
		return
	}
	e := l.next(kvevents.BlockRemoved)
	e.BlockHashes = append(e.BlockHashes, hash)
	e.Medium = "GPU"
}

func (l *eventLog) cleared() { l.next(kvevents.AllBlocksCleared) }

// next appends an event of kind k, reusing an old event's slices.
func (l *eventLog) next(k kvevents.Kind) *kvevents.Event {
	if l.n == len(l.events) {
		l.events = append(l.events, kvevents.Event{})
	}
	e := &l.events[l.n]
	l.n++
	*e = kvevents.Event{Kind: k, BlockHashes: e.BlockHashes[:0], TokenIDs: e.TokenIDs[:0]}
	return e
}

// take returns the step's batch stamped with ts, or nil when the step
// produced no event; it stays valid until the next step starts.
func (l *eventLog) take(ts float64) *kvevents.Batch {
	if l.n == 0 {
		return nil
	}
	l.out = kvevents.Batch{TS: ts, Events: l.events[:l.n]}
	l.n = 0
	return &l.out
}
