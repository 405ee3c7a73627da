package awsinfra

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/fsx"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// The tests here meet the stand-in's hard defaults (AWS's documented hard
// behaviour, each cited in internal/testenv/awsstandin_hard.go) through the
// product's own create, update and delete. Every one runs under a deadline:
// a wait that does not understand AWS's states must fail, never hang.

func deadline(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestAddonsWaitThroughDegraded: coredns and the FSx CSI driver report
// DEGRADED (InsufficientNumberOfReplicas) before ACTIVE while the nodes are
// young; create waits through it. One that stays DEGRADED times out naming
// its health issue.
func TestAddonsWaitThroughDegraded(t *testing.T) {
	c, standIn := standInClients(t)
	ctx := deadline(t)
	cl, err := c.CreateCluster(ctx, storageSpec("young"))
	if err != nil {
		t.Fatalf("creating while add-ons are DEGRADED: %v", err)
	}
	for _, a := range cl.Addons {
		if a.Status != "ACTIVE" {
			t.Fatalf("add-on %s read back %s", a.Name, a.Status)
		}
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	standIn.AddonStatus("young", "coredns", "DEGRADED")
	err = c.waitAddonActive(short, "young", "coredns")
	if err == nil || !strings.Contains(err.Error(), "timed out") || !strings.Contains(err.Error(), "status DEGRADED") {
		t.Fatalf("a lasting DEGRADED: %v, want a timeout naming the status", err)
	}
}

// TestFileSystemUpdateWaitsForAdministrativeAction: UpdateFileSystem queues
// an administrative action while the file system still reads AVAILABLE;
// the update waits for it (capacity read back new), a second update during
// one is refused by FSx, and a FAILED action's FailureDetails reach the error.
func TestFileSystemUpdateWaitsForAdministrativeAction(t *testing.T) {
	c, standIn := standInClients(t)
	ctx := deadline(t)
	spec := storageSpec("fsx-admin")
	cl, err := c.CreateCluster(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	id := cl.Storage.FileSystemID
	spec.Storage.StorageCapacityGiB = 2400
	if cl, err = c.UpdateCluster(ctx, spec); err != nil {
		t.Fatalf("growing the file system: %v", err)
	}
	if cl.Storage.StorageCapacityGiB != 2400 {
		t.Fatalf("capacity read back %d right after the update, want 2400", cl.Storage.StorageCapacityGiB)
	}
	// The stand-in's own rule: a second update while one runs is refused.
	if _, err := c.FSx.UpdateFileSystem(ctx, &fsx.UpdateFileSystemInput{FileSystemId: aws.String(id), StorageCapacity: aws.Int32(4800)}); err != nil {
		t.Fatal(err)
	}
	_, err = c.FSx.UpdateFileSystem(ctx, &fsx.UpdateFileSystemInput{FileSystemId: aws.String(id), StorageCapacity: aws.Int32(7200)})
	if err == nil || !strings.Contains(err.Error(), "already in progress") {
		t.Fatalf("second update during one: %v, want BadRequest", err)
	}
	if err := c.waitFileSystemUpdate(ctx, id, time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	standIn.FailNextFileSystemUpdate(id, "The storage capacity increase failed: insufficient capacity in us-west-2a")
	spec.Storage.StorageCapacityGiB = 7200
	_, err = c.UpdateCluster(ctx, spec)
	if err == nil || !strings.Contains(err.Error(), "insufficient capacity in us-west-2a") {
		t.Fatalf("a FAILED administrative action: %v, want its FailureDetails", err)
	}
}

// TestEKSMadeAccessEntries: EKS makes the node role's entry (EC2_LINUX) by
// itself; it never shows in the read-back access entries and survives every
// update. Declared in access_entries it is refused, untouched (EKS gives a
// node entry no access policy), and the next apply without it goes on. A
// STANDARD entry made by someone else is adopted (read back, no repeated
// create) and, once no longer declared, loses its policy but stays.
func TestEKSMadeAccessEntries(t *testing.T) {
	c, standIn := standInClients(t)
	ctx := deadline(t)
	spec := testSpec("entries")
	cl, err := c.CreateCluster(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	nodeRole := cl.GPU.NodeRoleARN
	if standIn.AccessEntryType("entries", nodeRole) != "EC2_LINUX" || len(cl.AccessEntries) != 0 {
		t.Fatalf("node role entry %q, read back %v", standIn.AccessEntryType("entries", nodeRole), cl.AccessEntries)
	}
	view := "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy"
	spec.AccessEntries = []AccessEntrySpec{{PrincipalARN: nodeRole, PolicyARN: view}}
	if _, err = c.UpdateCluster(ctx, spec); err == nil || !strings.Contains(err.Error(), "is a node entry (type EC2_LINUX") || !strings.Contains(err.Error(), "remove it from access_entries") {
		t.Fatalf("declaring the node role: %v, want a refusal naming access_entries", err)
	}
	if pols, err := c.EKS.ListAssociatedAccessPolicies(ctx, &eks.ListAssociatedAccessPoliciesInput{ClusterName: aws.String("entries"), PrincipalArn: aws.String(nodeRole)}); err != nil ||
		len(pols.AssociatedAccessPolicies) != 0 || standIn.AccessEntryType("entries", nodeRole) != "EC2_LINUX" {
		t.Fatalf("the refused node entry: policies %v (%v), type %q; want it untouched", pols, err, standIn.AccessEntryType("entries", nodeRole))
	}
	// Someone else's STANDARD entry, declared after the fact, is adopted.
	other := "arn:aws:iam::123456789012:role/someone"
	if _, err := c.EKS.CreateAccessEntry(ctx, &eks.CreateAccessEntryInput{ClusterName: aws.String("entries"), PrincipalArn: aws.String(other)}); err != nil {
		t.Fatal(err)
	}
	spec.AccessEntries = []AccessEntrySpec{{PrincipalARN: other, PolicyARN: view}}
	if cl, err = c.UpdateCluster(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if len(cl.AccessEntries) != 1 || cl.AccessEntries[0].PrincipalARN != other || !cl.AccessEntries[0].Adopted {
		t.Fatalf("declared entry read back as %+v, want it adopted", cl.AccessEntries)
	}
	standIn.ResetCalls()
	if _, err = c.UpdateCluster(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if n := countCalls(standIn.Calls(), "CreateAccessEntry") + countCalls(standIn.Calls(), "AssociateAccessPolicy"); n != 0 {
		t.Fatalf("an unchanged apply made %d access entry calls: a perpetual diff", n)
	}
	spec.AccessEntries = nil
	if cl, err = c.UpdateCluster(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if standIn.AccessEntryType("entries", nodeRole) != "EC2_LINUX" || standIn.AccessEntryType("entries", other) != "STANDARD" || len(cl.AccessEntries) != 0 {
		t.Fatalf("after dropping it: entries %q and %q, read back %v; the nodes' entry and the adopted one must stay",
			standIn.AccessEntryType("entries", nodeRole), standIn.AccessEntryType("entries", other), cl.AccessEntries)
	}
}

// TestVersionUpgradeWhileBusy: an upgrade goes one minor at a time and the
// cluster reads UPDATING for several polls; an update EKS is already running
// (started behind the provider's back) makes the next one wait
// (ResourceInUseException) rather than fail. EKS refuses a skipped version.
func TestVersionUpgradeWhileBusy(t *testing.T) {
	c, _ := standInClients(t)
	ctx := deadline(t)
	spec := testSpec("upgrade")
	if _, err := c.CreateCluster(ctx, spec); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EKS.UpdateClusterVersion(ctx, &eks.UpdateClusterVersionInput{Name: aws.String("upgrade"), Version: aws.String("1.35")}); err == nil ||
		!strings.Contains(err.Error(), "Unsupported Kubernetes minor version update from 1.33 to 1.35") {
		t.Fatalf("skipping a version: %v", err)
	}
	// Someone else's endpoint update runs when the provider upgrades.
	if _, err := c.EKS.UpdateClusterConfig(ctx, &eks.UpdateClusterConfigInput{Name: aws.String("upgrade")}); err != nil {
		t.Fatal(err)
	}
	spec.KubernetesVersion = "1.34"
	cl, err := c.UpdateCluster(ctx, spec)
	if err != nil {
		t.Fatalf("upgrading while another update runs: %v", err)
	}
	if cl.KubernetesVersion != "1.34" || cl.GPU.Version != "1.34" || cl.Status != "ACTIVE" {
		t.Fatalf("after the upgrade: cluster %s %s, gpu %s", cl.KubernetesVersion, cl.Status, cl.GPU.Version)
	}
}

// TestPreflightReadsEveryVersion: DescribeClusterVersions comes in pages and
// lists versions in extended support only with includeAll; the oldest (in
// extended support) and the newest (on the last page) both pass.
func TestPreflightReadsEveryVersion(t *testing.T) {
	c, _ := standInClients(t)
	spec := testSpec("pf-versions")
	for _, v := range []string{"1.31", "1.34"} {
		res, err := c.Preflight(deadline(t), PreflightInput{KubernetesVersion: v, GPU: spec.GPU, System: spec.System, Network: spec.Network})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Findings) != 0 {
			t.Fatalf("Kubernetes %s: %+v", v, res.Findings)
		}
	}
}

// TestUpgradeSurgeInQuota: a version upgrade surges the GPU node group by
// twice its zones; the quota check counts them.
func TestUpgradeSurgeInQuota(t *testing.T) {
	c, standIn := standInClients(t)
	spec := testSpec("pf-surge")
	spec.GPU.ColocateWithStorage = true
	standIn.SetQuota(QuotaGAndVTOnDemand, 32) // 8 x g5.xlarge = 32 vCPUs
	in := PreflightInput{KubernetesVersion: "1.34", GPU: spec.GPU, System: spec.System, Network: spec.Network}
	res, err := c.Preflight(deadline(t), in)
	if err != nil || len(res.Findings) != 0 {
		t.Fatalf("create within quota: %v %+v", err, res.Findings)
	}
	in.Upgrade = true
	res, err = c.Preflight(deadline(t), in)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Findings) != 1 || !strings.Contains(res.Findings[0].Message, "10 x g5.xlarge (max_size 8 plus the 2 EKS adds") || !strings.Contains(res.Findings[0].Message, "lower max_size to 6") {
		t.Fatalf("upgrade findings %+v, want the surge counted", res.Findings)
	}
}

// TestGPUZoneWithoutCapacity: a g5 node group in a zone without capacity
// fails CREATE_FAILED with AsgInstanceLaunchFailures; the error names the
// instance type, the zone and what to do.
func TestGPUZoneWithoutCapacity(t *testing.T) {
	c, _ := standInClients(t)
	spec := storageSpec("no-capacity")
	spec.Network.AvailabilityZones = []string{testenv.NoGPUCapacityZone, "us-west-2a"}
	spec.Storage.AvailabilityZone = testenv.NoGPUCapacityZone
	_, err := c.CreateCluster(deadline(t), spec)
	want := regexp.MustCompile(`(?s)EKS node group gpu is CREATE_FAILED.*AsgInstanceLaunchFailures.*EC2 has no g5\.xlarge capacity in us-west-2c.*another zone.*Capacity Reservation`)
	if err == nil || !want.MatchString(err.Error()) {
		t.Fatalf("create error %v, want %s", err, want)
	}
}

// TestDeleteAfterEKSLeftovers: after the node groups go, the VPC CNI's
// interfaces stay available in their subnets and a VPC endpoint sits in the
// VPC; EC2 refuses subnet and VPC deletes meanwhile. Destroy removes them
// (only in the cluster's own VPC), waits through the cluster's ACTIVE and
// DELETING reads and a ClientException not-found, and leaves nothing; the
// cluster security group (random suffix) goes after the cluster.
func TestDeleteAfterEKSLeftovers(t *testing.T) {
	c, _ := standInClients(t)
	ctx := deadline(t)
	cl, err := c.CreateCluster(ctx, storageSpec("leftovers"))
	if err != nil {
		t.Fatal(err)
	}
	sgs, err := c.EC2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{GroupIds: []string{cl.ClusterSecurityGroupID}})
	if err != nil || len(sgs.SecurityGroups) != 1 || !regexp.MustCompile(`^eks-cluster-sg-leftovers-[0-9]{10}$`).MatchString(aws.ToString(sgs.SecurityGroups[0].GroupName)) {
		t.Fatalf("cluster security group %v (%v)", sgs, err)
	}
	if _, err := c.EC2.CreateVpcEndpoint(ctx, &ec2.CreateVpcEndpointInput{VpcId: aws.String(cl.Network.VPCID), ServiceName: aws.String("com.amazonaws.us-west-2.ecr.api"),
		VpcEndpointType: ec2types.VpcEndpointTypeInterface, SubnetIds: cl.Network.PrivateSubnetIDs[:1]}); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteCluster(ctx, "leftovers"); err != nil {
		t.Fatalf("deleting: %v", err)
	}
	if n := countOwned(t, c, "leftovers"); n != 0 {
		t.Fatalf("%d owned parts left", n)
	}
	left, err := c.EC2.DescribeSecurityGroups(ctx, &ec2.DescribeSecurityGroupsInput{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(left.SecurityGroups, func(g ec2types.SecurityGroup) bool { return aws.ToString(g.GroupId) == cl.ClusterSecurityGroupID }) {
		t.Fatalf("cluster security group %s outlived the destroy", cl.ClusterSecurityGroupID)
	}
}

// TestFailedFileSystemReplaced: FSx reports a file system FAILED for good;
// the next create deletes it and makes a new one instead of adopting it.
func TestFailedFileSystemReplaced(t *testing.T) {
	c, standIn := standInClients(t)
	ctx := deadline(t)
	spec := storageSpec("fsx-failed")
	cl, err := c.CreateCluster(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	failed := cl.Storage.FileSystemID
	standIn.FileSystemFails(failed)
	if cl, err = c.CreateCluster(ctx, spec); err != nil {
		t.Fatalf("resuming with a FAILED file system: %v", err)
	}
	if cl.Storage.FileSystemID == failed || cl.Storage.Lifecycle != "AVAILABLE" {
		t.Fatalf("file system %s %s after resuming, want a new one instead of %s", cl.Storage.FileSystemID, cl.Storage.Lifecycle, failed)
	}
}

// TestIAMRetriesOnlyForRoles: an InvalidParameterException that says
// "does not exist" of something other than a role is no IAM propagation
// delay: the create ends at once instead of retrying to the deadline.
func TestIAMRetriesOnlyForRoles(t *testing.T) {
	c, standIn := standInClients(t)
	standIn.RejectWith("CreateCluster", "InvalidParameterException", "The subnet ID 'subnet-0abc' does not exist", 1)
	began := time.Now()
	_, err := c.CreateCluster(deadline(t), testSpec("iam-subnet"))
	if err == nil || !strings.Contains(err.Error(), "subnet-0abc' does not exist") || countCalls(standIn.Calls(), "CreateCluster") != 1 {
		t.Fatalf("after %s: %v (CreateCluster %d times), want the first rejection to end it", time.Since(began), err, countCalls(standIn.Calls(), "CreateCluster"))
	}
}
