package kvevents

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// field identifies an event field independently of its wire position or name,
// so the array and map encodings share one decoder per field.
type field uint8

const (
	// fIgnore is a field this decoder knows and does not need.
	fIgnore field = iota
	// fUnknown is a field this decoder does not know: skipped and counted.
	fUnknown
	fHashes
	fParent
	fTokens
	fBlockSize
	fLoRAID
	fMedium
	fLoRAName
	fExtraKeys
	fGroupIdx
	fSpecKind
	fSlidingWindow
)

var fieldNames = [...]string{"", "", "block_hashes", "parent_block_hash", "token_ids", "block_size", "lora_id",
	"medium", "lora_name", "extra_keys", "group_idx", "kv_cache_spec_kind", "kv_cache_spec_sliding_window"}

// ignoredFieldNames are map-form fields vLLM sends that routing does not use:
// a block's locality (LOCAL/REMOTE, v0.26), its offload tier's owner
// (~v0.30) and the session that stored it (session_id, v0.32;
// vllm/distributed/kv_events.py BlockStored). Any other name is unknown.
var ignoredFieldNames = []string{"locality", "ownership", "session_id"}

// Positions after the tag in the array encoding; later positions a newer vLLM
// may append are skipped and counted as unknown.
var (
	storedFields  = []field{fHashes, fParent, fTokens, fBlockSize, fLoRAID, fMedium, fLoRAName, fExtraKeys, fGroupIdx, fSpecKind, fSlidingWindow}
	removedFields = []field{fHashes, fMedium, fGroupIdx}
)

func fieldByName(name []byte) field {
	for f := fHashes; int(f) < len(fieldNames); f++ {
		if string(name) == fieldNames[f] {
			return f
		}
	}
	for _, n := range ignoredFieldNames {
		if string(name) == n {
			return fIgnore
		}
	}
	return fUnknown
}

func kindByTag(tag []byte) Kind {
	switch string(tag) {
	case "BlockStored":
		return BlockStored
	case "BlockRemoved":
		return BlockRemoved
	case "AllBlocksCleared":
		return AllBlocksCleared
	}
	return KindUnknown
}

// Medium strings are interned so decoding the common tiers does not allocate.
func internMedium(b []byte) string {
	switch string(b) {
	case "GPU":
		return "GPU"
	case "CPU":
		return "CPU"
	}
	return string(b)
}

// DecodeBatch decodes one message payload in either wire form into b,
// reusing b's buffers. Malformed input yields an error naming the event,
// field and byte offset; b is then partially filled and must not be applied.
func DecodeBatch(payload []byte, b *Batch) error {
	r := reader{b: payload}
	var err error
	if r.isMapNext() {
		err = decodeBatchMap(&r, b)
	} else {
		err = decodeBatchArray(&r, b)
	}
	if err != nil {
		return fmt.Errorf("decoding event batch: %w", err)
	}
	if r.off != len(payload) {
		return fmt.Errorf("decoding event batch: %d trailing bytes after offset %d", len(payload)-r.off, r.off)
	}
	return nil
}

func decodeBatchArray(r *reader, b *Batch) error {
	n, err := r.arrayLen()
	if err != nil {
		return err
	}
	if n < 2 {
		return fmt.Errorf("batch array has %d elements, want at least 2", n)
	}
	if b.TS, err = r.float(); err != nil {
		return fmt.Errorf("ts: %w", err)
	}
	if err := decodeEvents(r, b); err != nil {
		return err
	}
	b.DPRank, b.HasDPRank = 0, false
	if n >= 3 {
		if err := decodeRank(r, b); err != nil {
			return err
		}
	}
	for i := 3; i < n; i++ {
		if err := r.skip(0); err != nil {
			return fmt.Errorf("batch element %d: %w", i, err)
		}
	}
	return nil
}

func decodeBatchMap(r *reader, b *Batch) error {
	n, err := r.mapLen()
	if err != nil {
		return err
	}
	b.TS, b.DPRank, b.HasDPRank = 0, 0, false
	b.Events = b.Events[:0]
	seenEvents := false
	for i := 0; i < n; i++ {
		key, err := r.str()
		if err != nil {
			return fmt.Errorf("batch key %d: %w", i, err)
		}
		switch string(key) {
		case "ts":
			if b.TS, err = r.float(); err != nil {
				return fmt.Errorf("ts: %w", err)
			}
		case "events":
			if err := decodeEvents(r, b); err != nil {
				return err
			}
			seenEvents = true
		case "data_parallel_rank":
			if err := decodeRank(r, b); err != nil {
				return err
			}
		default:
			if err := r.skip(0); err != nil {
				return fmt.Errorf("batch field %q: %w", key, err)
			}
		}
	}
	if !seenEvents {
		return errors.New("batch map has no events")
	}
	return nil
}

func decodeRank(r *reader, b *Batch) error {
	if r.nextIsNil() {
		return nil
	}
	v, err := r.smallInt()
	if err != nil {
		return fmt.Errorf("data_parallel_rank: %w", err)
	}
	if v < 0 {
		return fmt.Errorf("data_parallel_rank %d is negative", v)
	}
	b.DPRank, b.HasDPRank = v, true
	return nil
}

func decodeEvents(r *reader, b *Batch) error {
	n, err := r.arrayLen()
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	// Grow as events actually decode: a length claim alone must not make a
	// few input bytes allocate a large Event slice.
	b.Events = b.Events[:0]
	for i := 0; i < n; i++ {
		if len(b.Events) < cap(b.Events) {
			b.Events = b.Events[:i+1]
		} else {
			b.Events = append(b.Events, Event{})
		}
		e := &b.Events[i]
		e.reset()
		if err := decodeEvent(r, e); err != nil {
			return fmt.Errorf("decoding event %d (%s): %w", i, e.Kind, err)
		}
	}
	return nil
}

func decodeEvent(r *reader, e *Event) error {
	if r.isMapNext() {
		if err := decodeEventMap(r, e); err != nil {
			return err
		}
	} else if err := decodeEventArray(r, e); err != nil {
		return err
	}
	return validate(e)
}

func decodeEventArray(r *reader, e *Event) error {
	n, err := r.arrayLen()
	if err != nil {
		return err
	}
	if n == 0 {
		return errors.New("empty event array has no tag")
	}
	tag, err := r.str()
	if err != nil {
		return fmt.Errorf("tag: %w", err)
	}
	e.Kind = kindByTag(tag)
	var fields []field
	switch e.Kind {
	case BlockStored:
		fields = storedFields
	case BlockRemoved:
		fields = removedFields
	}
	for i := 1; i < n; i++ {
		f := fUnknown
		if i-1 < len(fields) {
			f = fields[i-1]
		} else if e.Kind == AllBlocksCleared || e.Kind == KindUnknown {
			// Fields of a kind without a known layout are not news.
			f = fIgnore
		} else {
			e.noteUnknown(fmt.Sprintf("element %d", i))
		}
		if err := decodeField(r, e, f); err != nil {
			return fmt.Errorf("%s: %w", fieldLabel(f, i), err)
		}
	}
	return nil
}

func decodeEventMap(r *reader, e *Event) error {
	n, err := r.mapLen()
	if err != nil {
		return err
	}
	tagged := false
	for i := 0; i < n; i++ {
		key, err := r.str()
		if err != nil {
			return fmt.Errorf("key %d: %w", i, err)
		}
		if string(key) == "type" {
			tag, err := r.str()
			if err != nil {
				return fmt.Errorf("type: %w", err)
			}
			e.Kind, tagged = kindByTag(tag), true
			continue
		}
		f := fieldByName(key)
		if f == fUnknown {
			e.noteUnknown(string(key))
		}
		if err := decodeField(r, e, f); err != nil {
			return fmt.Errorf("%s: %w", fieldLabel(f, i), err)
		}
	}
	if !tagged {
		return errors.New(`event map has no "type"`)
	}
	return nil
}

func fieldLabel(f field, pos int) string {
	if f == fIgnore || f == fUnknown {
		return fmt.Sprintf("element %d", pos)
	}
	return fieldNames[f]
}

// decodeField reads one field's value. Optional fields accept nil.
func decodeField(r *reader, e *Event, f field) error {
	if f == fIgnore || f == fUnknown {
		return r.skip(0)
	}
	if f != fHashes && f != fTokens && r.nextIsNil() {
		return nil
	}
	var err error
	switch f {
	case fHashes:
		return decodeHashes(r, e)
	case fParent:
		e.ParentHash, err = r.hash()
		e.HasParent = err == nil
	case fTokens:
		return decodeTokens(r, e)
	case fBlockSize:
		e.BlockSize, err = r.smallInt()
	case fLoRAID:
		e.LoRAID, err = r.int64()
		e.HasLoRAID = err == nil
	case fMedium:
		var s []byte
		if s, err = r.str(); err == nil {
			e.Medium = internMedium(s)
		}
	case fLoRAName:
		var s []byte
		if s, err = r.str(); err == nil {
			e.LoRAName = string(s)
		}
	case fExtraKeys:
		return decodeExtraKeys(r, e)
	case fGroupIdx:
		e.GroupIdx, err = r.smallInt()
	case fSpecKind:
		var s []byte
		if s, err = r.str(); err == nil {
			e.SpecKind = string(s)
		}
	case fSlidingWindow:
		e.SlidingWindow, err = r.smallInt()
		e.HasSlidingWindow = err == nil
	}
	return err
}

func decodeHashes(r *reader, e *Event) error {
	n, err := r.arrayLen()
	if err != nil {
		return err
	}
	for i := 0; i < n; i++ {
		h, err := r.hash()
		if err != nil {
			return fmt.Errorf("[%d]: %w", i, err)
		}
		e.BlockHashes = append(e.BlockHashes, h)
	}
	return nil
}

// tokenForm says how to read a token id that starts with a given type
// byte: total size, and the shift and mask that extract it from the 8 bytes
// starting there. A table instead of a switch, because token ids of a real
// vocabulary flip between the 1-, 3- and 5-byte forms at random and the
// mispredicted branches cost more than the rest of the decode.
type tokenForm struct {
	size  uint8
	shift uint8
	mask  uint32
}

var tokenForms = func() (t [256]tokenForm) {
	for c := 0; c <= 0x7f; c++ {
		t[c] = tokenForm{1, 56, 0x7f}
	}
	t[0xcc] = tokenForm{2, 48, 0xff}
	t[0xcd] = tokenForm{3, 40, 0xffff}
	t[0xce] = tokenForm{5, 24, 0xffffffff}
	return t
}()

// decodeTokens is the ingest hot path (64 tokens per block). Other forms,
// and the last bytes of the payload, go through the checked token reader.
func decodeTokens(r *reader, e *Event) error {
	if r.nextIsNil() {
		return nil
	}
	n, err := r.arrayLen()
	if err != nil {
		return err
	}
	if cap(e.TokenIDs) < n {
		e.TokenIDs = make([]uint32, n)
	}
	toks := e.TokenIDs[:n]
	b, off := r.b, r.off
	for i := range toks {
		if off+8 <= len(b) {
			c := b[off]
			if f := tokenForms[c]; f.size != 0 {
				toks[i] = uint32(binary.BigEndian.Uint64(b[off:])>>f.shift) & f.mask
				// The size again, computed from c instead of loaded from the
				// table, keeps a memory load off the chain from one token's
				// offset to the next: 1 for fixints, 2, 3, 5 for 0xcc-0xce.
				off += 1 + int(c>>7)<<(c&3)
				continue
			}
		}
		r.off = off
		t, err := r.token()
		if err != nil {
			return fmt.Errorf("[%d]: %w", i, err)
		}
		toks[i], off = t, r.off
	}
	r.off = off
	e.TokenIDs = toks
	return nil
}

func decodeExtraKeys(r *reader, e *Event) error {
	n, err := r.arrayLen()
	if err != nil {
		return err
	}
	start := len(e.extraBuf)
	for i := 0; i < n; i++ {
		var raw []byte
		if !r.nextIsNil() {
			if raw, err = r.raw(); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
		e.extraBuf = append(e.extraBuf, raw)
	}
	e.ExtraKeys = e.extraBuf[start : start+n : start+n]
	return nil
}

// validate checks the relations between fields that the index relies on.
func validate(e *Event) error {
	if e.Kind != BlockStored {
		return nil
	}
	if e.BlockSize < 0 {
		return fmt.Errorf("block_size %d is negative", e.BlockSize)
	}
	if len(e.TokenIDs) > 0 && len(e.TokenIDs) != len(e.BlockHashes)*e.BlockSize {
		return fmt.Errorf("%d token_ids for %d blocks of %d", len(e.TokenIDs), len(e.BlockHashes), e.BlockSize)
	}
	if e.ExtraKeys != nil && len(e.ExtraKeys) != len(e.BlockHashes) {
		return fmt.Errorf("%d extra_keys for %d blocks", len(e.ExtraKeys), len(e.BlockHashes))
	}
	return nil
}
