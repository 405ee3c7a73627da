package tokenizer

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMergePathsAgree: the linear scan for short pieces and the heap for long
// ones must merge identically; the exactness tests see few long pieces, so
// both run here on every pre-tokenized piece of the generated texts and on
// random byte strings, in both vocabularies' merge formats.
func TestMergePathsAgree(t *testing.T) {
	for _, v := range []variant{qwen3V, deepseekV} {
		tk := v.load(t, true)
		sc := new(scratch)
		words := []string{}
		for _, s := range generatedTexts(200) {
			pieces := append([]string(nil), s)
			for _, st := range tk.stages {
				pieces = st.apply(nil, pieces, sc)
			}
			words = append(words, pieces...)
		}
		r := rand.New(rand.NewPCG(1, 2))
		for i := 0; i < 2000; i++ {
			b := make([]byte, 2+r.IntN(2*shortWord))
			for j := range b {
				b[j] = "  \n\teeaaosst-_=1.é"[r.IntN(18)]
			}
			words = append(words, string(b))
		}
		for _, w := range words {
			if len(w) < 2 {
				continue
			}
			short := tk.model.mergeShort(nil, w, sc)
			heap := tk.model.mergeHeap(nil, w, sc)
			if !slices.Equal(short, heap) {
				t.Fatalf("%s: %q merges to %v by scan, %v by heap", v.name, w, short, heap)
			}
		}
		t.Logf("%s: %d pieces merge identically both ways", v.name, len(words))
	}
}
