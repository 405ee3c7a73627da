package tokenizer

// Byte-level BPE vocabularies spell every byte as a printable rune so that
// tokens are valid text in JSON: printable Latin-1 bytes stand for themselves
// and the other 68 bytes are shifted to U+0100 onwards, in byte order. The
// tokenizer works on raw bytes internally, so these tables are used only to
// translate the vocabulary at load time and tokens back to bytes when decoding.
var runeToByte = func() map[rune]byte {
	m := make(map[rune]byte, 256)
	next := rune(256)
	for b := 0; b < 256; b++ {
		if printable := (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); printable {
			m[rune(b)] = byte(b)
		} else {
			m[next] = byte(b)
			next++
		}
	}
	return m
}()

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
