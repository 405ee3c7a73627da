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
	applier kvevents.Applier
	batch   kvevents.Batch
}

func (s *eventSink) deliver(pod string, payload []byte) error {
	if err := kvevents.DecodeBatch(payload, &s.batch); err != nil {
		return fmt.Errorf("decoding KV events of %s: %w", pod, err)
	}
	for i := range s.batch.Events {
		if err := s.applier.Apply(index.Engine{Pod: pod}, &s.batch.Events[i]); err != nil {
			return fmt.Errorf("applying KV events of %s: %w", pod, err)
		}
	}
	return nil
}
