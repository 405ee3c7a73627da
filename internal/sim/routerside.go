package sim

import (
	"fmt"

	"github.com/llmd-dev/terraform-provider-llmd/router/index"
	"github.com/llmd-dev/terraform-provider-llmd/router/kvevents"
)

// eventSink is the router's end of the virtual fleet's KV-event feeds: it
// decodes published bytes with the router's decoder and applies them to the
// router's index, so the index learns exactly what the wire carried.
type eventSink struct {
	ix     *index.Index
	batch  kvevents.Batch
	stored index.Stored
}

func (s *eventSink) deliver(pod string, payload []byte) error {
	if err := kvevents.DecodeBatch(payload, &s.batch); err != nil {
		return fmt.Errorf("decoding KV events of %s: %w", pod, err)
	}
	e := index.Engine{Pod: pod}
	for i := range s.batch.Events {
		ev := &s.batch.Events[i]
		switch ev.Kind {
		case kvevents.BlockStored:
			s.stored = index.Stored{Hashes: ev.BlockHashes, Parent: ev.ParentHash, HasParent: ev.HasParent,
				Tokens: ev.TokenIDs, BlockSize: ev.BlockSize, LoRA: kvevents.LoRAKey(ev), Extra: ev.ExtraKeys,
				Tier: index.TierOf(ev.Medium)}
			if err := s.ix.Store(e, &s.stored); err != nil {
				return fmt.Errorf("applying KV events of %s: %w", pod, err)
			}
		case kvevents.BlockRemoved:
			s.ix.Remove(e, ev.BlockHashes, index.TierOf(ev.Medium))
		case kvevents.AllBlocksCleared:
			s.ix.Purge(e)
		}
	}
	return nil
}
