package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
)

// bpeModel merges the bytes of one pre-tokenized piece into vocabulary ids.
// Tokens are keyed by their raw bytes (the byte-level spelling is undone at
// load time) and merges by the pair of ids they join, so encoding never builds
// a string.
type bpeModel struct {
	byteIDs      [256]uint32
	vocab        map[string]uint32 // raw bytes -> id, for ignore_merges
	merges       map[uint64]merge  // left id << 32 | right id
	ignoreMerges bool
}

type merge struct{ rank, id uint32 }

func pairKey(left, right uint32) uint64 { return uint64(left)<<32 | uint64(right) }

// decodeModel decodes the model, checking its type first: other models have
// vocabularies of other shapes.
func decodeModel(raw json.RawMessage) (modelSpec, error) {
	var spec modelSpec
	var kind struct{ Type string }
	if err := json.Unmarshal(raw, &kind); err != nil {
		return spec, fmt.Errorf("decoding model: %w", err)
	}
	if kind.Type != "BPE" {
		return spec, unsupported("model", kind.Type)
	}
	if err := json.Unmarshal(raw, &spec); err != nil {
		return spec, fmt.Errorf("decoding BPE model: %w", err)
	}
	return spec, nil
}

func buildBPE(spec modelSpec) (*bpeModel, error) {
	switch {
	case spec.Dropout != nil && *spec.Dropout != 0:
		return nil, unsupported("BPE option", "dropout")
	case spec.ByteFallback:
		return nil, unsupported("BPE option", "byte_fallback")
	case spec.ContinuingSubwordPrefix != nil && *spec.ContinuingSubwordPrefix != "":
		return nil, unsupported("BPE option", "continuing_subword_prefix")
	case spec.EndOfWordSuffix != nil && *spec.EndOfWordSuffix != "":
		return nil, unsupported("BPE option", "end_of_word_suffix")
	}
	m := &bpeModel{
		vocab:        make(map[string]uint32, len(spec.Vocab)),
		merges:       make(map[uint64]merge, len(spec.Merges)),
		ignoreMerges: spec.IgnoreMerges,
	}
	for tok, id := range spec.Vocab {
		if raw, ok := byteLevelToBytes(tok); ok {
			m.vocab[string(raw)] = id
		}
	}
	for b := range m.byteIDs {
		id, ok := m.vocab[string([]byte{byte(b)})]
		if !ok {
			return nil, fmt.Errorf("BPE vocab has no token for byte 0x%02x: not a byte-level vocabulary", b)
		}
		m.byteIDs[b] = id
	}
	for rank, raw := range spec.Merges {
		left, right, err := parseMerge(raw)
		if err != nil {
			return nil, fmt.Errorf("BPE merge %d: %w", rank, err)
		}
		l, okL := spec.Vocab[left]
		r, okR := spec.Vocab[right]
		id, okM := spec.Vocab[left+right]
		if !okL || !okR || !okM {
			return nil, fmt.Errorf("BPE merge %d (%q %q) names a token missing from the vocab", rank, left, right)
		}
		// A repeated pair keeps its last rank, as in both Hugging Face's and
		// the JS loader's maps.
		m.merges[pairKey(l, r)] = merge{rank: uint32(rank), id: id}
	}
	return m, nil
}

// parseMerge accepts both spellings of a merge: "a b" (tokenizers < 0.20) and
// ["a", "b"] (later versions, which allow spaces inside tokens).
func parseMerge(raw json.RawMessage) (left, right string, err error) {
	if len(raw) > 0 && raw[0] == '[' {
		var pair []string
		if err := json.Unmarshal(raw, &pair); err != nil {
			return "", "", err
		}
		if len(pair) != 2 {
			return "", "", fmt.Errorf("merge has %d parts, want 2", len(pair))
		}
		return pair[0], pair[1], nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", "", err
	}
	left, right, ok := strings.Cut(s, " ")
	if !ok {
		return "", "", fmt.Errorf("merge %q has no space", s)
	}
	return left, right, nil
}

// symbol is one element of the word being merged, linked to its live
// neighbours; a merged-away symbol has id == deadSymbol.
type symbol struct {
	id         uint32
	prev, next int32
}

const deadSymbol = ^uint32(0)

// candidate is a possible merge of the symbol at pos with its right
// neighbour. The left and right ids detect candidates made stale by an earlier
// merge.
type candidate struct {
	rank, id    uint32
	left, right uint32
	pos         int32
}

func (c candidate) before(o candidate) bool {
	return c.rank < o.rank || (c.rank == o.rank && c.pos < o.pos)
}

// shortWord is the length up to which a linear scan for the best merge beats
// keeping candidates in a heap; longer pieces (white space runs, long
// identifiers) need the heap to stay O(n log n).
const shortWord = 32

// noMerge marks an adjacent pair that has no merge.
const noMerge = ^uint32(0)

// encodeWord appends the ids of one piece. Merges are applied lowest rank
// first and, within a rank, leftmost first: the order Hugging Face's BPE uses,
// which matters when a pair occurs several times in one piece.
func (m *bpeModel) encodeWord(dst []uint32, word string, sc *scratch) []uint32 {
	if len(word) == 1 {
		return append(dst, m.byteIDs[word[0]])
	}
	if m.ignoreMerges {
		if id, ok := m.vocab[word]; ok {
			return append(dst, id)
		}
	}
	if len(word) <= shortWord {
		return m.mergeShort(dst, word, sc)
	}
	return m.mergeHeap(dst, word, sc)
}

// lookup returns the merge of a pair, with rank noMerge if there is none.
func (m *bpeModel) lookup(left, right uint32) merge {
	if mg, ok := m.merges[pairKey(left, right)]; ok {
		return mg
	}
	return merge{rank: noMerge}
}

// mergeShort merges a short piece by scanning its pairs for the best merge:
// pairs[i] is the merge of ids[i] and ids[i+1].
func (m *bpeModel) mergeShort(dst []uint32, word string, sc *scratch) []uint32 {
	ids, pairs := sc.ids[:0], sc.pairs[:0]
	for i := 0; i < len(word); i++ {
		ids = append(ids, m.byteIDs[word[i]])
	}
	for i := 0; i+1 < len(ids); i++ {
		pairs = append(pairs, m.lookup(ids[i], ids[i+1]))
	}
	for {
		best := -1
		for i, p := range pairs {
			if p.rank != noMerge && (best < 0 || p.rank < pairs[best].rank) {
				best = i
			}
		}
		if best < 0 {
			break
		}
		ids[best] = pairs[best].id
		ids = append(ids[:best+1], ids[best+2:]...)
		pairs = append(pairs[:best], pairs[best+1:]...)
		if best > 0 {
			pairs[best-1] = m.lookup(ids[best-1], ids[best])
		}
		if best < len(pairs) {
			pairs[best] = m.lookup(ids[best], ids[best+1])
		}
	}
	sc.ids, sc.pairs = ids, pairs
	return append(dst, ids...)
}

// mergeHeap merges a long piece, keeping the candidate merges in a heap.
func (m *bpeModel) mergeHeap(dst []uint32, word string, sc *scratch) []uint32 {
	syms := sc.symbols[:0]
	for i := 0; i < len(word); i++ {
		syms = append(syms, symbol{id: m.byteIDs[word[i]], prev: int32(i - 1), next: int32(i + 1)})
	}
	syms[len(syms)-1].next = -1
	h := candidateHeap(sc.heap[:0])
	for i := 0; i+1 < len(syms); i++ {
		if mg, ok := m.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			h.push(candidate{rank: mg.rank, id: mg.id, left: syms[i].id, right: syms[i+1].id, pos: int32(i)})
		}
	}
	for len(h) > 0 {
		c := h.pop()
		s := &syms[c.pos]
		if s.id != c.left || s.next < 0 || syms[s.next].id != c.right {
			continue
		}
		gone := s.next
		s.id = c.id
		s.next = syms[gone].next
		syms[gone].id = deadSymbol
		if s.next >= 0 {
			syms[s.next].prev = c.pos
			if mg, ok := m.merges[pairKey(s.id, syms[s.next].id)]; ok {
				h.push(candidate{rank: mg.rank, id: mg.id, left: s.id, right: syms[s.next].id, pos: c.pos})
			}
		}
		if s.prev >= 0 {
			p := syms[s.prev]
			if mg, ok := m.merges[pairKey(p.id, s.id)]; ok {
				h.push(candidate{rank: mg.rank, id: mg.id, left: p.id, right: s.id, pos: s.prev})
			}
		}
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		dst = append(dst, syms[i].id)
	}
	sc.symbols, sc.heap = syms, h
	return dst
}

// candidateHeap is a binary min-heap written out so that pushes do not box
// values into interfaces (container/heap would allocate per candidate).
type candidateHeap []candidate

func (h *candidateHeap) push(c candidate) {
	*h = append(*h, c)
	s := *h
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if !s[i].before(s[parent]) {
			break
		}
		s[i], s[parent] = s[parent], s[i]
		i = parent
	}
}

func (h *candidateHeap) pop() candidate {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s = s[:last]
	for i := 0; ; {
		small, l, r := i, 2*i+1, 2*i+2
		if l < len(s) && s[l].before(s[small]) {
			small = l
		}
		if r < len(s) && s[r].before(s[small]) {
			small = r
		}
		if small == i {
			break
		}
		s[i], s[small] = s[small], s[i]
		i = small
	}
	*h = s
	return top
}
