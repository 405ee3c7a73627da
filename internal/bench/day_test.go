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

// TestCommandDay runs `bench --day` on a small day (short prompts, 30 s
// hours) and reads back the table and the JSON: four fleets, the
// autoscaled ones cheaper than the fixed one, every request answered, the
// one on offered work scaled out.
func TestCommandDay(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "day.json")
	var stdout, stderr bytes.Buffer
	args := []string{"--day", "--day-peak", "12", "--day-hour", "30", "--day-min", "1", "--day-max", "6", "--day-target", "16",
		"--day-work-target", "200", "--pod-start", "20", "--replicas", "4", "--prefix-repetition-num-prefixes", "4", "--prefix-repetition-prefix-len", "128",
		"--prefix-repetition-suffix-len", "32", "--prefix-repetition-output-len", "16", "--json", jsonPath}
	if err := Command(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("bench --day: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{"| fixed 4, no flow control |", "| fixed 4, flow control |",
		"| autoscaled 1-6 on demand, flow control |", "| autoscaled 1-6 on offered work, flow control |", "| 23 |"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, stdout.String())
		}
	}
	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep DayReport
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 4 || rep.Policy != PolicyBest {
		t.Fatalf("report: %d rows, policy %q", len(rep.Rows), rep.Policy)
	}
	fixed := rep.Rows[1].Result
	for _, r := range rep.Rows {
		if r.Result.Served+r.Result.Shed != r.Result.Requests || r.Result.Requests == 0 {
			t.Errorf("%s: served %d + shed %d != %d requests", r.Name, r.Result.Served, r.Result.Shed, r.Result.Requests)
		}
	}
	for _, auto := range rep.Rows[2:] {
		if s := auto.Result; s.PodSeconds >= fixed.PodSeconds || s.Shed != 0 {
			t.Errorf("%s: %.0f pod-seconds (fixed %.0f), %d shed: want fewer, none shed", auto.Name, s.PodSeconds, fixed.PodSeconds, s.Shed)
		}
	}
	if work := rep.Rows[3].Result; work.PeakPods < 2 {
		t.Errorf("on offered work: at most %d pod: the day's ramp should scale it out", work.PeakPods)
	}
}

// Errors of --day name the flags.
func TestCommandDayErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--day", "--mode", "live"}, "--day: virtual mode only"},
		{[]string{"--day", "--num-prompts", "10"}, "--num-prompts: not with --day"},
		{[]string{"--day", "--day-min", "0"}, "--day-min 0"},
		{[]string{"--day", "--day-target", "-1"}, "--day-target -1"},
		{[]string{"--day", "--day-work-target", "0"}, "--day-work-target 0"},
		{[]string{"--day", "--policies", "rr"}, "--policies rr"},
		{[]string{"--day", "--dataset", "zipf"}, "--dataset zipf"},
	} {
		var stdout, stderr bytes.Buffer
		err := Command(context.Background(), append(c.args, "--json", filepath.Join(t.TempDir(), "x.json")), &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want an error with %q", c.args, err, c.want)
		}
	}
}
