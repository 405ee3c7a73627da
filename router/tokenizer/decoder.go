package tokenizer

import (
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Decode turns ids back into text as the ByteLevel decoder does: tokens are
// joined as bytes, and bytes that do not form valid UTF-8 (a multi-byte
// character cut between tokens) become U+FFFD. skipSpecial drops special
// tokens. An id outside the vocabulary is an error.
func (t *Tokenizer) Decode(ids []uint32, skipSpecial bool) (string, error) {
	var raw []byte
	for i, id := range ids {
		if int(id) >= len(t.bytes) || t.bytes[id] == nil {
			return "", fmt.Errorf("decoding: id %d at position %d is not in the vocabulary", id, i)
		}
		if skipSpecial && t.special[id] {
			continue
		}
		raw = append(raw, t.bytes[id]...)
	}
	return string(appendLossy(make([]byte, 0, len(raw)), raw)), nil
}

// checkDecoder accepts the decoders of the byte-level family: ByteLevel,
// alone or in a Sequence. Decode implements that one behaviour.
func checkDecoder(raw json.RawMessage) error {
	if isNull(raw) {
		return unsupported("decoder", "null")
	}
	var spec componentSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return fmt.Errorf("decoding decoder: %w", err)
	}
	switch spec.Type {
	case "ByteLevel":
		return nil
	case "Sequence":
		for i, item := range spec.Decoders {
			if err := checkDecoder(item); err != nil {
				return fmt.Errorf("decoder Sequence[%d]: %w", i, err)
			}
		}
		return nil
	}
	return unsupported("decoder", spec.Type)
}

// appendLossy appends raw as valid UTF-8, replacing each maximal ill-formed
// subsequence with one U+FFFD, as Rust's String::from_utf8_lossy and the
// WHATWG decoder do (Go's own conversions replace byte by byte).
func appendLossy(dst []byte, raw []byte) []byte {
	for len(raw) > 0 {
		r, n := utf8.DecodeRune(raw)
		if r != utf8.RuneError || n > 1 {
			dst = append(dst, raw[:n]...)
			raw = raw[n:]
			continue
		}
		dst = utf8.AppendRune(dst, utf8.RuneError)
		raw = raw[maximalPrefix(raw):]
	}
	return dst
}

// maximalPrefix is the length of the longest prefix of raw that could start a
// valid UTF-8 sequence (at least 1): the unit one replacement character stands for.
func maximalPrefix(raw []byte) int {
	b := raw[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case b >= 0xC2 && b <= 0xDF:
		need = 1
	case b == 0xE0:
		need, lo = 2, 0xA0
	case b >= 0xE1 && b <= 0xEC, b == 0xEE, b == 0xEF:
		need = 2
	case b == 0xED:
		need, hi = 2, 0x9F
	case b == 0xF0:
		need, lo = 3, 0x90
	case b >= 0xF1 && b <= 0xF3:
		need = 3
	case b == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for ; n <= need && n < len(raw); n++ {
		c := raw[n]
		if c < lo || c > hi {
			break
		}
		lo, hi = 0x80, 0xBF
	}
	return n
}
