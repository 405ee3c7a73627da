package testenv

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
)

// TestMotoEKSClusterAndGPUNodeGroup proves the AWS ground: a VPC, an IAM role, an
// EKS cluster and a g5.xlarge node group with a GPU taint, created and read back
// through aws-sdk-go-v2 against moto_server.
func TestMotoEKSClusterAndGPUNodeGroup(t *testing.T) {
	m := StartMoto(t)
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx,
		config.WithRegion(Region),
		config.WithBaseEndpoint(m.URL),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, "")))
	if err != nil {
		t.Fatal(err)
	}
	ec2c, iamc, eksc := ec2.NewFromConfig(cfg), iam.NewFromConfig(cfg), eks.NewFromConfig(cfg)

	vpc, err := ec2c.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.0.0.0/16")})
	if err != nil {
		t.Fatalf("creating VPC: %v", err)
	}
	var subnets []string
	for i, az := range []string{"us-west-2a", "us-west-2b"} {
		sn, err := ec2c.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String([]string{"10.0.0.0/20", "10.0.16.0/20"}[i]), AvailabilityZone: aws.String(az)})
		if err != nil {
			t.Fatalf("creating subnet in %s: %v", az, err)
		}
		subnets = append(subnets, aws.ToString(sn.Subnet.SubnetId))
	}
	role, err := iamc.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("smoke-cluster"), AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"eks.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)})
	if err != nil {
		t.Fatalf("creating IAM role: %v", err)
	}
	if _, err := iamc.AttachRolePolicy(ctx, &iam.AttachRolePolicyInput{RoleName: role.Role.RoleName, PolicyArn: aws.String("arn:aws:iam::aws:policy/AmazonEKSClusterPolicy")}); err != nil {
		t.Fatalf("attaching AmazonEKSClusterPolicy (needs MOTO_IAM_LOAD_MANAGED_POLICIES): %v", err)
	}
	cl, err := eksc.CreateCluster(ctx, &eks.CreateClusterInput{
		Name: aws.String("smoke"), RoleArn: role.Role.Arn, Version: aws.String("1.32"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: subnets},
	})
	if err != nil {
		t.Fatalf("creating EKS cluster: %v", err)
	}
	if cl.Cluster.Status != ekstypes.ClusterStatusActive && cl.Cluster.Status != ekstypes.ClusterStatusCreating {
		t.Fatalf("cluster status %s", cl.Cluster.Status)
	}
	_, err = eksc.CreateNodegroup(ctx, &eks.CreateNodegroupInput{
		ClusterName: aws.String("smoke"), NodegroupName: aws.String("gpu"), NodeRole: role.Role.Arn, Subnets: subnets,
		InstanceTypes: []string{"g5.xlarge"}, AmiType: ekstypes.AMITypesAl2023X8664Nvidia,
		ScalingConfig: &ekstypes.NodegroupScalingConfig{DesiredSize: aws.Int32(8), MinSize: aws.Int32(8), MaxSize: aws.Int32(8)},
		Labels:        map[string]string{"llmd.dev/pool": "gpu"},
		Taints:        []ekstypes.Taint{{Key: aws.String("nvidia.com/gpu"), Value: aws.String("true"), Effect: ekstypes.TaintEffectNoSchedule}},
	})
	if err != nil {
		t.Fatalf("creating node group: %v", err)
	}
	ng, err := eksc.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: aws.String("smoke"), NodegroupName: aws.String("gpu")})
	if err != nil {
		t.Fatalf("describing node group: %v", err)
	}
	got := ng.Nodegroup
	if len(got.InstanceTypes) != 1 || got.InstanceTypes[0] != "g5.xlarge" || aws.ToInt32(got.ScalingConfig.DesiredSize) != 8 ||
		len(got.Taints) != 1 || aws.ToString(got.Taints[0].Key) != "nvidia.com/gpu" || got.Labels["llmd.dev/pool"] != "gpu" {
		t.Fatalf("node group read back as %+v", got)
	}
	if err := m.Reset(); err != nil {
		t.Fatal(err)
	}
	if _, err := eksc.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String("smoke")}); err == nil {
		t.Fatal("cluster still exists after moto reset")
	}
}
