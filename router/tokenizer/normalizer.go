package tokenizer

import (
	"encoding/json"
	"fmt"

	"golang.org/x/text/unicode/norm"
)

// normalizer rewrites the text between added tokens before pre-tokenization.
// A nil normalizer leaves the text as it is.
type normalizer interface {
	normalize(s string) string
}

// unicodeForm applies one Unicode normalization form. The quick checks run
// first because most prompts are already normal and must not be copied:
// ASCII text is in every form (it has no decompositions and composes with
// nothing), and checking that eight bytes at a time is several times
// faster than the form's own quick check.
type unicodeForm struct{ form norm.Form }

func (u unicodeForm) normalize(s string) string {
	if isASCII(s) || u.form.IsNormalString(s) {
		return s
	}
	return u.form.String(s)
}

// isASCII reports whether every byte of s is below 0x80.
func isASCII(s string) bool {
	i := 0
	for ; i+8 <= len(s); i += 8 { // the compiler makes the eight loads one
		v := uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
			uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
		if v&0x8080808080808080 != 0 {
			return false
		}
	}
	for ; i < len(s); i++ {
		if s[i]&0x80 != 0 {
			return false
		}
	}
	return true
}

type normalizerSequence []normalizer

func (seq normalizerSequence) normalize(s string) string {
	for _, n := range seq {
		s = n.normalize(s)
	}
	return s
}

var unicodeForms = map[string]norm.Form{"NFC": norm.NFC, "NFD": norm.NFD, "NFKC": norm.NFKC, "NFKD": norm.NFKD}

func buildNormalizer(raw json.RawMessage) (normalizer, error) {
	if isNull(raw) {
		return nil, nil
	}
	var spec componentSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, fmt.Errorf("decoding normalizer: %w", err)
	}
	if form, ok := unicodeForms[spec.Type]; ok {
		return unicodeForm{form}, nil
	}
	if spec.Type != "Sequence" {
		return nil, unsupported("normalizer", spec.Type)
	}
	var seq normalizerSequence
	for i, item := range spec.Normalizers {
		n, err := buildNormalizer(item)
		if err != nil {
			return nil, fmt.Errorf("normalizer Sequence[%d]: %w", i, err)
		}
		if n != nil {
			seq = append(seq, n)
		}
	}
	if len(seq) == 0 {
		return nil, nil
	}
	return seq, nil
}
