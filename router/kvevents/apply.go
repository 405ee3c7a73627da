package kvevents

import (
	"strconv"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/index"
)

// apply applies one batch of rank rs, in event order, and moves rs past seq.
func (s *stream) apply(rs *rankState, seq uint64, b *Batch) {
	e := index.Engine{Pod: s.ep.Pod, Rank: rs.rank}
	for i := range b.Events {
		s.applyEvent(e, &b.Events[i])
	}
	rs.seen, rs.next, rs.lastTS = true, seq+1, b.TS
	s.c.messages.Add(1)
	if b.TS > 0 {
		s.c.lag(float64(time.Now().UnixNano())/1e9 - b.TS)
	}
}

func (s *stream) applyEvent(e index.Engine, ev *Event) {
	switch ev.Kind {
	case BlockStored:
		// Hybrid models report each KV-cache group; group 0 is the full
		// attention group whose prefix hits decide reuse.
		if ev.GroupIdx != 0 {
			s.c.otherGroup.Add(1)
			return
		}
		s.stored = index.Stored{Hashes: ev.BlockHashes, Parent: ev.ParentHash, HasParent: ev.HasParent,
			Tokens: ev.TokenIDs, BlockSize: ev.BlockSize, LoRA: LoRAKey(ev), Extra: ev.ExtraKeys,
			Tier: index.TierOf(ev.Medium)}
		if err := s.ix.Store(e, &s.stored); err != nil {
			s.c.applyErrors.Add(1)
			s.logf("kvevents: %s: %v", e, err)
			return
		}
		s.c.stored.Add(1)
	case BlockRemoved:
		if ev.GroupIdx != 0 {
			s.c.otherGroup.Add(1)
			return
		}
		s.ix.Remove(e, ev.BlockHashes, index.TierOf(ev.Medium))
		s.c.removed.Add(1)
	case AllBlocksCleared:
		s.ix.Purge(e)
		s.c.cleared.Add(1)
	default:
		s.c.unknown.Add(1)
	}
}

// LoRAKey is the adapter identity mixed into an event's block keys: the
// adapter name, or for older vLLM that sends only an integer id, "lora-id:N"
// (a request must then name its adapter the same way to match).
func LoRAKey(ev *Event) string {
	if ev.LoRAName != "" {
		return ev.LoRAName
	}
	if ev.HasLoRAID {
		return "lora-id:" + strconv.FormatInt(ev.LoRAID, 10)
	}
	return ""
}
