package tokenizer

import (
	"slices"
	"sync"
	"testing"
)

// TestConcurrentEncode shares one Tokenizer between goroutines whose pooled
// buffers and piece caches interleave, and requires the ids a lone caller
// gets. Run with -race to also check that no state is shared unguarded.
func TestConcurrentEncode(t *testing.T) {
	tk := qwen3V.load(t, true)
	texts := generatedTexts(40)
	want := encodeAll(t, tk, texts, false)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := 0; g < 8; g++ {
		wg.Go(func() {
			for round := 0; round < 3; round++ {
				for i := range texts {
					j := (i*7 + g*13 + round) % len(texts) // a different order per goroutine
					got, err := tk.Encode(texts[j], false)
					if err != nil || !slices.Equal(got, want[j]) {
						errs <- texts[j]
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for s := range errs {
		t.Errorf("concurrent Encode(%q) differs from a lone caller's", clip(s))
	}
}
