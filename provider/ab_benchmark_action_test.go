package provider

import (
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-framework/types"
)

func TestDurationOr(t *testing.T) {
	for in, want := range map[string]time.Duration{"": defaultRestartTimeout, "45m": 45 * time.Minute, "1h30m": 90 * time.Minute} {
		v := types.StringValue(in)
		if in == "" {
			v = types.StringNull()
		}
		if got, err := durationOr(v, defaultRestartTimeout); err != nil || got != want {
			t.Errorf("timeout %q: %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"45", "-5m", "0s", "soon"} {
		if _, err := durationOr(types.StringValue(bad), time.Minute); err == nil || !strings.Contains(err.Error(), "timeout: ") {
			t.Errorf("timeout %q: error %v, want one naming timeout", bad, err)
		}
	}
}

// TestInClusterService reads the URLs the fleet and the router give
// (baseline_endpoint, url) and refuses what names no Service.
func TestInClusterService(t *testing.T) {
	for in, want := range map[string]serviceRef{
		"http://router.llmd.svc.cluster.local:8000":        {Namespace: "llmd", Name: "router", Port: 8000},
		"http://qwen-baseline.team-a.svc.cluster.local:80": {Namespace: "team-a", Name: "qwen-baseline", Port: 80},
		"http://qwen-baseline.team-a.svc":                  {Namespace: "team-a", Name: "qwen-baseline", Port: 80},
	} {
		got, err := inClusterService("router", in)
		if err != nil || got != want {
			t.Errorf("%s: %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "router:8000", "https://router.llmd.svc.cluster.local:8000", "http://a1b2.elb.amazonaws.com:8000",
		"http://router.llmd.svc.cluster.local:http"} {
		if _, err := inClusterService("baseline", bad); err == nil || !strings.Contains(err.Error(), "baseline: ") ||
			!strings.Contains(err.Error(), "baseline_endpoint") {
			t.Errorf("%q: error %v, want one naming the attribute and where its value comes from", bad, err)
		}
	}
}

// TestABWorkload: the attributes set become the bench's flags, nothing
// else does (the bench's seed workload fills the rest), and a bad value
// names its attribute.
func TestABWorkload(t *testing.T) {
	m := abBenchmarkModel{NumPrompts: types.Int64Value(40), PrefixLen: types.Int64Value(0), RequestRate: types.Float64Value(2.5),
		NumPrefixes: types.Int64Null(), SuffixLen: types.Int64Null(), OutputLen: types.Int64Unknown(), MaxConcurrency: types.Int64Null(),
		Seed: types.Int64Null()}
	got, err := m.workload()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"num-prompts": "40", "prefix-repetition-prefix-len": "0", "request-rate": "2.5"}
	if len(got) != len(want) {
		t.Fatalf("flags %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("--%s %q, want %q", k, got[k], v)
		}
	}
	for name, bad := range map[string]abBenchmarkModel{
		"num_prompts":  {NumPrompts: types.Int64Value(0)},
		"output_len":   {OutputLen: types.Int64Value(0)},
		"request_rate": {RequestRate: types.Float64Value(-1)},
	} {
		if _, err := bad.workload(); err == nil || !strings.HasPrefix(err.Error(), name+": ") {
			t.Errorf("%s: error %v, want one naming it", name, err)
		}
	}
}
