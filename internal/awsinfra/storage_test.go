package awsinfra

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
)

// storageSpec is testSpec with the product's file system, an S3 import and
// every managed add-on.
func storageSpec(name string) ClusterSpec {
	s := testSpec(name)
	s.Storage = &StorageSpec{DeploymentType: DeploymentScratch2, StorageCapacityGiB: 1200, FileSystemTypeVersion: "2.15",
		S3ImportURI: "s3://weights/qwen/", AutoImport: true}
	s.GPU.ColocateWithStorage = true
	for _, a := range KnownAddons {
		s.Addons = append(s.Addons, AddonSpec{Name: a.Name, ResolveConflicts: "OVERWRITE"})
	}
	return s
}

// TestCreateOverlapsStorageAndControlPlane: the file system and the EKS
// control plane are created side by side: the stand-in holds the file system
// in CREATING until the control plane is ACTIVE (a create that waited for the
// file system first would never finish), and its timeline shows the file
// system created before the control plane was ACTIVE and the control plane
// created before the file system was AVAILABLE. The
// file system's security group holds exactly Lustre's ports from itself and
// from the cluster security group; the S3 association is created with auto
// import and waited for; the GPU nodes sit in the file system's subnet; the
// add-ons get the stand-in's default versions for 1.33; delete leaves
// nothing of the cluster.
func TestCreateOverlapsStorageAndControlPlane(t *testing.T) {
	c, standIn := standInClients(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const name = "fsx-overlap"
	standIn.ClusterStatus(name, "CREATING", 10)
	standIn.FileSystemAvailableAfter("cluster " + name + " ACTIVE")
	cl, err := c.CreateCluster(ctx, storageSpec(name))
	if err != nil {
		t.Fatalf("creating: %v", err)
	}
	st := cl.Storage
	if st == nil || !strings.HasPrefix(st.FileSystemID, "fs-") || st.MountName == "" || st.DNSName == "" || st.Lifecycle != "AVAILABLE" ||
		st.AvailabilityZone != "us-west-2a" || st.DeploymentType != DeploymentScratch2 || st.FileSystemTypeVersion != "2.15" {
		t.Fatalf("file system read back as %+v", st)
	}
	at := func(what string) string {
		ts, ok := standIn.EventTime(what)
		if !ok {
			t.Fatalf("the stand-in never saw %q; timeline %v", what, standIn.Timeline())
		}
		return ts.Format("15:04:05.000000")
	}
	fsCreated, fsAvailable := at("CreateFileSystem "+st.FileSystemID), at(st.FileSystemID+" AVAILABLE")
	clCreated, clActive := at("CreateCluster "+name), at("cluster "+name+" ACTIVE")
	t.Logf("file system %s .. %s, control plane %s .. %s", fsCreated, fsAvailable, clCreated, clActive)
	if !(fsCreated < clActive && clCreated < fsAvailable) {
		t.Fatalf("file system (%s .. %s) and control plane (%s .. %s) were not created at the same time", fsCreated, fsAvailable, clCreated, clActive)
	}
	if cl.ClusterSecurityGroupID == "" {
		t.Fatal("the stand-in reports no cluster security group")
	}
	rules, err := c.EC2.DescribeSecurityGroupRules(ctx, &ec2.DescribeSecurityGroupRulesInput{Filters: []ec2types.Filter{ec2Filter("group-id", st.SecurityGroupID)}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rules.SecurityGroupRules {
		if aws.ToBool(r.IsEgress) {
			continue
		}
		src := "?"
		if r.ReferencedGroupInfo != nil {
			src = map[string]string{st.SecurityGroupID: "self", cl.ClusterSecurityGroupID: "cluster"}[aws.ToString(r.ReferencedGroupInfo.GroupId)]
		}
		got = append(got, fmt.Sprintf("%s %d-%d from %s", aws.ToString(r.IpProtocol), aws.ToInt32(r.FromPort), aws.ToInt32(r.ToPort), src))
	}
	slices.Sort(got)
	want := []string{"tcp 1018-1023 from cluster", "tcp 1018-1023 from self", "tcp 988-988 from cluster", "tcp 988-988 from self"}
	if !slices.Equal(got, want) {
		t.Fatalf("inbound rules of the file system's group: %v, want %v", got, want)
	}
	dras := standIn.Associations(st.FileSystemID)
	if len(dras) != 1 || dras[0]["Lifecycle"] != "AVAILABLE" || dras[0]["DataRepositoryPath"] != "s3://weights/qwen/" || dras[0]["FileSystemPath"] != "/" ||
		dras[0]["BatchImportMetaDataOnCreate"] != true || !strings.Contains(fmt.Sprint(dras[0]["S3"]), "NEW CHANGED DELETED") {
		t.Fatalf("associations %v", dras)
	}
	if st.AssociationID == "" || st.S3ImportURI != "s3://weights/qwen/" || !st.AutoImport {
		t.Fatalf("association read back as %+v", st)
	}
	if !slices.Equal(cl.GPU.Subnets, []string{st.SubnetID}) || len(cl.System.Subnets) != 2 {
		t.Fatalf("GPU nodes in %v, system nodes in %v; the file system is in %s", cl.GPU.Subnets, cl.System.Subnets, st.SubnetID)
	}
	versions := map[string]string{}
	for _, a := range cl.Addons {
		if a.Status != "ACTIVE" {
			t.Fatalf("add-on %s is %s", a.Name, a.Status)
		}
		versions[a.Name] = a.Version
	}
	wantVersions := map[string]string{"vpc-cni": "v1.19.5-eksbuild.1", "kube-proxy": "v1.33.0-eksbuild.1", "coredns": "v1.11.4-eksbuild.2",
		"eks-pod-identity-agent": "v1.3.7-eksbuild.2", "aws-fsx-csi-driver": "v1.5.0-eksbuild.1"}
	if fmt.Sprint(versions) != fmt.Sprint(wantVersions) {
		t.Fatalf("add-on versions %v, want %v", versions, wantVersions)
	}
	// Networking and pod identity go in beside the node groups (they need no
	// nodes); coredns and the CSI driver only once the node groups are up.
	calls := standIn.Calls()
	lastNodegroup := -1
	for i, call := range calls {
		if call == "CreateNodegroup" {
			lastNodegroup = i
		}
	}
	if after := strings.Count(strings.Join(calls[lastNodegroup+1:], " "), "CreateAddon"); after < 2 {
		t.Fatalf("%d add-ons created after the node groups, want at least coredns and the CSI driver: %v", after, calls)
	}
	if err := c.DeleteCluster(ctx, name); err != nil {
		t.Fatalf("deleting: %v", err)
	}
	if n := countOwned(t, c, name); n != 0 {
		t.Fatalf("%d parts left after delete", n)
	}
}

// TestUpdateWaitFollowsUpdateID: EKS reports a failed update only through
// DescribeUpdate; the update's error codes end the apply.
func TestUpdateWaitFollowsUpdateID(t *testing.T) {
	c, standIn := standInClients(t)
	ctx := context.Background()
	spec := testSpec("upd")
	if _, err := c.CreateCluster(ctx, spec); err != nil {
		t.Fatal(err)
	}
	standIn.FailNextUpdate("UpdateNodegroupConfig", "AsgInstanceLaunchFailures", "Could not launch On-Demand Instances. InsufficientInstanceCapacity")
	spec.GPU.DesiredSize, spec.GPU.MinSize = 4, 4
	_, err := c.UpdateCluster(ctx, spec)
	if err == nil || !strings.Contains(err.Error(), "is Failed: AsgInstanceLaunchFailures: Could not launch") {
		t.Fatalf("update error %v, want the failed update's error", err)
	}
	if n := countCalls(standIn.Calls(), "DescribeUpdate"); n < 2 {
		t.Fatalf("DescribeUpdate called %d times; the wait did not follow the update", n)
	}
}

// TestSameNameInTwoRegions: clusters of one name in two regions have IAM
// roles of their own (IAM is global); deleting one leaves the other's roles.
func TestSameNameInTwoRegions(t *testing.T) {
	west, standIn := standInClients(t)
	ctx := context.Background()
	east := clientsIn(t, standIn.URL, "us-east-1")
	eastSpec := testSpec("twin")
	eastSpec.Network.AvailabilityZones = []string{"us-east-1a", "us-east-1b"}
	if _, err := west.CreateCluster(ctx, testSpec("twin")); err != nil {
		t.Fatalf("creating in us-west-2: %v", err)
	}
	if _, err := east.CreateCluster(ctx, eastSpec); err != nil {
		t.Fatalf("creating in us-east-1: %v", err)
	}
	// The cluster's and the nodes' roles; the FSx CSI driver's exists only with the driver on.
	var roles []string
	for _, region := range []string{"us-west-2", "us-east-1"} {
		roles = append(roles, roleName("twin", region, clusterRole), roleName("twin", region, nodeRole))
	}
	if err := east.DeleteCluster(ctx, "twin"); err != nil {
		t.Fatalf("deleting in us-east-1: %v", err)
	}
	for i, r := range roles {
		_, err := west.IAM.GetRole(ctx, &iam.GetRoleInput{RoleName: aws.String(r)})
		if gone := isNotFound(err); gone != (i >= 2) {
			t.Fatalf("role %s: gone=%v (err %v) after deleting only the us-east-1 cluster", r, gone, err)
		}
	}
	if n := countOwned(t, west, "twin"); n != 15 {
		t.Fatalf("the us-west-2 cluster has %d parts after the us-east-1 delete, want 15", n)
	}
	if err := west.DeleteCluster(ctx, "twin"); err != nil {
		t.Fatal(err)
	}
}

// TestCreateRetriesIAMPropagation: EKS rejects a role IAM has not finished
// propagating with InvalidParameterException and messages like these (the
// ones terraform-provider-aws retries); create retries them and succeeds,
// while another InvalidParameterException ends it at once.
func TestCreateRetriesIAMPropagation(t *testing.T) {
	c, standIn := standInClients(t)
	ctx := context.Background()
	standIn.RejectWith("CreateCluster", "InvalidParameterException",
		"Role with arn: arn:aws:iam::123456789012:role/iam-wait-us-west-2-eks, could not be assumed because it does not exist or the trusted entity is not correct", 2)
	standIn.RejectWith("CreateNodegroup", "InvalidParameterException",
		"The provided role doesn't have the Amazon EKS Managed Policies associated with it. Please ensure the following policies are attached", 2)
	if _, err := c.CreateCluster(ctx, testSpec("iam-wait")); err != nil {
		t.Fatalf("creating while IAM propagates: %v", err)
	}
	calls := standIn.Calls()
	if n := countCalls(calls, "CreateCluster"); n != 3 {
		t.Fatalf("CreateCluster called %d times, want 2 rejected + 1", n)
	}
	if n := countCalls(calls, "CreateNodegroup"); n < 4 {
		t.Fatalf("CreateNodegroup called %d times, want the 2 rejected retried for both groups", n)
	}
	standIn.RejectWith("CreateCluster", "InvalidParameterException", "Subnets specified must be in at least two different AZs", 1)
	if _, err := c.CreateCluster(ctx, testSpec("iam-other")); err == nil || !strings.Contains(err.Error(), "at least two different AZs") {
		t.Fatalf("a non-IAM InvalidParameterException: %v, want it to end the create", err)
	}
}

// TestUpdateStorageAndAddonsInPlace: a capacity increase and a new S3 URI
// change the file system in place (same id, a new association), a disabled
// add-on is removed, and turning the file system off deletes it and its
// security group while the cluster and its node groups stay.
func TestUpdateStorageAndAddonsInPlace(t *testing.T) {
	c, standIn := standInClients(t)
	ctx := context.Background()
	spec := storageSpec("fsx-update")
	cl, err := c.CreateCluster(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	before := *cl.Storage
	spec.Storage.StorageCapacityGiB = 2400
	spec.Storage.S3ImportURI, spec.Storage.AutoImport = "s3://weights/llama/", false
	spec.Addons = slices.DeleteFunc(spec.Addons, func(a AddonSpec) bool { return a.Name == "aws-fsx-csi-driver" })
	cl, err = c.UpdateCluster(ctx, spec)
	if err != nil {
		t.Fatalf("updating: %v", err)
	}
	after := cl.Storage
	if after.FileSystemID != before.FileSystemID || after.StorageCapacityGiB != 2400 || after.S3ImportURI != "s3://weights/llama/" || after.AutoImport ||
		after.AssociationID == before.AssociationID {
		t.Fatalf("file system went from %+v to %+v", before, *after)
	}
	if dras := standIn.Associations(after.FileSystemID); len(dras) != 1 {
		t.Fatalf("associations after the change: %v", dras)
	}
	if countCalls(standIn.Calls(), "UpdateFileSystem") != 1 {
		t.Fatal("the capacity increase made no UpdateFileSystem call")
	}
	if standIn.Addon("fsx-update", "aws-fsx-csi-driver") != nil || len(cl.Addons) != len(KnownAddons)-1 {
		t.Fatalf("the disabled add-on is still installed: %v", cl.Addons)
	}
	spec.Storage = nil
	if cl, err = c.UpdateCluster(ctx, spec); err != nil {
		t.Fatalf("turning the file system off: %v", err)
	}
	if cl.Storage != nil || cl.ARN == "" {
		t.Fatalf("after turning it off: storage %+v, cluster %q", cl.Storage, cl.ARN)
	}
	// Without a file system to be near, the GPU nodes are not moved.
	if n := countCalls(standIn.Calls(), "DeleteNodegroup"); n != 0 {
		t.Fatalf("turning the file system off deleted %d node groups", n)
	}
	for _, p := range func() []OwnedPart { parts, _ := c.FindOwnedParts(ctx, "fsx-update"); return parts }() {
		if p.Kind == "fsx file-system" || p.Kind == "ec2 security-group" {
			t.Fatalf("%s %s left after turning the file system off", p.Kind, p.ID)
		}
	}
}
