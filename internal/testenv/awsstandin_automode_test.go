package testenv

import (
	"context"
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/smithy-go"
)

// TestStandInAutoMode: EKS's refusals of an Auto Mode configuration (not
// all three capabilities together, a node role without node pools, a new
// cluster bootstrapping the self-managed add-ons, turning off what is not
// on), DescribeCluster's report of it, the AutoModeUpdate that turns it on
// and off and takes effect only once done, and the instances Auto Mode ran
// terminated when it is turned off and when the cluster is deleted.
func TestStandInAutoMode(t *testing.T) {
	s := StartAWSStandIn(t, StartMoto(t))
	ctx := context.Background()
	cfg := motoConfig(t, s.URL)
	client, ec2c := eks.NewFromConfig(cfg), ec2.NewFromConfig(cfg)
	on := func(b bool) (*ekstypes.ComputeConfigRequest, *ekstypes.StorageConfigRequest, *ekstypes.KubernetesNetworkConfigRequest) {
		return &ekstypes.ComputeConfigRequest{Enabled: aws.Bool(b)}, &ekstypes.StorageConfigRequest{BlockStorage: &ekstypes.BlockStorage{Enabled: aws.Bool(b)}},
			&ekstypes.KubernetesNetworkConfigRequest{ElasticLoadBalancing: &ekstypes.ElasticLoadBalancing{Enabled: aws.Bool(b)}}
	}
	create := func(name string, edit func(*eks.CreateClusterInput)) error {
		in := &eks.CreateClusterInput{Name: aws.String(name), RoleArn: aws.String("arn:aws:iam::123456789012:role/eks"),
			ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: []string{"subnet-1", "subnet-2"}}}
		if edit != nil {
			edit(in)
		}
		_, err := client.CreateCluster(ctx, in)
		return err
	}
	refused := func(what string, err error, code, msg string) {
		t.Helper()
		var apiErr smithy.APIError
		if !errors.As(err, &apiErr) || apiErr.ErrorCode() != code || apiErr.ErrorMessage() != msg {
			t.Errorf("%s: %v, want %s: %s", what, err, code, msg)
		}
	}
	autoMode := func(name string) (compute, storage, elb bool) {
		t.Helper()
		out, err := client.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		cl := out.Cluster
		if cl.ComputeConfig == nil || cl.StorageConfig == nil || cl.StorageConfig.BlockStorage == nil || cl.KubernetesNetworkConfig == nil ||
			cl.KubernetesNetworkConfig.ElasticLoadBalancing == nil {
			return false, false, false
		}
		return aws.ToBool(cl.ComputeConfig.Enabled), aws.ToBool(cl.StorageConfig.BlockStorage.Enabled), aws.ToBool(cl.KubernetesNetworkConfig.ElasticLoadBalancing.Enabled)
	}
	// settle follows an update to its end and the cluster back to ACTIVE,
	// as a client waiting for it does.
	settle := func(name string, u *ekstypes.Update) {
		t.Helper()
		if u == nil || u.Type != ekstypes.UpdateTypeAutoModeUpdate || u.Status != ekstypes.UpdateStatusInProgress {
			t.Fatalf("update %+v, want an AutoModeUpdate InProgress", u)
		}
		done := false
		for i := 0; i < 10 && !done; i++ {
			got, err := client.DescribeUpdate(ctx, &eks.DescribeUpdateInput{Name: aws.String(name), UpdateId: u.Id})
			if err != nil {
				t.Fatal(err)
			}
			done = got.Update.Status == ekstypes.UpdateStatusSuccessful
		}
		for i := 0; i < 10 && done; i++ {
			got, err := client.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)})
			if err != nil {
				t.Fatal(err)
			}
			if got.Cluster.Status == ekstypes.ClusterStatusActive {
				return
			}
		}
		t.Fatalf("update %s of %s never finished", aws.ToString(u.Id), name)
	}
	plant := func(cluster string) string {
		t.Helper()
		out, err := ec2c.RunInstances(ctx, &ec2.RunInstancesInput{ImageId: aws.String("ami-12c6146b"), InstanceType: ec2types.InstanceTypeG5Xlarge,
			MinCount: aws.Int32(1), MaxCount: aws.Int32(1), TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeInstance,
				Tags: []ec2types.Tag{{Key: aws.String(autoModeClusterTag), Value: aws.String(cluster)}, {Key: aws.String(autoModeNodePoolTag), Value: aws.String("gpu")}}}}})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.Instances[0].InstanceId)
	}
	state := func(id string) ec2types.InstanceStateName {
		t.Helper()
		out, err := ec2c.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
		if err != nil || len(out.Reservations) == 0 {
			t.Fatalf("describing %s: %v", id, err)
		}
		return out.Reservations[0].Instances[0].State.Name
	}

	refused("compute alone", create("a", func(in *eks.CreateClusterInput) {
		in.ComputeConfig, _, _ = on(true)
		in.BootstrapSelfManagedAddons = aws.Bool(false)
	}), "InvalidParameterException", autoModeAllOrNone)
	refused("a node role without node pools", create("a", func(in *eks.CreateClusterInput) {
		in.ComputeConfig, in.StorageConfig, in.KubernetesNetworkConfig = on(true)
		in.ComputeConfig.NodeRoleArn = aws.String("arn:aws:iam::123456789012:role/node")
		in.BootstrapSelfManagedAddons = aws.Bool(false)
	}), "InvalidParameterException", autoModeRoleNoPools)
	refused("self-managed add-ons", create("a", func(in *eks.CreateClusterInput) {
		in.ComputeConfig, in.StorageConfig, in.KubernetesNetworkConfig = on(true)
	}), "InvalidParameterException", autoModeBootstrap)

	if err := create("auto", func(in *eks.CreateClusterInput) {
		in.ComputeConfig, in.StorageConfig, in.KubernetesNetworkConfig = on(true)
		in.BootstrapSelfManagedAddons = aws.Bool(false)
	}); err != nil {
		t.Fatal(err)
	}
	if err := create("plain", nil); err != nil {
		t.Fatal(err)
	}
	if c, st, elb := autoMode("auto"); !c || !st || !elb || !s.AutoModeEnabled("auto") {
		t.Errorf("auto: compute %v, block storage %v, load balancing %v, AutoModeEnabled %v; want all on", c, st, elb, s.AutoModeEnabled("auto"))
	}
	if c, _, _ := autoMode("plain"); c || s.AutoModeEnabled("plain") {
		t.Errorf("plain: Auto Mode on")
	}

	update := func(name string, edit func(*eks.UpdateClusterConfigInput)) (*ekstypes.Update, error) {
		in := &eks.UpdateClusterConfigInput{Name: aws.String(name)}
		edit(in)
		out, err := client.UpdateClusterConfig(ctx, in)
		if err != nil {
			return nil, err
		}
		return out.Update, nil
	}
	_, err := update("plain", func(in *eks.UpdateClusterConfigInput) {
		in.ComputeConfig, in.StorageConfig, in.KubernetesNetworkConfig = on(false)
	})
	refused("turning off what is off", err, "InvalidRequestException", autoModeNotEnabled)
	_, err = update("plain", func(in *eks.UpdateClusterConfigInput) { in.ComputeConfig, in.StorageConfig, _ = on(true) })
	refused("load balancing left out", err, "InvalidParameterException", autoModeAllOrNone)

	u, err := update("plain", func(in *eks.UpdateClusterConfigInput) {
		in.ComputeConfig, in.StorageConfig, in.KubernetesNetworkConfig = on(true)
	})
	if err != nil {
		t.Fatal(err)
	}
	if s.AutoModeEnabled("plain") {
		t.Error("plain: Auto Mode on before its update finished")
	}
	settle("plain", u)
	if c, st, elb := autoMode("plain"); !c || !st || !elb || !s.AutoModeEnabled("plain") {
		t.Errorf("plain after the update: compute %v, block storage %v, load balancing %v; want all on", c, st, elb)
	}

	node := plant("plain")
	u, err = update("plain", func(in *eks.UpdateClusterConfigInput) {
		in.ComputeConfig, in.StorageConfig, in.KubernetesNetworkConfig = on(false)
	})
	if err != nil {
		t.Fatal(err)
	}
	settle("plain", u)
	if c, _, _ := autoMode("plain"); c || s.AutoModeEnabled("plain") {
		t.Error("plain: Auto Mode still on after it was turned off")
	}
	if st := state(node); st != ec2types.InstanceStateNameTerminated && st != ec2types.InstanceStateNameShuttingDown {
		t.Errorf("Auto Mode's instance is %s after Auto Mode was turned off", st)
	}

	node = plant("auto")
	if _, err := client.DeleteCluster(ctx, &eks.DeleteClusterInput{Name: aws.String("auto")}); err != nil {
		t.Fatal(err)
	}
	if st := state(node); st != ec2types.InstanceStateNameTerminated && st != ec2types.InstanceStateNameShuttingDown {
		t.Errorf("Auto Mode's instance is %s after its cluster was deleted", st)
	}
}
