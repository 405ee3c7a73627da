package sim

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestCalibration runs the seed workload under the kube-proxy baseline
// (and at -20% / +20% blocks) and checks the calibration goal: duration,
// output throughput and mean TTFT within 10% of the seed; that fewer blocks
// make the fleet slower and more make it faster; that a second run is
// identical; and that doc.go's table is this run's output.
func TestCalibration(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the full seed workload four times")
	}
	rep, err := Calibrate(DefaultEngineConfig(), 1)
	if err != nil {
		t.Fatal(err)
	}
	base, less, more := rep.Rows[0].Result, rep.Rows[1].Result, rep.Rows[2].Result
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"duration", base.Duration, SeedBaseline.Duration},
		{"output throughput", base.OutputThroughput, SeedBaseline.OutputThroughput},
		{"mean TTFT", base.MeanTTFT, SeedBaseline.MeanTTFT},
	} {
		if p := pct(c.got, c.want); p < -10 || p > 10 {
			t.Errorf("%s %.2f is %+.1f%% off the seed's %.2f", c.name, c.got, p, c.want)
		}
	}
	if !(less.Duration > base.Duration && base.Duration > more.Duration && less.MeanTTFT > base.MeanTTFT && base.MeanTTFT > more.MeanTTFT) {
		t.Errorf("capacity does not order the runs: -20%% %+v, base %+v, +20%% %+v", less, base, more)
	}
	again, err := RunVirtual(calibrationRun(DefaultEngineConfig(), 1))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again, base) {
		t.Errorf("two baseline runs differ:\n%+v\n%+v", base, again)
	}
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(rep.Markdown()), "\n") {
		if !strings.Contains(string(doc), "//\t"+line+"\n") {
			t.Errorf("doc.go's calibration table lacks %q: regenerate it with llmd-router sim -calibrate", line)
		}
	}
}
