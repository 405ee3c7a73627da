package awsinfra

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
)

// TestCreateClusterThenDelete creates every part against moto (+ stand-in for
// access entries) in the default zones, checks the owner tag and the
// read-back, then deletes and finds nothing of the owner left, while a
// neighbouring cluster in the same account keeps every one of its parts.
func TestCreateClusterThenDelete(t *testing.T) {
	c, standIn := standInClients(t)
	ctx := context.Background()
	if _, err := c.CreateCluster(ctx, testSpec("neighbour")); err != nil {
		t.Fatalf("creating the neighbour: %v", err)
	}
	neighbourParts := countOwned(t, c, "neighbour")
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
	// The caller's admin entry and the one EKS makes for the node role.
	if got := standIn.AccessEntries("alpha"); len(got) != 2 || !slices.Contains(got, "arn:aws:iam::123456789012:role/alpha-us-west-2-node") {
		t.Fatalf("access entries %v", got)
	}
	if n := countOwned(t, c, "alpha"); n == 0 {
		t.Fatal("no EC2 part carries the owner tag")
	}
	if err := c.DeleteCluster(ctx, "alpha"); err != nil {
		t.Fatalf("deleting: %v", err)
	}
	if n := countOwned(t, c, "alpha"); n != 0 {
		t.Fatalf("%d tagged parts left after delete", n)
	}
	if n := countOwned(t, c, "neighbour"); n != neighbourParts || n != 15 {
		t.Fatalf("the neighbour has %d parts after alpha's delete, had %d (want 15)", n, neighbourParts)
	}
	// Deleting again finds everything gone and succeeds.
	if err := c.DeleteCluster(ctx, "alpha"); err != nil {
		t.Fatalf("deleting again: %v", err)
	}
}

// TestDeleteStopsAtForeignNodeGroup: a node group someone added by hand keeps
// the cluster from being deleted, named in the error, before anything of the
// cluster is removed; once it is gone, delete finishes.
func TestDeleteStopsAtForeignNodeGroup(t *testing.T) {
	c, _ := standInClients(t)
	ctx := context.Background()
	cl, err := c.CreateCluster(ctx, testSpec("theta"))
	if err != nil {
		t.Fatal(err)
	}
	roleARN, err := c.roleARN(ctx, roleName("theta", c.Config.Region, nodeRole))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.EKS.CreateNodegroup(ctx, &eks.CreateNodegroupInput{ClusterName: aws.String("theta"), NodegroupName: aws.String("extra"),
		NodeRole: aws.String(roleARN), Subnets: cl.Network.PrivateSubnetIDs}); err != nil {
		t.Fatal(err)
	}
	err = c.DeleteCluster(ctx, "theta")
	if err == nil || !strings.Contains(err.Error(), "node groups llmd did not create ([extra])") {
		t.Fatalf("delete error %v, want the foreign node group named", err)
	}
	if ng, err := c.findNodeGroupByName(ctx, "theta", "gpu"); err != nil || ng == nil {
		t.Fatalf("the gpu node group was deleted before the refusal (%v)", err)
	}
	// Deleted and gone: EKS reads it ACTIVE, then DELETING, for a while.
	if err := c.deleteNodeGroup(ctx, "theta", "extra"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteCluster(ctx, "theta"); err != nil {
		t.Fatalf("delete after removing the foreign node group: %v", err)
	}
	if n := countOwned(t, c, "theta"); n != 0 {
		t.Fatalf("%d owned parts left", n)
	}
}
