package bench

import (
	"context"
	"io"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestParsePriorityMix checks --priority-mix's form and that every error
// names the flag and shows the fix.
func TestParsePriorityMix(t *testing.T) {
	for _, c := range []struct {
		in   string
		want PriorityMix
		err  string
	}{
		{"", nil, ""},
		{"high=0.2,low=0.8", PriorityMix{{"high", 0.2}, {"low", 0.8}}, ""},
		{" high = 0.25 , standard=0.25,low=0.5 ", PriorityMix{{"high", 0.25}, {"standard", 0.25}, {"low", 0.5}}, ""},
		{"high=1", PriorityMix{{"high", 1}}, ""},
		{"high", nil, `entry "high" is not NAME=SHARE`},
		{"high=much,low=0.5", nil, `entry "high=much" is not NAME=SHARE`},
		{"=0.5,low=0.5", nil, "entry 1 has no class name"},
		{"high=0,low=1", nil, "share 0 is not in (0, 1]"},
		{"high=-0.2,low=1.2", nil, "share -0.2 is not in (0, 1]"},
		{"high=0.5,high=0.5", nil, "class high is named twice"},
		{"high=0.2,low=0.7", nil, "the shares sum to 0.9"},
	} {
		got, err := ParsePriorityMix(c.in)
		switch {
		case c.err == "" && (err != nil || !reflect.DeepEqual(got, c.want)):
			t.Errorf("%q: %v, %v; want %v", c.in, got, err, c.want)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err) ||
			!strings.Contains(err.Error(), "--priority-mix") || !strings.Contains(err.Error(), "e.g. --priority-mix high=0.2,low=0.8")):
			t.Errorf("%q: error %v, want one naming the flag, the fix and %q", c.in, err, c.err)
		}
	}
}

// TestPriorityMixAssign checks the classes are drawn from the seed alone,
// in the mix's shares, and none without a mix.
func TestPriorityMixAssign(t *testing.T) {
	m := PriorityMix{{"high", 0.2}, {"standard", 0.3}, {"low", 0.5}}
	a := m.assign(7, 20000)
	if !slices.Equal(a, m.assign(7, 20000)) {
		t.Fatal("the same seed drew other classes")
	}
	if slices.Equal(a, m.assign(8, 20000)) {
		t.Error("another seed drew the same classes")
	}
	for _, c := range m {
		n := 0
		for _, got := range a {
			if got == c.Class {
				n++
			}
		}
		if share := float64(n) / float64(len(a)); math.Abs(share-c.Share) > 0.015 {
			t.Errorf("class %s drawn for %.3f of the requests, want %.2f", c.Class, share, c.Share)
		}
	}
	if got := PriorityMix(nil).assign(7, 10); got != nil {
		t.Errorf("no mix assigned %v", got)
	}
}

// TestClassSummariesAndTable checks each class's outcomes and served TTFTs
// reach its row, in the mix's order, with each TTFT in the tenth of the
// class's sending period it was sent in, and that a run without a mix
// prints no class table.
func TestClassSummariesAndTable(t *testing.T) {
	mix := PriorityMix{{"high", 0.5}, {"low", 0.5}}
	tallies := map[string]*tally{"high": {}, "low": {}}
	tallies["high"].add(outServed, false)
	tallies["high"].add(outServed, false)
	tallies["low"].add(outServed, false)
	tallies["low"].add(outShed429, true)
	tallies["low"].add(outShed503, true)
	tallies["low"].add(outShed503, false)
	tallies["low"].add(outLost, false)
	tallies["low"].add(outFailed, false)
	recs := []Record{{Class: "high", Sent: 1, FirstToken: 1.1}, {Class: "low", Sent: 0, FirstToken: 2},
		{Class: "high", Sent: 2, FirstToken: 2.3}}
	got := classSummaries(mix, tallies, recs)
	want := []ClassSummary{
		{Class: "high", Sent: 2, Served: 2, MeanTTFT: 200, P99TTFT: 298, P99TTFTByTenth: []float64{100, 0, 0, 0, 0, 0, 0, 0, 0, 300}},
		{Class: "low", Sent: 6, Served: 1, Shed429: 1, Shed429RetryAfter: 1, Shed503: 2, Shed503RetryAfter: 1,
			Failed: 1, Lost: 1, MeanTTFT: 2000, P99TTFT: 2000, P99TTFTByTenth: []float64{0, 0, 0, 0, 0, 0, 0, 0, 0, 2000}},
	}
	for i := range got {
		got[i].MeanTTFT, got[i].P99TTFT = math.Round(got[i].MeanTTFT), math.Round(got[i].P99TTFT)
		for j, v := range got[i].P99TTFTByTenth {
			got[i].P99TTFTByTenth[j] = math.Round(v)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("class summaries\n%+v\nwant\n%+v", got, want)
	}
	var out strings.Builder
	if err := WriteClassTable(&out, Report{Policies: []Summary{{Policy: PolicyBest, Classes: got}}}); err != nil {
		t.Fatal(err)
	}
	for _, row := range []string{"| best | high | 2 | 2 | 0 (0) | 0 (0) | 0 | 0 | 200 | 298 |",
		"| best | low | 6 | 1 | 1 (1) | 2 (1) | 1 | 1 | 2000 | 2000 |"} {
		if !strings.Contains(out.String(), row) {
			t.Errorf("class table lacks %q:\n%s", row, out.String())
		}
	}
	out.Reset()
	if err := WriteClassTable(&out, Report{Policies: []Summary{{Policy: PolicyBest}}}); err != nil || out.Len() != 0 {
		t.Errorf("without a mix: %q, %v", out.String(), err)
	}
}

// TestCommandRefusesMixWhereItCannotRun checks the new flags' errors.
func TestCommandRefusesMixWhereItCannotRun(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--json", "x.json", "--priority-mix", "high=0.5"}, "the shares sum to 0.5"},
		{[]string{"--json", "x.json", "--priority-mix", "high=1"}, "error: --priority-mix: live mode only"},
		{[]string{"--json", "x.json", "--priority-mix", "high=1", "--scheduling-policy", "priority"},
			"error: --priority-mix, --scheduling-policy: live mode only"},
		{[]string{"--json", "x.json", "--mode", "live", "--scheduling-policy", "lifo"}, `--scheduling-policy "lifo": want fcfs or priority`},
		{[]string{"--json", "x.json", "--router-arg=--max-in-flight-per-pod=1"}, "live mode only"},
		{[]string{"--json", "x.json", "--mode", "live", "--engines", "http://127.0.0.1:1", "--router-arg", "--max-queue=1"},
			"error: --router-arg: with --engines the bench starts no router"},
	} {
		err := Command(context.Background(), c.args, io.Discard, io.Discard)
		if err == nil || !strings.Contains("error: "+err.Error(), c.want) {
			t.Errorf("bench %v: error %v, want one containing %q", c.args, err, c.want)
		}
	}
}

// TestLiveShedsAreCountedAsSheds runs a router with one slot per pod and a
// queue of one in front of two replicas, eight connections at once: most
// requests are refused, each with Retry-After, and counted as shed in
// their class, none as failed or lost; the others are served.
func TestLiveShedsAreCountedAsSheds(t *testing.T) {
	if testing.Short() {
		t.Skip("builds llmd-router and runs live replicas")
	}
	w := Workload{Dataset: DatasetPrefixRepetition, NumPrompts: 24, NumPrefixes: 4, PrefixLen: 256, SuffixLen: 32,
		OutputLen: 64, IgnoreEOS: true, MaxConcurrency: 8, Seed: 3, Replicas: 2, Prompts: PromptsTokens, BlockSize: 16,
		PriorityMix: PriorityMix{{"high", 0.5}, {"low", 0.5}}}
	opts := DefaultLiveOptions()
	opts.TimeScale, opts.MaxLag, opts.Router = 5, 1, buildRouter(t)
	opts.RouterArgs = []string{"--max-in-flight-per-pod=1", "--max-queue=1"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := RunLive(ctx, w, []string{PolicyBest}, opts, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	s := rep.Policies[0]
	t.Logf("served %d, shed %d, failed %d, classes %+v", s.Completed, s.Shed, s.Failed, s.Classes)
	if s.Failed != 0 || s.Shed == 0 || s.Completed == 0 || s.Completed+s.Shed != w.NumPrompts {
		t.Errorf("%d served, %d shed, %d failed of %d: want sheds, no failure", s.Completed, s.Shed, s.Failed, w.NumPrompts)
	}
	if len(s.Classes) != 2 || s.Classes[0].Class != "high" || s.Classes[1].Class != "low" {
		t.Fatalf("classes %+v, want high and low", s.Classes)
	}
	sent, shed := 0, 0
	for _, c := range s.Classes {
		sent, shed = sent+c.Sent, shed+c.Shed429+c.Shed503
		if c.Failed != 0 || c.Lost != 0 || c.Shed429RetryAfter != c.Shed429 || c.Shed503RetryAfter != c.Shed503 ||
			c.Served+c.Shed429+c.Shed503 != c.Sent {
			t.Errorf("class %s: %+v, want every request served or shed with Retry-After", c.Class, c)
		}
	}
	if sent != w.NumPrompts || shed != s.Shed {
		t.Errorf("classes sent %d and shed %d, want %d and %d", sent, shed, w.NumPrompts, s.Shed)
	}
	if !slices.Equal(rep.Live.RouterArgs, opts.RouterArgs) {
		t.Errorf("report's router args %v, want %v", rep.Live.RouterArgs, opts.RouterArgs)
	}
}
