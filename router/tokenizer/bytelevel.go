package tokenizer

import "unicode/utf8"

// Byte-level BPE vocabularies spell every byte as a printable rune so that
// tokens are valid text in JSON: printable Latin-1 bytes stand for themselves
// and the other 68 bytes are shifted to U+0100 onwards, in byte order. The
// tokenizer works on raw bytes internally, so these tables are used only to
// translate the vocabulary at load time and tokens back to bytes when decoding.
var (
	byteToRune [256]rune
	runeToByte = map[rune]byte{}
)

func init() {
	next := rune(256)
	for b := 0; b < 256; b++ {
		printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
		if printable {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = next
			next++
		}
		runeToByte[byteToRune[b]] = byte(b)
	}
}

// byteLevelToBytes turns a token spelled in the byte-level alphabet back into
// its bytes. ok is false when the token holds a rune outside that alphabet
// (added tokens such as "<｜tool▁sep｜>" are stored as plain text).
func byteLevelToBytes(tok string) (raw []byte, ok bool) {
	raw = make([]byte, 0, len(tok))
	for _, r := range tok {
		b, found := runeToByte[r]
		if !found {
			return nil, false
		}
		raw = append(raw, b)
	}
	return raw, true
}

// bytesToByteLevel spells raw bytes in the byte-level alphabet.
func bytesToByteLevel(raw []byte) string {
	out := make([]byte, 0, 2*len(raw))
	for _, b := range raw {
		out = utf8.AppendRune(out, byteToRune[b])
	}
	return string(out)
}
