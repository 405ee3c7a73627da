package kvevents

import "bytes"

// vLLM mixes into each block's hash a tuple of extra keys: the LoRA adapter
// (its name; older versions its integer id) on every block, the hashes of
// multimodal items on the blocks they cover, the request's cache_salt on the
// first block, and a prompt-embeds hash. The router keys the adapter through
// the chain's root (index.RootKey), so the index is given each tuple without
// its adapter element and with its strings re-encoded in the one compact
// form: a request can then rebuild the same bytes from its cache_salt alone
// (SaltExtraKeys), whichever encoder the engine used.

// SaltExtraKeys returns the extra keys of a text-only request's blocks as
// the index keys them: the cache_salt on the first block, nothing after it;
// nil without a salt. It is the request-side counterpart of the extra keys
// the index learns from BlockStored events.
func SaltExtraKeys(salt string) [][]byte {
	if salt == "" {
		return nil
	}
	var w writer
	w.array(1)
	w.str(salt)
	return [][]byte{w.b}
}

// VLLMExtraKeys returns the extra-keys tuple vLLM (0.11 on) attaches to
// block i of a text-only request under adapter lora with cache_salt salt,
// msgpack-encoded as its events carry it: (lora, salt) on the first block,
// (lora) after it, nil when there is neither. The simulator publishes it.
func VLLMExtraKeys(lora, salt string, i int) []byte {
	n := 0
	if lora != "" {
		n++
	}
	if salt != "" && i == 0 {
		n++
	}
	if n == 0 {
		return nil
	}
	var w writer
	w.array(n)
	if lora != "" {
		w.str(lora)
	}
	if salt != "" && i == 0 {
		w.str(salt)
	}
	return w.b
}

// extraKeys converts events' extra keys for the index, reusing its buffers.
type extraKeys struct {
	out [][]byte
	buf []byte
}

// of returns ev's extra keys as the index keys them, valid until the next
// call; nil when no block has any left once the adapter is dropped.
func (x *extraKeys) of(ev *Event) [][]byte {
	if ev.ExtraKeys == nil {
		return nil
	}
	x.out, x.buf = x.out[:0], x.buf[:0]
	some := false
	for _, raw := range ev.ExtraKeys {
		start := len(x.buf)
		x.buf = appendOwnTuple(x.buf, raw, ev)
		some = some || len(x.buf) > start
		x.out = append(x.out, x.buf[start:len(x.buf):len(x.buf)])
	}
	if !some {
		return nil
	}
	for i, k := range x.out {
		if len(k) == 0 {
			x.out[i] = nil
		}
	}
	return x.out
}

// appendOwnTuple appends the index's form of one block's extra-keys tuple:
// the adapter element dropped (it leads the tuple when the event names an
// adapter), strings re-encoded compactly, other elements kept as sent; an
// empty remainder appends nothing. A value that is not a tuple is kept as
// sent: it cannot be rebuilt by a request, but it still separates blocks.
func appendOwnTuple(dst, raw []byte, ev *Event) []byte {
	if raw == nil {
		return dst
	}
	r := reader{b: raw}
	n, err := r.arrayLen()
	if err != nil {
		return append(dst, raw...)
	}
	var elems writer
	kept := 0
	for i := 0; i < n; i++ {
		elem, err := r.raw()
		if err != nil {
			return append(dst, raw...)
		}
		if i == 0 && isAdapter(elem, ev) {
			continue
		}
		if s, err := (&reader{b: elem}).str(); err == nil {
			elems.str(string(s))
		} else {
			elems.b = append(elems.b, elem...)
		}
		kept++
	}
	if kept == 0 {
		return dst
	}
	w := writer{b: dst}
	w.array(kept)
	return append(w.b, elems.b...)
}

// isAdapter reports whether a tuple's leading element names ev's adapter.
func isAdapter(elem []byte, ev *Event) bool {
	r := reader{b: elem}
	if s, err := r.str(); err == nil {
		return ev.LoRAName != "" && bytes.Equal(s, []byte(ev.LoRAName))
	}
	r.off = 0
	if id, err := r.int64(); err == nil {
		return ev.HasLoRAID && id == ev.LoRAID
	}
	return false
}
