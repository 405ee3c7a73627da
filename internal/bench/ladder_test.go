package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLadderCommand runs `llmd-router bench --ladder` in virtual mode on a
// small workload: one table row per rate and policy, each step sending
// rate x 20 prompts on as many connections at that rate, and a replica
// that keeps up with 1 req/s but not with 20: TTFT rises and the achieved
// rate stays well below 20.
func TestLadderCommand(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "ladder.json")
	var stdout, stderr bytes.Buffer
	args := []string{"--mode", "virtual", "--ladder", "1,20", "--policies", "rr,llmd", "--seed", "3", "--replicas", "1",
		"--prefix-repetition-num-prefixes", "10", "--prefix-repetition-prefix-len", "1024", "--prefix-repetition-suffix-len", "128",
		"--prefix-repetition-output-len", "128", "--json", jsonPath}
	if err := Command(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr.String())
	}
	rows := 0
	for _, l := range strings.Split(stdout.String(), "\n") {
		if strings.HasPrefix(l, "| rr | ") || strings.HasPrefix(l, "| llmd | ") {
			rows++
		}
	}
	if rows != 4 {
		t.Errorf("ladder table has %d rows, want 2 rates x 2 policies:\n%s", rows, stdout.String())
	}
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var lr LadderReport
	if err := json.Unmarshal(raw, &lr); err != nil {
		t.Fatal(err)
	}
	if lr.Mode != "virtual" || len(lr.Steps) != 2 {
		t.Fatalf("ladder JSON: mode %q, %d steps, want virtual and 2", lr.Mode, len(lr.Steps))
	}
	for _, st := range lr.Steps {
		w := st.Report.Workload
		if w.RequestRate != st.Rate || w.NumPrompts != int(st.Rate*20) || w.MaxConcurrency != w.NumPrompts {
			t.Errorf("step %g req/s ran %+v, want %g req/s, %d prompts on as many connections", st.Rate, w, st.Rate, int(st.Rate*20))
		}
		for _, s := range st.Report.Policies {
			if s.Completed != w.NumPrompts || s.RequestThroughput > 1.25*st.Rate {
				t.Errorf("step %g req/s, %s: %d of %d done at %.2f req/s", st.Rate, s.Policy, s.Completed, w.NumPrompts, s.RequestThroughput)
			}
		}
	}
	lo, hi := lr.Steps[0].Report.Policy(PolicyRR), lr.Steps[1].Report.Policy(PolicyRR)
	if hi.MeanTTFT <= 2*lo.MeanTTFT || hi.RequestThroughput > 15 {
		t.Errorf("rr at 20 req/s: %.2f req/s, mean TTFT %.0f ms against %.0f ms at 1 req/s: the ladder does not saturate the replica",
			hi.RequestThroughput, hi.MeanTTFT, lo.MeanTTFT)
	}
}

// TestParseRates reads a --ladder list and names what is wrong with a bad one.
func TestParseRates(t *testing.T) {
	got, err := ParseRates(" 20, 40 ,60,")
	if err != nil || len(got) != 3 || got[0] != 20 || got[2] != 60 {
		t.Errorf("ParseRates: %v, %v", got, err)
	}
	for _, bad := range []string{"", "20,x", "0", "-5"} {
		if _, err := ParseRates(bad); err == nil || !strings.Contains(err.Error(), "--ladder") {
			t.Errorf("ParseRates(%q): %v, want an error naming --ladder", bad, err)
		}
	}
}
