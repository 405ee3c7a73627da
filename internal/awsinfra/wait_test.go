package awsinfra

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/eks"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

func countCalls(calls []string, op string) int {
	n := 0
	for _, c := range calls {
		if c == op {
			n++
		}
	}
	return n
}

// TestWaitThroughCreatingStates: the cluster and a node group report CREATING
// a few times (as AWS does for minutes) before ACTIVE; create waits them out.
func TestWaitThroughCreatingStates(t *testing.T) {
	c, standIn := standInClients(t)
	standIn.ClusterStatus("beta", "CREATING", 3)
	standIn.NodegroupStatus("beta", "gpu", "CREATING", 4)
	if _, err := c.CreateCluster(context.Background(), testSpec("beta")); err != nil {
		t.Fatalf("creating through CREATING states: %v", err)
	}
	calls := standIn.Calls()
	// One find before the create, three CREATING, one ACTIVE, one read-back.
	if n := countCalls(calls, "DescribeCluster"); n < 5 {
		t.Fatalf("DescribeCluster called %d times; the waiter did not poll through CREATING", n)
	}
}

// TestNodeGroupCreateFailedSurfacesHealthIssues: CREATE_FAILED ends the wait
// at once with the codes EKS reports, and the next create refuses to adopt
// the failed node group, saying how to get past it.
func TestNodeGroupCreateFailedSurfacesHealthIssues(t *testing.T) {
	c, standIn := standInClients(t)
	issue := testenv.HealthIssue{Code: "AsgInstanceLaunchFailures", Message: "Could not launch On-Demand Instances. InsufficientInstanceCapacity", ResourceIDs: []string{"eks-gpu-asg"}}
	standIn.NodegroupStatus("gamma", "gpu", "CREATE_FAILED", -1, issue)
	standIn.ResetCalls()
	_, err := c.CreateCluster(context.Background(), testSpec("gamma"))
	if err == nil || !strings.Contains(err.Error(), "CREATE_FAILED") || !strings.Contains(err.Error(), "AsgInstanceLaunchFailures") || !strings.Contains(err.Error(), "InsufficientInstanceCapacity") {
		t.Fatalf("create error %v, want CREATE_FAILED with the health issue code", err)
	}
	// A find and a first poll per node group: a failed state ends the wait at
	// once instead of polling on until the deadline.
	if n := countCalls(standIn.Calls(), "DescribeNodegroup"); n > 4 {
		t.Fatalf("DescribeNodegroup called %d times: the waiter polled on past CREATE_FAILED", n)
	}
	_, err = c.CreateCluster(context.Background(), testSpec("gamma"))
	if err == nil || !strings.Contains(err.Error(), "aws eks delete-nodegroup --cluster-name gamma --nodegroup-name gpu") {
		t.Fatalf("second create error %v, want the fix for the failed node group", err)
	}
}

// TestWaitHonoursTimeout: a cluster that stays CREATING ends the wait at the
// deadline with what was last seen.
func TestWaitHonoursTimeout(t *testing.T) {
	c, standIn := standInClients(t)
	if _, err := c.CreateCluster(context.Background(), testSpec("delta")); err != nil {
		t.Fatal(err)
	}
	standIn.ClusterStatus("delta", "CREATING", -1)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	began := time.Now()
	err := c.waitEKSClusterActive(ctx, "delta")
	want := regexp.MustCompile(`timed out after [0-9.]+m?s waiting for EKS cluster delta to become ACTIVE \(last seen: status CREATING\)`)
	if err == nil || !want.MatchString(err.Error()) {
		t.Fatalf("error %v, want %s", err, want)
	}
	// Generous for a loaded machine; without the deadline the wait never ends.
	if elapsed := time.Since(began); elapsed > 10*time.Second {
		t.Fatalf("returned after %s, well past the 500ms deadline", elapsed)
	}
}

// TestDeleteWaitsOutDeletingAndDependencyViolations: the cluster reports
// DELETING after its delete, and subnets and the VPC refuse twice with
// DependencyViolation (lingering ENIs); delete retries and finishes clean.
func TestDeleteWaitsOutDeletingAndDependencyViolations(t *testing.T) {
	c, standIn := standInClients(t)
	ctx := context.Background()
	if _, err := c.CreateCluster(ctx, testSpec("eps")); err != nil {
		t.Fatal(err)
	}
	standIn.ClusterDeleting("eps", 3)
	standIn.NodegroupDeleting("eps", "gpu", 2)
	standIn.DependencyViolations("DeleteSubnet", 2)
	standIn.DependencyViolations("DeleteVpc", 2)
	standIn.ResetCalls()
	if err := c.DeleteCluster(ctx, "eps"); err != nil {
		t.Fatalf("deleting: %v", err)
	}
	calls := standIn.Calls()
	if n := countCalls(calls, "DeleteVpc"); n != 3 {
		t.Fatalf("DeleteVpc called %d times, want 3 (two DependencyViolation, then success)", n)
	}
	if n := countCalls(calls, "DeleteSubnet"); n != 6 {
		t.Fatalf("DeleteSubnet called %d times, want 6 (4 subnets + 2 retries)", n)
	}
	// The cluster delete waited through DELETING before the roles went.
	deleted, rolesGone := slices.Index(calls, "DeleteCluster"), slices.Index(calls, "DeleteRole")
	if deleted < 0 || rolesGone < deleted || countCalls(calls[deleted:rolesGone], "DescribeCluster") < 4 {
		t.Fatalf("roles deleted before the cluster's DELETING states passed: %v", calls)
	}
	if n := countOwned(t, c, "eps"); n != 0 {
		t.Fatalf("%d owned parts left", n)
	}
}

// TestCreateRefusesForeignCluster: a same-named cluster without the owner tag
// is somebody else's; create must not adopt it.
func TestCreateRefusesForeignCluster(t *testing.T) {
	c, _ := standInClients(t)
	ctx := context.Background()
	spec := testSpec("zeta")
	if _, err := c.CreateCluster(ctx, spec); err != nil {
		t.Fatal(err)
	}
	cl, err := c.findEKSClusterByName(ctx, "zeta")
	if err != nil {
		t.Fatal(err)
	}
	// One key per call: moto's UntagResource removes only the first key of a list.
	if _, err := c.EKS.UntagResource(ctx, &eks.UntagResourceInput{ResourceArn: cl.Arn, TagKeys: []string{OwnerTag}}); err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateCluster(ctx, spec)
	if err == nil || !strings.Contains(err.Error(), "exists but was not created by llmd") {
		t.Fatalf("error %v, want a refusal to adopt", err)
	}
	if err := c.DeleteCluster(ctx, "zeta"); err == nil || errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "refusing to delete") {
		t.Fatalf("delete error %v, want a refusal", err)
	}
}

// TestClusterFailedSurfacesHealthIssues: a control plane that goes FAILED
// ends the wait with its health issue codes, and the next create says how to
// get past it instead of waiting on a cluster that will never be ACTIVE.
func TestClusterFailedSurfacesHealthIssues(t *testing.T) {
	c, standIn := standInClients(t)
	standIn.ClusterStatus("eta", "FAILED", -1, testenv.HealthIssue{Code: "Ec2SubnetNotFound", Message: "subnet-123 was deleted", ResourceIDs: []string{"subnet-123"}})
	_, err := c.CreateCluster(context.Background(), testSpec("eta"))
	if err == nil || !strings.Contains(err.Error(), "is FAILED; health issues: Ec2SubnetNotFound: subnet-123 was deleted (subnet-123)") {
		t.Fatalf("create error %v, want FAILED with the health issue", err)
	}
	_, err = c.CreateCluster(context.Background(), testSpec("eta"))
	if err == nil || !strings.Contains(err.Error(), "aws eks delete-cluster --name eta") {
		t.Fatalf("second create error %v, want the fix for the failed cluster", err)
	}
}
