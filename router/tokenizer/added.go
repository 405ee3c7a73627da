package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// AddedToken is a token matched in the text before BPE runs: the chat markers
// and other special tokens, and tokens added on top of the trained vocabulary.
type AddedToken struct {
	ID      uint32
	Content string
	// Special tokens are dropped by Decode when asked to skip them.
	Special bool
	// SingleWord tokens only match when not inside a word.
	SingleWord bool
	// LStrip and RStrip tokens absorb the white space on their left or right.
	LStrip, RStrip bool
	// Normalized tokens are matched in the normalized text, the others in the
	// raw text.
	Normalized bool
}

// addedMatcher finds added tokens as Hugging Face's AddedVocabulary does:
// leftmost, then longest, scanning on after each match; a match that breaks
// single_word is skipped, not retried at a later offset.
type addedMatcher struct {
	tokens []AddedToken
	first  [256]bool // first bytes of any token: most positions are rejected here
	nodes  []trieNode
}

type trieNode struct {
	next  map[byte]int32
	token int32 // index into tokens, or -1
}

func newAddedMatcher(tokens []AddedToken) *addedMatcher {
	if len(tokens) == 0 {
		return nil
	}
	m := &addedMatcher{tokens: tokens, nodes: []trieNode{{token: -1}}}
	for i, t := range tokens {
		if t.Content == "" {
			continue
		}
		m.first[t.Content[0]] = true
		n := int32(0)
		for j := 0; j < len(t.Content); j++ {
			c := t.Content[j]
			child, ok := m.nodes[n].next[c]
			if !ok {
				if m.nodes[n].next == nil {
					m.nodes[n].next = map[byte]int32{}
				}
				child = int32(len(m.nodes))
				m.nodes = append(m.nodes, trieNode{token: -1})
				m.nodes[n].next[c] = child
			}
			n = child
		}
		m.nodes[n].token = int32(i)
	}
	return m
}

// longest returns the index of the longest token starting at s[i:], or -1.
func (m *addedMatcher) longest(s string, i int) (tok, end int) {
	tok, n := -1, int32(0)
	for j := i; j < len(s); j++ {
		child, ok := m.nodes[n].next[s[j]]
		if !ok {
			break
		}
		n = child
		if t := m.nodes[n].token; t >= 0 {
			tok, end = int(t), j+1
		}
	}
	return tok, end
}

// addedSplit is a piece of text: an added token (token >= 0) or text to
// encode further (token < 0).
type addedSplit struct {
	text  string
	token int32
}

// split appends the pieces of s to dst.
func (m *addedMatcher) split(dst []addedSplit, s string) []addedSplit {
	if m == nil {
		return append(dst, addedSplit{s, -1})
	}
	done := 0 // text before done has been emitted
	for i := 0; i < len(s); i++ {
		if !m.first[s[i]] {
			continue
		}
		tok, end := m.longest(s, i)
		if tok < 0 {
			continue
		}
		t := &m.tokens[tok]
		if t.SingleWord && (endsWithWord(s[:i]) || startsWithWord(s[end:])) {
			i = end - 1
			continue
		}
		start := i
		if t.LStrip {
			start = max(done, len(trimRightSpace(s[:i])))
		}
		if t.RStrip {
			end = len(s) - len(trimLeftSpace(s[end:]))
		}
		if done < start {
			dst = append(dst, addedSplit{s[done:start], -1})
		}
		dst = append(dst, addedSplit{s[start:end], int32(tok)})
		done = end
		i = end - 1
	}
	if done < len(s) {
		dst = append(dst, addedSplit{s[done:], -1})
	}
	return dst
}

// isWordRune is \w in Rust's regex crate, which Hugging Face uses for
// single_word: alphabetic runes, marks, decimal digits, connector punctuation and the
// joiners.
func isWordRune(r rune) bool {
	return unicode.In(r, unicode.L, unicode.Nl, unicode.Other_Alphabetic, unicode.M, unicode.Nd, unicode.Pc) || r == 0x200C || r == 0x200D
}

func endsWithWord(s string) bool {
	r, n := utf8.DecodeLastRuneInString(s)
	return n > 0 && isWordRune(r)
}

func startsWithWord(s string) bool {
	r, n := utf8.DecodeRuneInString(s)
	return n > 0 && isWordRune(r)
}

func trimRightSpace(s string) string {
	for len(s) > 0 {
		r, n := utf8.DecodeLastRuneInString(s)
		if !unicode.IsSpace(r) {
			break
		}
		s = s[:len(s)-n]
	}
	return s
}

func trimLeftSpace(s string) string {
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		if !unicode.IsSpace(r) {
			break
		}
		s = s[n:]
	}
	return s
}
