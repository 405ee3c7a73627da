package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestCommandWritesTableJSONAndPlot runs `llmd-router bench` in virtual
// mode on a small workload and reads back what it wrote: the JSON keys the
// issue fixes, one table row and one TTFT curve and bar per policy.
func TestCommandWritesTableJSONAndPlot(t *testing.T) {
	dir := t.TempDir()
	jsonPath, plotPath := filepath.Join(dir, "out", "r.json"), filepath.Join(dir, "out", "r.svg")
	var stdout, stderr bytes.Buffer
	args := []string{"--mode", "virtual", "--policies", "rr,llmd,best", "--dataset", "zipf", "--num-prompts", "200",
		"--max-concurrency", "16", "--request-rate", "20", "--seed", "3", "--replicas", "2",
		"--prefix-repetition-num-prefixes", "10", "--prefix-repetition-prefix-len", "256", "--prefix-repetition-suffix-len", "32",
		"--prefix-repetition-output-len", "16", "--json", jsonPath, "--plot", plotPath}
	if err := Command(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("bench: %v\n%s", err, stderr.String())
	}
	rows := 0
	for _, l := range strings.Split(stdout.String(), "\n") {
		if strings.HasPrefix(l, "| rr ") || strings.HasPrefix(l, "| llmd ") || strings.HasPrefix(l, "| best ") {
			rows++
		}
	}
	if rows != 3 {
		t.Errorf("table has %d policy rows, want 3:\n%s", rows, stdout.String())
	}

	raw, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Workload map[string]any   `json:"workload"`
		Policies []map[string]any `json:"policies"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Workload["dataset"] != "zipf" || doc.Workload["num_prompts"] != 200.0 || doc.Workload["request_rate"] != 20.0 ||
		doc.Workload["max_concurrency"] != 16.0 || doc.Workload["seed"] != 3.0 {
		t.Errorf("workload echo: %v", doc.Workload)
	}
	// Each router policy runs behind one router and behind the provider's
	// default two (--routers); the report leads with the deployed two.
	var names []any
	for _, p := range doc.Policies {
		names = append(names, p["policy"])
	}
	if want := []any{"best@2", "best", "rr", "llmd", "llmd@2"}; !reflect.DeepEqual(names, want) {
		t.Fatalf("policies %v, want %v: %v", names, want, doc.Policies)
	}
	for _, p := range doc.Policies {
		for _, k := range []string{"duration_s", "output_throughput", "request_throughput", "mean_ttft_ms",
			"median_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "prefix_hit_rate", "peak_waiting"} {
			if v, ok := p[k].(float64); !ok || (k != "peak_waiting" && v <= 0) {
				t.Errorf("%s: %s = %v, want a positive number", p["policy"], k, p[k])
			}
		}
	}

	f, err := os.Open(plotPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	counts := map[string]int{}
	eachSVGToken(t, f, func(tok xml.Token) {
		if se, ok := tok.(xml.StartElement); ok {
			counts[se.Name.Local]++
		}
	})
	// Curves are polylines; bars and legend swatches are rects beside the background.
	n := len(doc.Policies)
	if counts["svg"] != 1 || counts["polyline"] != n || counts["rect"] != 1+n+n {
		t.Errorf("plot elements %v: want one svg, %d curves, background + %d bars + %d swatches", counts, n, n, n)
	}
}

// TestCommandRefusesBadArguments checks that mistakes are errors naming the flag.
func TestCommandRefusesBadArguments(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--mode", "virtual"}, "--json"},
		{[]string{"--json", "x.json", "--policies", "rr,fastest"}, `unknown policy "fastest"`},
		{[]string{"--json", "x.json", "--mode", "dream"}, `--mode "dream"`},
		{[]string{"--json", "x.json", "--dataset", "sharegpt"}, `unknown dataset "sharegpt"`},
		{[]string{"--json", "x.json", "--prompts", "bytes"}, `--prompts "bytes"`},
		{[]string{"--json", "x.json", "--block-size", "0"}, `--block-size must be > 0`},
		{[]string{"--json", "x.json", "--dataset", "multi-turn", "--prompts", "tokens"}, `multi-turn sends chat messages`},
		{[]string{"--json", "x.json", "--mode", "virtual", "--dataset", "multi-turn"}, `runs live only`},
		{[]string{"--json", "x.json", "--mode", "live", "--oracle"}, `--oracle: virtual mode only`},
	} {
		err := Command(context.Background(), c.args, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("bench %v: error %v, want one containing %q", c.args, err, c.want)
		}
	}
}
