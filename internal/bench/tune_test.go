package bench

import (
	"math"
	"reflect"
	"testing"
)

// TestTuningIsHeldOut guards decision 6: no tuning workload is the seed
// workload `best` is reported on (another dataset, prefix length or seed),
// and BestScorers is one of the candidates the tuning compared.
func TestTuningIsHeldOut(t *testing.T) {
	seed := SeedWorkload()
	for name, w := range TuningWorkloads() {
		if w.Dataset == seed.Dataset && w.PrefixLen == seed.PrefixLen && w.Seed == seed.Seed {
			t.Errorf("tuning workload %s is the seed workload", name)
		}
		if w.Seed == seed.Seed {
			t.Errorf("tuning workload %s uses the seed workload's seed %d", name, w.Seed)
		}
		if _, err := w.SimDataset(); err != nil {
			t.Errorf("tuning workload %s: %v", name, err)
		}
	}
	found := false
	for _, c := range TuningCandidates() {
		found = found || reflect.DeepEqual(c.Scorers, BestScorers())
	}
	if !found {
		t.Errorf("BestScorers %v is not among the tuning candidates", BestScorers())
	}
	const want = "prefix 2 : cost 2 : in-flight 1 : load-bound 10 (factor 1.75) : rendezvous 1"
	if got := (Candidate{Scorers: BestScorers()}).String(); got != want {
		t.Errorf("best renders as %q, want %q", got, want)
	}
}

// TestTuneScoresRelativeToTheBestPerWorkload checks the ranking arithmetic
// on two tiny workloads: the winner scores 1 only when it wins everywhere,
// and scores are geometric means of per-workload ratios.
func TestTuneScoresRelativeToTheBestPerWorkload(t *testing.T) {
	small := contended()
	small.NumPrompts, small.NumPrefixes, small.PrefixLen, small.OutputLen = 96, 12, 256, 8
	none := small
	none.Dataset = DatasetNone
	cands := []Candidate{TuningCandidates()[0], {Name: "best", Scorers: BestScorers()}}
	res, err := Tune(cands, map[string]Workload{"small": small, "none": none})
	if err != nil {
		t.Fatal(err)
	}
	for ci := range cands {
		prod := 1.0
		for wi := range res.Workloads {
			top := max(res.Throughput[0][wi], res.Throughput[1][wi])
			prod *= res.Throughput[ci][wi] / top
		}
		if want := math.Sqrt(prod); math.Abs(res.Score[ci]-want) > 1e-12 {
			t.Errorf("%s: score %v, want %v", cands[ci].Name, res.Score[ci], want)
		}
		if res.Score[ci] > 1 || res.Score[ci] <= 0 {
			t.Errorf("%s: score %v outside (0, 1]", cands[ci].Name, res.Score[ci])
		}
	}
	if w := res.Winner(); res.Score[w] < res.Score[1-w] {
		t.Errorf("winner %d scores %v below %v", w, res.Score[w], res.Score[1-w])
	}
}
