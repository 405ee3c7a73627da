package awsinfra

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// TestAutoModeParts follows one cluster through compute modes against moto
// and the stand-in: refused with Karpenter too; created with EKS Auto Mode
// (no GPU node group; the three capabilities on, the cluster role's Auto
// Mode policies, the node role and its EC2 access entry with
// AmazonEKSAutoNodePolicy) and read back in few calls; switched to the GPU
// node group (Auto Mode off, its parts and instances gone) and back;
// deleted (nothing owned left).
func TestAutoModeParts(t *testing.T) {
	c, standIn := standInClients(t)
	ctx := context.Background()
	const name = "auto"
	spec := testSpec(name)
	spec.GPU.DesiredSize, spec.GPU.MinSize, spec.GPU.MaxSize = 1, 0, 2
	spec.AutoMode = true

	both := spec
	both.Karpenter = &KarpenterSpec{Namespace: "kube-system", ServiceAccount: "karpenter"}
	if _, err := c.CreateCluster(ctx, both); err == nil || !strings.Contains(err.Error(), "both Karpenter and EKS Auto Mode") {
		t.Fatalf("creating with Karpenter and Auto Mode: %v, want a refusal naming both", err)
	}

	cl, err := c.CreateCluster(ctx, spec)
	if err != nil {
		t.Fatalf("creating with Auto Mode: %v", err)
	}
	want := AutoMode{NodeRoleName: name + "-us-west-2-auto-node", NodeRoleARN: "arn:aws:iam::123456789012:role/" + name + "-us-west-2-auto-node"}
	if cl.AutoMode == nil || *cl.AutoMode != want || cl.GPU != nil || nodeGroups(t, c, name) != "system" {
		t.Fatalf("read back Auto Mode %+v, GPU %+v, node groups %q; want %+v and the system node group alone", cl.AutoMode, cl.GPU, nodeGroups(t, c, name), want)
	}
	checkAutoModeParts(t, c, standIn, name, want)

	t.Run("a no-op read", func(t *testing.T) {
		standIn.ResetCalls()
		if _, err := c.FindClusterByName(ctx, name, spec.GPU.Name, spec.System.Name); err != nil {
			t.Fatal(err)
		}
		// Auto Mode's own: the node role (DescribeCluster has computeConfig).
		if n := countCalls(standIn.Calls(), "GetRole"); n > 2 {
			t.Errorf("the read made %d GetRole calls (Karpenter's controller role, Auto Mode's node role), want 2: %v", n, standIn.Calls())
		}
	})

	t.Run("to the GPU node group", func(t *testing.T) {
		node := plantAutoModeNode(t, c, name, cl.Network.PrivateSubnetIDs[0])
		updateToNodeGroup(t, c, spec)
		checkAutoModeGone(t, c, standIn, name, want)
		if left, err := c.autoModeNodes(ctx, name, liveStates...); err != nil || len(left) != 0 {
			t.Errorf("Auto Mode's instance %s left after Auto Mode was turned off: %d (%v)", node, len(left), err)
		}
	})

	t.Run("back to Auto Mode", func(t *testing.T) {
		if got := updateFromNodeGroup(t, c, spec); got.AutoMode == nil || *got.AutoMode != want {
			t.Fatalf("Auto Mode %+v after the switch back, want %+v", got.AutoMode, want)
		}
		checkAutoModeParts(t, c, standIn, name, want)
	})

	t.Run("delete", func(t *testing.T) {
		plantAutoModeNode(t, c, name, cl.Network.PrivateSubnetIDs[0])
		deleteLeavesNothing(t, c, name)
	})
}

// checkAutoModeParts checks every AWS part of the cluster's Auto Mode.
func checkAutoModeParts(t *testing.T, c *Clients, standIn *testenv.AWSStandIn, cluster string, a AutoMode) {
	t.Helper()
	ctx := context.Background()
	got, err := c.EKS.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(cluster)})
	if err != nil {
		t.Fatal(err)
	}
	cl := got.Cluster
	if !autoModeOn(cl) || cl.ComputeConfig.NodeRoleArn != nil || len(cl.ComputeConfig.NodePools) != 0 || !aws.ToBool(cl.StorageConfig.BlockStorage.Enabled) ||
		!aws.ToBool(cl.KubernetesNetworkConfig.ElasticLoadBalancing.Enabled) || !standIn.AutoModeEnabled(cluster) {
		t.Errorf("cluster reports compute %+v, storage %+v, network %+v; want the three on, no node pools", cl.ComputeConfig, cl.StorageConfig, cl.KubernetesNetworkConfig)
	}
	if doc := roleTrust(t, c, a.NodeRoleName); !strings.Contains(doc, `"ec2.amazonaws.com"`) {
		t.Errorf("node role trust %s, want EC2", doc)
	}
	if names, want := attachedPolicies(t, c, a.NodeRoleName), []string{"AmazonEC2ContainerRegistryPullOnly", "AmazonEKSWorkerNodeMinimalPolicy"}; !slices.Equal(names, want) {
		t.Errorf("node role policies %v, want %v", names, want)
	}
	tags, err := c.IAM.ListRoleTags(ctx, &iam.ListRoleTagsInput{RoleName: aws.String(a.NodeRoleName)})
	if err != nil || !c.ownsRole(fromIAMTags(tags.Tags), cluster) {
		t.Errorf("node role tags %v (%v), want the cluster's owner tags", tags, err)
	}
	clusterRole := roleName(cluster, testenv.Region, clusterRole)
	if names, want := attachedPolicies(t, c, clusterRole), []string{"AmazonEKSBlockStoragePolicy", "AmazonEKSClusterPolicy", "AmazonEKSComputePolicy",
		"AmazonEKSLoadBalancingPolicy", "AmazonEKSNetworkingPolicy"}; !slices.Equal(names, want) {
		t.Errorf("cluster role policies %v, want %v", names, want)
	}
	if doc := roleTrust(t, c, clusterRole); !strings.Contains(doc, "sts:TagSession") {
		t.Errorf("cluster role trust %s, want sts:TagSession", doc)
	}
	if got := standIn.AccessEntryType(cluster, a.NodeRoleARN); got != "EC2" {
		t.Errorf("node role access entry of type %q, want EC2", got)
	}
	pols, err := c.EKS.ListAssociatedAccessPolicies(ctx, &eks.ListAssociatedAccessPoliciesInput{ClusterName: aws.String(cluster), PrincipalArn: aws.String(a.NodeRoleARN)})
	if err != nil || len(pols.AssociatedAccessPolicies) != 1 || aws.ToString(pols.AssociatedAccessPolicies[0].PolicyArn) != autoNodePolicy("aws") ||
		pols.AssociatedAccessPolicies[0].AccessScope.Type != "cluster" {
		t.Errorf("node role entry's access policies %+v (%v), want AmazonEKSAutoNodePolicy at cluster scope", pols, err)
	}
	if entries, err := c.findAccessEntries(ctx, cluster); err != nil || len(entries) != 0 {
		t.Errorf("access_entries reads %v (%v): the node role's entry is not the user's", entries, err)
	}
}

// checkAutoModeGone checks that the cluster runs without Auto Mode and
// none of its parts is left.
func checkAutoModeGone(t *testing.T, c *Clients, standIn *testenv.AWSStandIn, cluster string, a AutoMode) {
	t.Helper()
	if standIn.AutoModeEnabled(cluster) {
		t.Error("Auto Mode still on")
	}
	if _, err := c.IAM.GetRole(context.Background(), &iam.GetRoleInput{RoleName: aws.String(a.NodeRoleName)}); !isNotFound(err) {
		t.Errorf("IAM role %s: %v, want it gone", a.NodeRoleName, err)
	}
	if got := standIn.AccessEntryType(cluster, a.NodeRoleARN); got != "" {
		t.Errorf("node role access entry of type %q left", got)
	}
	if names := attachedPolicies(t, c, roleName(cluster, testenv.Region, clusterRole)); !slices.Equal(names, []string{"AmazonEKSClusterPolicy"}) {
		t.Errorf("cluster role policies %v, want AmazonEKSClusterPolicy alone", names)
	}
}

// plantAutoModeNode does what a running Auto Mode does: launches an
// instance with Auto Mode's tags; it returns the instance's id.
func plantAutoModeNode(t *testing.T, c *Clients, cluster, subnet string) string {
	t.Helper()
	ctx := context.Background()
	out, err := c.EC2.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String("ami-12c6146b"), InstanceType: ec2types.InstanceTypeG5Xlarge,
		MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
		// As plantKarpenterNodes: the primary interface goes with the instance.
		NetworkInterfaces: []ec2types.InstanceNetworkInterfaceSpecification{{DeviceIndex: aws.Int32(0), SubnetId: aws.String(subnet),
			DeleteOnTermination: aws.Bool(true)}},
		TagSpecifications: ec2TagSpec(ec2types.ResourceTypeInstance, map[string]string{eksClusterNameTag: cluster, autoModeNodePoolTag: "gpu",
			autoModeNodeClassTag: "gpu"})})
	if err != nil {
		t.Fatal(err)
	}
	if nodes, err := c.autoModeNodes(ctx, cluster, "pending", "running"); err != nil || len(nodes) != 1 {
		t.Fatalf("%d of Auto Mode's instances planted (%v), want 1", len(nodes), err)
	}
	return aws.ToString(out.Instances[0].InstanceId)
}
