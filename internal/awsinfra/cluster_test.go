package awsinfra

import (
	"context"
	"strings"
	"testing"
)

// TestCreateClusterThenDelete creates every part against moto (+ stand-in for
// access entries) in the default zones, checks the owner tag and the
// read-back, then deletes and finds nothing of the owner left.
func TestCreateClusterThenDelete(t *testing.T) {
	c, standIn := standInClients(t)
	ctx := context.Background()
	spec := testSpec("alpha")
	// No zones given: the first three offering both g5.xlarge and m6i.4xlarge
	// (moto's offerings data lists g5.xlarge in us-west-2a to c only).
	spec.Network.AvailabilityZones = nil
	cl, err := c.CreateCluster(ctx, spec)
	if err != nil {
		t.Fatalf("creating: %v", err)
	}
	if cl.Status != "ACTIVE" || cl.Tags[OwnerTag] != "alpha" || cl.Tags["team"] != "inference" || cl.Tags["env"] != "test" {
		t.Fatalf("cluster read back as %+v", cl)
	}
	if cl.GPU == nil || cl.GPU.DesiredSize != 8 || cl.GPU.InstanceType != "g5.xlarge" || len(cl.GPU.Taints) != 1 || cl.System == nil {
		t.Fatalf("node groups read back as %+v / %+v", cl.GPU, cl.System)
	}
	if !cl.Network.Owned || len(cl.Network.PrivateSubnetIDs) != 3 || len(cl.Network.PublicSubnetIDs) != 3 || cl.Network.VPCCIDR != "10.0.0.0/16" ||
		strings.Join(cl.Network.AvailabilityZones, ",") != "us-west-2a,us-west-2b,us-west-2c" {
		t.Fatalf("network read back as %+v", cl.Network)
	}
	if got := standIn.AccessEntries("alpha"); len(got) != 1 || !strings.HasPrefix(got[0], "arn:aws:") {
		t.Fatalf("access entries %v", got)
	}
	if n := countOwned(t, c, "alpha"); n == 0 {
		t.Fatal("no EC2 part carries the owner tag")
	}
	if err := c.DeleteCluster(ctx, "alpha", "gpu", "system"); err != nil {
		t.Fatalf("deleting: %v", err)
	}
	if n := countOwned(t, c, "alpha"); n != 0 {
		t.Fatalf("%d tagged parts left after delete", n)
	}
	// Deleting again finds everything gone and succeeds.
	if err := c.DeleteCluster(ctx, "alpha", "gpu", "system"); err != nil {
		t.Fatalf("deleting again: %v", err)
	}
}
