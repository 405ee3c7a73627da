package tokenizer

import "fmt"

// CheckJSONText reports, as an error wrapping ErrUntokenizable, a JSON
// document whose strings hold a lone UTF-16 surrogate escape such as
// "\ud800". Go's encoding/json silently turns one into U+FFFD, so the router
// would tokenize a text the engine never sees: Python keeps the surrogate in
// its str and the Rust tokenizer then refuses it. Call this on a request body
// before decoding it; it does not validate the rest of the JSON.
func CheckJSONText(doc []byte) error {
	inString := false
	for i := 0; i < len(doc); i++ {
		c := doc[i]
		switch {
		case c == '"':
			inString = !inString
		case c == '\\' && inString && i+1 < len(doc):
			if doc[i+1] != 'u' {
				i++ // skip the escaped byte, which may be a quote or backslash
				continue
			}
			hi, ok := hex4(doc, i+2)
			if !ok || hi < 0xD800 || hi > 0xDFFF {
				i++
				continue
			}
			if hi <= 0xDBFF && i+11 < len(doc) && doc[i+6] == '\\' && doc[i+7] == 'u' {
				if lo, ok := hex4(doc, i+8); ok && lo >= 0xDC00 && lo <= 0xDFFF {
					i += 11 // a valid pair
					continue
				}
			}
			return fmt.Errorf("%w: lone surrogate \\u%04x at byte %d of JSON", ErrUntokenizable, hi, i)
		}
	}
	return nil
}

// hex4 decodes the four hex digits at doc[i:].
func hex4(doc []byte, i int) (rune, bool) {
	if i+4 > len(doc) {
		return 0, false
	}
	var v rune
	for _, c := range doc[i : i+4] {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return v, true
}
