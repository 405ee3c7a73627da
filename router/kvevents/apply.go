package kvevents

import (
	"strconv"
	"time"

	"github.com/llmd-dev/terraform-provider-llmd/router/index"
)

// Applier applies decoded events to an index the way the router does; the
// Ingestor uses one per endpoint and the simulator's virtual fleet one for
// all. Its buffers are reused between events, so one goroutine owns it.
type Applier struct {
	Index  *index.Index
	stored index.Stored
	extra  extraKeys
}

// Apply applies event ev of engine e. Events of hybrid models' KV-cache
// groups other than 0 are skipped: group 0 is the full-attention group whose
// prefix hits decide reuse. The error is the index's refusal of a
// BlockStored (its token count does not fit its blocks).
func (a *Applier) Apply(e index.Engine, ev *Event) error {
	switch ev.Kind {
	case BlockStored:
		if ev.GroupIdx != 0 {
			return nil
		}
		a.stored = index.Stored{Hashes: ev.BlockHashes, Parent: ev.ParentHash, HasParent: ev.HasParent,
			Tokens: ev.TokenIDs, BlockSize: ev.BlockSize, LoRA: LoRAKey(ev), Extra: a.extra.of(ev),
			Tier: index.TierOf(ev.Medium)}
		return a.Index.Store(e, &a.stored)
	case BlockRemoved:
		if ev.GroupIdx == 0 {
			a.Index.Remove(e, ev.BlockHashes, index.TierOf(ev.Medium))
		}
	case AllBlocksCleared:
		a.Index.Purge(e)
	}
	return nil
}

// apply applies one batch of rank rs, in event order, and moves rs past seq.
func (s *stream) apply(rs *rankState, seq uint64, b *Batch) {
	e := index.Engine{Pod: s.ep.Pod, Rank: rs.rank}
	for i := range b.Events {
		s.applyEvent(e, &b.Events[i])
	}
	rs.seen, rs.next, rs.lastTS = true, seq+1, b.TS
	s.pos.set(s.ep, rs)
	s.c.messages.Add(1)
	if b.TS > 0 {
		s.c.lag(float64(time.Now().UnixNano())/1e9 - b.TS)
	}
}

func (s *stream) applyEvent(e index.Engine, ev *Event) {
	if ev.Kind != KindUnknown && ev.UnknownFields > 0 && s.c.unknownFields.Add(int64(ev.UnknownFields)) == int64(ev.UnknownFields) {
		// Once per router: a newer vLLM's field is news, not an error.
		s.logf("kvevents: %s sent %s field %q, which this router does not know; skipped (llmd_router_kv_event_events_total{kind=\"unknown_field\"})", e.Pod, ev.Kind, ev.UnknownField)
	}
	if err := s.applier.Apply(e, ev); err != nil {
		s.c.applyErrors.Add(1)
		s.logf("kvevents: %s: %v", e, err)
		return
	}
	switch {
	case ev.GroupIdx != 0 && (ev.Kind == BlockStored || ev.Kind == BlockRemoved):
		s.c.otherGroup.Add(1)
	case ev.Kind == BlockStored:
		s.c.stored.Add(1)
	case ev.Kind == BlockRemoved:
		s.c.removed.Add(1)
	case ev.Kind == AllBlocksCleared:
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
