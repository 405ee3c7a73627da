package awsinfra

import (
	"context"
	"strings"
	"testing"
)

// TestPreflightWithoutStandIn runs the checks straight against moto, which
// knows instance types and offerings but neither EC2 quotas nor EKS versions:
// those two checks are skipped with the reason, the others still run.
func TestPreflightWithoutStandIn(t *testing.T) {
	c := motoOnlyClients(t)
	spec := testSpec("pf")
	res, err := c.Preflight(context.Background(), PreflightInput{KubernetesVersion: "1.33", GPU: spec.GPU, System: spec.System, Network: spec.Network})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Findings) != 0 {
		t.Fatalf("findings %+v on a valid spec", res.Findings)
	}
	if len(res.Skipped) != 2 || !strings.Contains(res.Skipped[0], QuotaGAndVTOnDemand) || !strings.Contains(res.Skipped[1], "DescribeClusterVersions") {
		t.Fatalf("skipped %q, want the quota and version checks skipped with reasons", res.Skipped)
	}
	spec.Network.AvailabilityZones = []string{"us-west-2c", "us-west-2d"}
	res, err = c.Preflight(context.Background(), PreflightInput{KubernetesVersion: "1.33", GPU: spec.GPU, System: spec.System, Network: spec.Network})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Findings) != 1 || res.Findings[0].Field != "networking.availability_zones" || !strings.Contains(res.Findings[0].Message, "not offered in us-west-2d") {
		t.Fatalf("findings %+v, want g5.xlarge missing from us-west-2d", res.Findings)
	}
	t.Logf("skipped: %q", res.Skipped)
}
