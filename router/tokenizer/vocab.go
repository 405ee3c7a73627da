package tokenizer

import (
	"fmt"
	"slices"
)

// buildVocab indexes every token both ways, with the bytes each decodes to,
// and sorts the added tokens by whether Hugging Face matches them in the raw
// or in the normalized text.
func (t *Tokenizer) buildVocab(vocab map[string]uint32, addedTokens []addedTokenSpec) error {
	size := 0
	for _, id := range vocab {
		size = max(size, int(id)+1)
	}
	for _, a := range addedTokens {
		size = max(size, int(a.ID)+1)
	}
	t.names = make([]string, size)
	t.bytes = make([][]byte, size)
	t.tokens = make(map[string]uint32, size)
	set := func(tok string, id uint32) {
		t.names[id] = tok
		t.tokens[tok] = id
		if raw, ok := byteLevelToBytes(tok); ok {
			t.bytes[id] = raw
		} else {
			t.bytes[id] = []byte(tok)
		}
	}
	for tok, id := range vocab {
		set(tok, id)
	}
	var raw, normalized []AddedToken
	for _, a := range addedTokens {
		if id, ok := vocab[a.Content]; ok && id != a.ID {
			return fmt.Errorf("added token %q has id %d but the vocab gives it %d", a.Content, a.ID, id)
		}
		set(a.Content, a.ID)
		tok := AddedToken{ID: a.ID, Content: a.Content, Special: a.Special, SingleWord: a.SingleWord,
			LStrip: a.LStrip, RStrip: a.RStrip, Normalized: a.Normalized}
		t.added = append(t.added, tok)
		if a.Special {
			t.special[a.ID] = true
		}
		if a.Normalized && t.normalizer != nil {
			normalized = append(normalized, withContent(tok, t.normalizer.normalize(tok.Content)))
		} else {
			raw = append(raw, tok)
		}
	}
	t.raw, t.normalized = newAddedMatcher(raw), newAddedMatcher(normalized)
	return nil
}

// withContent returns tok matched as content (a normalized token is looked
// for in its normalized form).
func withContent(tok AddedToken, content string) AddedToken {
	tok.Content = content
	return tok
}

// TokenToID returns the id of a token spelled as in tokenizer.json (byte-level
// alphabet for vocabulary tokens, plain text for added tokens).
func (t *Tokenizer) TokenToID(token string) (uint32, bool) {
	id, ok := t.tokens[token]
	return id, ok
}

// IDToToken returns the token of an id, spelled as in tokenizer.json.
func (t *Tokenizer) IDToToken(id uint32) (string, bool) {
	if int(id) >= len(t.names) || t.bytes[id] == nil {
		return "", false
	}
	return t.names[id], true
}

// VocabSize is one more than the largest id, counting added tokens.
func (t *Tokenizer) VocabSize() int { return len(t.names) }

// AddedTokens returns the added tokens in tokenizer.json order; those with
// Special set are the model's special tokens.
func (t *Tokenizer) AddedTokens() []AddedToken { return slices.Clone(t.added) }

// SpecialPrefix returns the ids Encode puts before the text when asked for
// special tokens (from a TemplateProcessing post-processor, or the config).
func (t *Tokenizer) SpecialPrefix() []uint32 { return slices.Clone(t.template.prefix) }

// SpecialSuffix returns the ids Encode puts after the text when asked for
// special tokens.
func (t *Tokenizer) SpecialSuffix() []uint32 { return slices.Clone(t.template.suffix) }
