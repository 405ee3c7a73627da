package tokenizer

import "unicode/utf8"

// Resuming a segment's encoding in the middle (PrefixCache) is exact when
// three things hold, and this file is where they are decided.
//
//  1. The first pre-tokenizer stage is a Split with the Isolated behaviour,
//     so its pieces tile the text and every match edge is a piece edge; the
//     later stages work piece by piece (every stage in this package does), so
//     a first-stage piece's ids depend on that piece alone.
//  2. Its matcher scans forward and remembers nothing but its position at a
//     match edge: finding the matches after an edge b reads s[b:] only, so the
//     first-stage pieces of s after b are those of s[b:] on its own.
//  3. The matcher says how far it read (resumer.reach): when every byte it
//     read to place the edges up to b lies in the common prefix of two texts,
//     both have the same first-stage pieces up to b.
//
// Then for two texts sharing a prefix that covers reach(b), the ids up to b
// are the same, and the ids of the second text are the cached ids up to b
// followed by the encoding of its own text from b.

// resumer is a first-stage matcher that can bound how far it reads.
type resumer interface {
	// reach returns an upper bound, one past the last byte, of what the
	// matcher reads of s to place every match edge at or before b, where b
	// is such an edge. Seeing the end of s counts as reading past it: the
	// result is then len(s)+1, which no common prefix covers.
	reach(s string, b int) int
}

var (
	_ resumer = wordScanner{}
	_ resumer = numberRun{}
)

// resumableSplit returns the first stage's matcher when stages meet
// conditions 1 and 2 above, else nil (the regexp2 path: how far a
// backtracking engine reads is not known, so its segments are only reused
// whole).
func resumableSplit(stages []preTokenizer) resumer {
	if len(stages) == 0 {
		return nil
	}
	st, ok := stages[0].(*splitStage)
	if !ok || st.behavior != splitIsolated {
		return nil
	}
	r, _ := st.m.(resumer)
	return r
}

// reach implements resumer. Each alternative of the word pattern reads the
// piece it matches plus the rune after it, except white space, whose pieces
// are decided by the whole run: \s*[\r\n]+ ends at the run's last line
// break and \s+(?!\S) leaves the run's last rune to the next piece, so a
// piece ending in a run has read to the run's end and the rune after it.
// Both bounds are the end of the white space run at the edge (empty when no
// run starts there) plus one rune, and the bound grows with the edge, so it
// covers every earlier piece too.
func (wordScanner) reach(s string, b int) int {
	return pastRun(s, b, classSpace)
}

// reach implements resumer: a run of digits ends at a non-digit or at the
// digit limit, and the text between runs is skipped a rune at a time, so
// placing an edge reads at most the rune at it.
func (numberRun) reach(s string, b int) int {
	if b == len(s) {
		return len(s) + 1
	}
	_, n := utf8.DecodeRuneInString(s[b:])
	return b + n
}

// pastRun returns one past the rune that follows the run of class c
// starting at b, or len(s)+1 when the run reaches the end of s.
func pastRun(s string, b int, c runeClass) int {
	for b < len(s) {
		_, n, c2 := runeAt(s, b)
		if c2 != c {
			return b + n
		}
		b += n
	}
	return len(s) + 1
}

// mark is a resumable point of a cached segment: a first-stage piece edge
// at byte off, the ids before it, and the matcher's reach there.
type mark struct{ off, reach, ids uint32 }

// markEvery is the spacing of marks in a cached segment: a resumed encoding
// redoes at most about this much of the shared text (plus the reach), and
// each mark costs 12 bytes.
const markEvery = 1024

// encodeMarked is encodeText on s, a segment's text from byte base on,
// whose ids continue from the segment's ids-th: it also appends the marks of
// s, in segment offsets, at the first piece edge every markEvery bytes.
// Only for a Tokenizer with a resumer.
func (t *Tokenizer) encodeMarked(dst []uint32, s string, base, ids int, marks []mark, sc *scratch) ([]uint32, []mark) {
	first := t.stages[0].(*splitStage)
	sc.first = first.splitOne(sc.first[:0], s, sc)
	start, off, last := len(dst), 0, 0
	for _, p := range sc.first {
		if off-last >= markEvery {
			marks = append(marks, mark{off: uint32(base + off), reach: uint32(base + t.resume.reach(s, off)),
				ids: uint32(ids + len(dst) - start)})
			last = off
		}
		dst = t.encodePieces(dst, t.preTokenize(p, t.stages[1:], sc), sc)
		off += len(p)
	}
	return dst, marks
}

// lastMark returns the index of the last mark whose reach lies within the
// first shared bytes, or -1. Reach grows with the offset, so the marks
// before it are usable too.
func lastMark(marks []mark, shared int) int {
	for i := len(marks) - 1; i >= 0; i-- {
		if int(marks[i].reach) <= shared {
			return i
		}
	}
	return -1
}

// commonPrefix returns the length in bytes of the longest common prefix of
// a and b; comparing long strides first keeps it at memory speed.
func commonPrefix(a, b string) int {
	const stride = 256
	n, i := min(len(a), len(b)), 0
	for i+stride <= n && a[i:i+stride] == b[i:i+stride] {
		i += stride
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}
