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

func TestReportLeadsWithTheDeployedConfiguration(t *testing.T) {
	rep := Report{Policies: []Summary{{Policy: PolicyRR}, {Policy: PolicyLLMD}, {Policy: PolicyLLMD + "@2"},
		{Policy: PolicyBest}, {Policy: Deployed}}}
	rep.LeadWithDeployed()
	var got []string
	for _, s := range rep.Policies {
		got = append(got, s.Policy)
	}
	if want := []string{Deployed, PolicyBest, PolicyRR, PolicyLLMD, PolicyLLMD + "@2"}; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("order %v, want %v", got, want)
	}
	var out strings.Builder
	if err := WriteTable(&out, rep); err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(out.String(), "\n")
	if !strings.HasPrefix(rows[2], "| "+Deployed+" |") || !strings.Contains(out.String(), Deployed+" is what llmd_prefix_router deploys") {
		t.Errorf("table does not open with and name the deployed configuration:\n%s", out.String())
	}

	alone := Report{Policies: []Summary{{Policy: PolicyRR}, {Policy: PolicyBest}}}
	alone.LeadWithDeployed()
	if alone.Policies[0].Policy != PolicyRR {
		t.Errorf("a report without %s was reordered: %v", Deployed, alone.Policies)
	}
	out.Reset()
	if err := WriteTable(&out, alone); err != nil || strings.Contains(out.String(), "deploys") {
		t.Errorf("a report without %s names it: %q %v", Deployed, out.String(), err)
	}
}
