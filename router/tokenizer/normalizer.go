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

// unicodeForm applies one Unicode normalization form. The quick check runs
// first because most prompts are already NFC and must not be copied.
type unicodeForm struct{ form norm.Form }

func (u unicodeForm) normalize(s string) string {
	if u.form.IsNormalString(s) {
		return s
	}
	return u.form.String(s)
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
