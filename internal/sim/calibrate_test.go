package sim

import (
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestCalibration runs the seed workload under the kube-proxy baseline
// (and at -20% / +20% blocks) and the seed's rate ladder, and checks the
// calibration: the fitted figures of the round-robin column (duration,
// mean TTFT, mean TPOT) and output throughput within 10% of the seed, and
// at least 21 of the 26 figures the calibration is judged on; that
// fewer blocks make the fleet slower and more make it faster; that the
// ladder saturates as the seed's did (achieved rate and TTFT rise with
// the requested rate, the achieved rate stays below the inf run's); that
// a second run is identical; and that BENCHMARKS.md's tables are this
// run's output.
func TestCalibration(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the full seed workload four times")
	}
	rep, err := Calibrate(SeedEngineConfig(), 1)
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
		{"mean TPOT", base.MeanTPOT, SeedBaseline.MeanTPOT},
	} {
		if p := pct(c.got, c.want); p < -10 || p > 10 {
			t.Errorf("%s %.3f is %+.1f%% off the seed's %.3f", c.name, c.got, p, c.want)
		}
	}
	within := 0
	for _, f := range rep.Figures() {
		if math.Abs(f.Error()) <= 10 {
			within++
		}
	}
	if within < 21 {
		t.Errorf("%d of the %d round-robin figures within 10%% of the seed, want at least 21 (issue 29's criterion)", within, len(rep.Figures()))
	}
	if !(less.Duration > base.Duration && base.Duration > more.Duration && less.MeanTTFT > base.MeanTTFT && base.MeanTTFT > more.MeanTTFT) {
		t.Errorf("capacity does not order the runs: -20%% %+v, base %+v, +20%% %+v", less, base, more)
	}
	for i := 1; i < len(rep.Ladder); i++ {
		lo, hi := rep.Ladder[i-1].Result, rep.Ladder[i].Result
		if hi.MeanTTFT <= lo.MeanTTFT || hi.RequestThroughput < lo.RequestThroughput || hi.RequestThroughput > base.RequestThroughput {
			t.Errorf("ladder step %g req/s (%.2f req/s, TTFT %.1f s) does not saturate after %g req/s (%.2f req/s, TTFT %.1f s)",
				rep.Ladder[i].Rate, hi.RequestThroughput, hi.MeanTTFT, rep.Ladder[i-1].Rate, lo.RequestThroughput, lo.MeanTTFT)
		}
	}
	again, err := RunVirtual(calibrationRun(SeedEngineConfig(), 1))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(again, base) {
		t.Errorf("two baseline runs differ:\n%+v\n%+v", base, again)
	}
	doc, err := os.ReadFile("../../BENCHMARKS.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(rep.Markdown()), "\n") {
		if line != "" && !strings.Contains(string(doc), line+"\n") {
			t.Errorf("BENCHMARKS.md's calibration tables lack %q: regenerate them with llmd-router sim -calibrate", line)
		}
	}
}
