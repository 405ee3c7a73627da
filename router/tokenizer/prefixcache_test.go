package tokenizer

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode"
	"unicode/utf8"
)

// longText joins generated texts of every kind until it is at least n
// bytes long; with plain, it leaves out the kinds that hold special tokens,
// so the text is one long segment.
func longText(r *rand.Rand, n int, plain bool) string {
	var b strings.Builder
	for b.Len() < n {
		g := generators[r.IntN(len(generators))]
		if plain && (g.name == "special" || g.name == "mixed") {
			continue
		}
		b.WriteString(g.gen(r))
		if r.IntN(3) == 0 {
			b.WriteString(pick(r, []string{" ", "\n", "\n\n", "  ", "", "\t"}))
		}
	}
	return b.String()
}

// divergencePoints are the offsets of s where a prefix-sharing text is
// made to differ: inside and at the edges of white space runs, digit runs,
// contractions, multi-byte runes and special tokens, plus random ones.
func divergencePoints(r *rand.Rand, s string, n int) []int {
	var pts []int
	for i := 1; i < len(s); i++ {
		prev, _ := utf8.DecodeLastRuneInString(s[:i])
		cur, _ := utf8.DecodeRuneInString(s[i:])
		switch {
		case !utf8.RuneStart(s[i]): // inside a multi-byte rune
		case unicode.IsSpace(prev) != unicode.IsSpace(cur), unicode.IsSpace(prev) && unicode.IsSpace(cur):
		case unicode.IsDigit(prev) || unicode.IsDigit(cur):
		case prev == '\'' || cur == '\'' || prev == '<' || cur == '<' || prev == '>' || cur == '>':
		case r.IntN(40) == 0:
		default:
			continue
		}
		pts = append(pts, i)
	}
	r.Shuffle(len(pts), func(i, j int) { pts[i], pts[j] = pts[j], pts[i] })
	return pts[:min(n, len(pts))]
}

// diverge returns s cut at i and continued with other text: a generated
// text of a random kind, the same text with its next rune changed (within
// the rune's bytes when it has several), or nothing.
func diverge(r *rand.Rand, s string, i int) string {
	k := r.IntN(5)
	if k != 1 {
		for !utf8.RuneStart(s[i]) {
			i--
		}
	}
	switch k {
	case 0:
		return s[:i]
	case 1:
		// Change the rune that holds byte i, keeping its leading bytes.
		start := i
		for start > 0 && !utf8.RuneStart(s[start]) {
			start--
		}
		old, n := utf8.DecodeRuneInString(s[start:])
		for _, alt := range []rune{old + 1, old - 1, old ^ 0x20} {
			if utf8.ValidRune(alt) && utf8.RuneLen(alt) == n && alt != old {
				return s[:start] + string(alt) + s[start+n:]
			}
		}
		return s[:i] + " x" + s[i:]
	}
	return s[:i] + generators[r.IntN(len(generators))].gen(r) + longText(r, r.IntN(3000), false)
}

// TestPrefixCacheMatchesUncached: texts that share prefixes of every kind
// with earlier ones (cut inside white space, digits, contractions,
// multi-byte runes, at special tokens, extended, truncated) encode through
// the cache to exactly the ids of an uncached encoding, for every family,
// on the scanners (which resume mid-segment) and on regexp2 (whole
// segments only). The uncached ids are the ones the reference tests check
// against transformers' JS port.
func TestPrefixCacheMatchesUncached(t *testing.T) {
	for _, v := range []variant{qwen3V, llama3TemplateV, deepseekV} {
		for _, fast := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/fast=%v", v.name, fast), func(t *testing.T) {
				tk := v.load(t, fast)
				c := tk.NewPrefixCache(64 << 20)
				r := rand.New(rand.NewPCG(7, 2026))
				rounds, perBase := 6, 60
				if !fast {
					rounds, perBase = 2, 15 // regexp2 is slow
				}
				for round := range rounds {
					base := longText(r, 12_000+r.IntN(20_000), round%3 != 0)
					texts := []string{base}
					for _, i := range divergencePoints(r, base, perBase) {
						texts = append(texts, diverge(r, base, i))
					}
					// Chains: a text derived from a derived one, and whole
					// repeats inside a chat.
					texts = append(texts, diverge(r, texts[len(texts)-1], len(texts[len(texts)-1])*2/3),
						"<|im_start|>user\n"+base+"<|im_end|>\n<|im_start|>assistant\n", base)
					for j, s := range texts {
						got, err := c.Encode(s, v.addSpecial)
						if err != nil {
							t.Fatal(err)
						}
						want, err := tk.Encode(s, v.addSpecial)
						if err != nil {
							t.Fatal(err)
						}
						if !slices.Equal(got, want) {
							k := 0
							for k < min(len(got), len(want)) && got[k] == want[k] {
								k++
							}
							t.Fatalf("round %d text %d (%d bytes): cached ids differ from id %d of %d: %v vs %v",
								round, j, len(s), k, len(want), got[k:min(len(got), k+5)], want[k:min(len(want), k+5)])
						}
					}
				}
				st := c.Stats()
				if st.Hits == 0 || (fast && st.Resumed == 0) || st.Misses == 0 {
					t.Errorf("the texts did not exercise the cache: %+v", st)
				}
				if !fast && st.Resumed != 0 {
					t.Errorf("regexp2 cannot bound its reads, yet %d segments resumed", st.Resumed)
				}
				t.Logf("%+v", st)
			})
		}
	}
}

// TestPrefixCacheBound: the cache stays within its byte budget, evicting
// the least recently used segments, and a cache of 0 bytes holds nothing.
func TestPrefixCacheBound(t *testing.T) {
	tk := qwen3V.load(t, true)
	r := rand.New(rand.NewPCG(3, 1))
	const budget = 200_000
	c := tk.NewPrefixCache(budget)
	var texts []string
	for range 40 {
		texts = append(texts, prose(r, 1500)) // one segment each: no special tokens
	}
	for _, s := range texts {
		if _, err := c.Encode(s, false); err != nil {
			t.Fatal(err)
		}
		if st := c.Stats(); st.Bytes > budget {
			t.Fatalf("cache holds %d bytes, over its %d", st.Bytes, budget)
		}
	}
	st := c.Stats()
	if st.Evicted == 0 || st.Segments == 0 || st.Segments+int(st.Evicted) != len(texts) {
		t.Fatalf("stats after 40 segments of about 8 KB in 200 KB: %+v", st)
	}
	// The most recent segment is still there, the first one is gone.
	before := c.Stats()
	_, _ = c.Encode(texts[len(texts)-1], false)
	_, _ = c.Encode(texts[0], false)
	after := c.Stats()
	if after.Hits != before.Hits+1 || after.Misses != before.Misses+1 {
		t.Errorf("recent segment not hit or evicted one not missed: before %+v, after %+v", before, after)
	}

	off := tk.NewPrefixCache(0)
	for _, s := range texts[:3] {
		got, _ := off.Encode(s, false)
		want, _ := tk.Encode(s, false)
		if !slices.Equal(got, want) {
			t.Fatal("a disabled cache changed the ids")
		}
	}
	if st := off.Stats(); st.Segments != 0 || st.Bytes != 0 || st.Hits+st.Misses+st.Resumed != 0 {
		t.Errorf("a 0-byte cache counted or held something: %+v", st)
	}
}

// TestPrefixCacheConcurrent shares one small cache (so segments are evicted
// while others read them) between goroutines encoding texts that share
// prefixes, and requires the uncached ids. Run with -race.
func TestPrefixCacheConcurrent(t *testing.T) {
	tk := qwen3V.load(t, true)
	r := rand.New(rand.NewPCG(5, 5))
	base := longText(r, 30_000, true)
	var texts []string
	for _, i := range divergencePoints(r, base, 24) {
		texts = append(texts, diverge(r, base, i))
	}
	want := encodeAll(t, tk, texts, false)
	c := tk.NewPrefixCache(600_000) // a few of the texts
	var wg sync.WaitGroup
	errs := make(chan int, 8)
	for g := range 6 {
		wg.Go(func() {
			for round := range 3 {
				for i := range texts {
					j := (i*5 + g*7 + round) % len(texts)
					if got, err := c.Encode(texts[j], false); err != nil || !slices.Equal(got, want[j]) {
						errs <- j
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for j := range errs {
		t.Errorf("concurrent cached Encode of text %d differs from the uncached ids", j)
	}
	if st := c.Stats(); st.Evicted == 0 || st.Hits+st.Resumed == 0 {
		t.Errorf("the run did not both reuse and evict: %+v", st)
	}
}

// TestReachBoundsTheScanner checks resume.go's claim directly on the
// scanners: for every edge b of a text's first-stage pieces, any text that
// keeps the first reach(b) bytes has the same pieces up to b.
func TestReachBoundsTheScanner(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 3))
	for pattern, m := range scanners {
		res, ok := m.(resumer)
		if !ok {
			continue
		}
		for range 300 {
			s := longText(r, 300, false)
			spans := m.appendMatches(nil, s)
			for _, sp := range spans {
				b := sp.end
				reach := res.reach(s, b)
				if reach > len(s) {
					continue
				}
				other := s[:reach] + generators[r.IntN(len(generators))].gen(r)
				got := m.appendMatches(nil, other)
				for _, want := range spans {
					if want.end > b {
						break
					}
					if !slices.Contains(got, want) {
						t.Fatalf("pattern %.20q: piece %q of %q (edge %d, reach %d) is not a piece of %q",
							pattern, s[want.start:want.end], s, b, reach, other)
					}
				}
			}
		}
	}
}

// FuzzPrefixCache: a long text and one that shares any prefix of it encode
// through the cache as without it.
func FuzzPrefixCache(f *testing.F) {
	for _, s := range edgeTexts {
		f.Add(s, uint16(len(s)/2), "x")
	}
	f.Add("hello  world\n\n  12345 don't <|im_end|> é", uint16(7), "\u0301 ")
	tk := qwen3V.load(f, true)
	f.Fuzz(func(t *testing.T, base string, cut uint16, suffix string) {
		if !utf8.ValidString(base) || !utf8.ValidString(suffix) || base == "" {
			t.Skip("Encode rejects invalid UTF-8")
		}
		long := strings.Repeat(base, 9000/len(base)+1)
		i := int(cut) * 7 % len(long)
		for !utf8.RuneStart(long[i]) {
			i--
		}
		c := tk.NewPrefixCache(1 << 20)
		for _, s := range []string{long, long[:i] + suffix, long[:i] + suffix + long} {
			got, err := c.Encode(s, false)
			want, err2 := tk.Encode(s, false)
			if err != nil || err2 != nil || !slices.Equal(got, want) {
				t.Fatalf("cut %d, suffix %q: cached ids differ (%v, %v)", i, suffix, err, err2)
			}
		}
	})
}
