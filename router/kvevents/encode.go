package kvevents

import (
	"errors"
	"fmt"
)

// EncodeBatch encodes b the way vLLM publishes it in the given form, so the
// simulator can speak both wire forms. Hashes are written as unsigned ints
// (vLLM's default since v0.11). Fields at their default are omitted as
// vLLM's msgspec encoder omits them: trailing ones in the array form, any in
// the map form except the always-present BlockStored core.
func EncodeBatch(form Form, b *Batch) ([]byte, error) {
	return AppendBatch(nil, form, b)
}

// AppendBatch is EncodeBatch appending to dst, for callers that reuse buffers.
func AppendBatch(dst []byte, form Form, b *Batch) ([]byte, error) {
	w := writer{b: dst}
	if form == FormArray {
		n := 2
		if b.HasDPRank {
			n = 3
		}
		w.array(n)
		w.float(b.TS)
	} else {
		n := 2
		if b.HasDPRank {
			n = 3
		}
		w.mapHeader(n)
		w.str("ts")
		w.float(b.TS)
		w.str("events")
	}
	w.array(len(b.Events))
	for i := range b.Events {
		if err := encodeEvent(&w, form, &b.Events[i]); err != nil {
			return dst, fmt.Errorf("encoding event %d (%s): %w", i, b.Events[i].Kind, err)
		}
	}
	if b.HasDPRank {
		if form == FormMap {
			w.str("data_parallel_rank")
		}
		w.int(int64(b.DPRank))
	}
	return w.b, nil
}

// isDefault reports whether an event field holds its default and may be omitted.
func isDefault(e *Event, f field) bool {
	switch f {
	case fLoRAID:
		return !e.HasLoRAID
	case fMedium:
		return e.Medium == ""
	case fLoRAName:
		return e.LoRAName == ""
	case fExtraKeys:
		return e.ExtraKeys == nil
	case fGroupIdx:
		return e.GroupIdx == 0
	case fSpecKind:
		return e.SpecKind == ""
	case fSlidingWindow:
		return !e.HasSlidingWindow
	}
	return false // block_hashes, parent, token_ids, block_size are always sent
}

func encodeEvent(w *writer, form Form, e *Event) error {
	var fields []field
	switch e.Kind {
	case BlockStored:
		fields = storedFields
		if e.ExtraKeys != nil && len(e.ExtraKeys) != len(e.BlockHashes) {
			return fmt.Errorf("%d extra keys for %d blocks", len(e.ExtraKeys), len(e.BlockHashes))
		}
	case BlockRemoved:
		fields = removedFields
	case AllBlocksCleared:
	default:
		return errors.New("cannot encode an unknown event kind")
	}
	if form == FormArray {
		last := len(fields)
		for last > 0 && isDefault(e, fields[last-1]) {
			last--
		}
		w.array(1 + last)
		w.str(e.Kind.String())
		for _, f := range fields[:last] {
			if err := encodeField(w, e, f); err != nil {
				return err
			}
		}
		return nil
	}
	n := 1
	for _, f := range fields {
		if !isDefault(e, f) {
			n++
		}
	}
	w.mapHeader(n)
	w.str("type")
	w.str(e.Kind.String())
	for _, f := range fields {
		if isDefault(e, f) {
			continue
		}
		w.str(fieldNames[f])
		if err := encodeField(w, e, f); err != nil {
			return err
		}
	}
	return nil
}

func encodeField(w *writer, e *Event, f field) error {
	switch f {
	case fHashes:
		w.array(len(e.BlockHashes))
		for _, h := range e.BlockHashes {
			w.uint(h)
		}
	case fParent:
		if e.HasParent {
			w.uint(e.ParentHash)
		} else {
			w.nil()
		}
	case fTokens:
		w.array(len(e.TokenIDs))
		for _, t := range e.TokenIDs {
			w.uint(uint64(t))
		}
	case fBlockSize:
		w.int(int64(e.BlockSize))
	case fLoRAID:
		optional(w, e.HasLoRAID, func() { w.int(e.LoRAID) })
	case fMedium:
		optional(w, e.Medium != "", func() { w.str(e.Medium) })
	case fLoRAName:
		optional(w, e.LoRAName != "", func() { w.str(e.LoRAName) })
	case fExtraKeys:
		if e.ExtraKeys == nil {
			w.nil()
			return nil
		}
		w.array(len(e.ExtraKeys))
		for i, raw := range e.ExtraKeys {
			if raw == nil {
				w.nil()
				continue
			}
			// Raw keys are spliced in verbatim, so check they are exactly one value.
			r := reader{b: raw}
			if _, err := r.raw(); err != nil || r.off != len(raw) {
				return fmt.Errorf("extra_keys[%d] is not one msgpack value", i)
			}
			w.b = append(w.b, raw...)
		}
	case fGroupIdx:
		w.int(int64(e.GroupIdx))
	case fSpecKind:
		optional(w, e.SpecKind != "", func() { w.str(e.SpecKind) })
	case fSlidingWindow:
		optional(w, e.HasSlidingWindow, func() { w.int(int64(e.SlidingWindow)) })
	}
	return nil
}

// optional writes nil for an absent value that sits before a present one in
// the array form.
func optional(w *writer, present bool, write func()) {
	if present {
		write()
	} else {
		w.nil()
	}
}
