package bench

import (
	"strings"
	"testing"
)

func TestWriteCeilingReadsEachRoutedPolicyAgainstIt(t *testing.T) {
	rep := Report{Policies: []Summary{{Policy: PolicyRR, OutputThroughput: 2500}, {Policy: PolicyLLMD, OutputThroughput: 6000},
		{Policy: PolicyBest, OutputThroughput: 6400}}, Ceiling: &Ceiling{Policy: PolicyBest, OutputThroughput: 6666}}
	var out strings.Builder
	if err := WriteCeiling(&out, rep); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	for _, want := range []string{"6666 output tok/s (best)", " llmd 0.90", " best 0.96"} {
		if !strings.Contains(got, want) {
			t.Errorf("ceiling line %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "rr ") {
		t.Errorf("ceiling line %q reads rr, which no router decides", got)
	}
	out.Reset()
	rep.Ceiling = nil
	if err := WriteCeiling(&out, rep); err != nil || out.Len() != 0 {
		t.Errorf("without a ceiling: %q, %v", out.String(), err)
	}
}
