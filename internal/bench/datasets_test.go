package bench

import (
	"slices"
	"testing"
)

// prefixCounts builds w and counts the prompts per distinct first block.
func prefixCounts(t *testing.T, w Workload) (counts map[uint32]int, lens map[int]int) {
	t.Helper()
	ds, err := w.SimDataset()
	if err != nil {
		t.Fatal(err)
	}
	work, err := ds.Build()
	if err != nil {
		t.Fatal(err)
	}
	if work.Len() != w.NumPrompts {
		t.Fatalf("%s: %d prompts, want %d", w.Dataset, work.Len(), w.NumPrompts)
	}
	counts, lens = map[uint32]int{}, map[int]int{}
	for i := range work.Len() {
		p := work.Prompt(i, nil)
		counts[p[0]<<8^p[1]]++
		lens[len(p)]++
		if work.OutputLen(i) != w.OutputLen {
			t.Fatalf("%s: prompt %d outputs %d tokens, want %d", w.Dataset, i, work.OutputLen(i), w.OutputLen)
		}
	}
	return counts, lens
}

func smallWorkload(dataset string) Workload {
	return Workload{Dataset: dataset, NumPrompts: 600, NumPrefixes: 20, PrefixLen: 64, SuffixLen: 16, OutputLen: 8,
		ZipfS: 1.1, MaxConcurrency: 8, Seed: 7, Replicas: 2}
}

// TestDatasetsShapePrompts checks what each dataset promises: prompt and
// output lengths, how prompts share prefixes (evenly, skewed, not at all),
// and that a seed fixes the prompts.
func TestDatasetsShapePrompts(t *testing.T) {
	rep, lens := prefixCounts(t, smallWorkload(DatasetPrefixRepetition))
	if len(rep) != 20 || len(lens) != 1 || lens[80] != 600 {
		t.Errorf("prefix_repetition: %d distinct prefixes (want 20), lengths %v (want 600 x 80)", len(rep), lens)
	}
	for _, n := range rep {
		if n != 30 {
			t.Errorf("prefix_repetition: a prefix carries %d prompts, want 600/20 = 30", n)
		}
	}

	zipf, lens := prefixCounts(t, smallWorkload(DatasetZipf))
	counts := make([]int, 0, len(zipf))
	for _, n := range zipf {
		counts = append(counts, n)
	}
	slices.Sort(counts)
	slices.Reverse(counts)
	// With s = 1.1 over 20 prefixes the hottest takes 1/H(20, 1.1) ~ 30% of
	// prompts, against 5% for an even spread.
	if len(lens) != 1 || lens[80] != 600 || counts[0] < 120 || counts[0] > 240 || len(counts) < 10 {
		t.Errorf("zipf: prompts per prefix %v, lengths %v: want the hottest near 30%% of 600", counts, lens)
	}

	none, lens := prefixCounts(t, smallWorkload(DatasetNone))
	if len(none) < 599 || len(lens) != 1 || lens[80] != 600 {
		t.Errorf("none: %d distinct starts of 600 prompts, lengths %v: want every prompt fresh, 64+16 tokens", len(none), lens)
	}

	for _, d := range []string{DatasetPrefixRepetition, DatasetZipf, DatasetNone} {
		a, _ := smallWorkload(d).SimDataset()
		b, _ := smallWorkload(d).SimDataset()
		wa, _ := a.Build()
		wb, _ := b.Build()
		for _, i := range []int{0, 17, 599} {
			if !slices.Equal(wa.Prompt(i, nil), wb.Prompt(i, nil)) {
				t.Errorf("%s: prompt %d differs between two builds with one seed", d, i)
			}
		}
		other := smallWorkload(d)
		other.Seed++
		c, _ := other.SimDataset()
		wc, _ := c.Build()
		if slices.Equal(wa.Prompt(0, nil), wc.Prompt(0, nil)) {
			t.Errorf("%s: seeds 7 and 8 give the same first prompt", d)
		}
	}

	if _, err := (Workload{Dataset: "sharegpt"}).SimDataset(); err == nil {
		t.Error("an unknown dataset was accepted")
	}
}
