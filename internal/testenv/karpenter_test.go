package testenv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// TestKarpenterFollowsGPUPods proves the Karpenter ground: the real
// controller (KarpenterVersion's kwok build) resolves an EC2NodeClass
// against the AWS stand-in (subnets and security groups by discovery tag
// in moto, the AL2023 NVIDIA AMI through EKS's public SSM parameter, an
// instance profile for the node role, On-Demand prices from the Price
// List), launches g5.xlarge nodes with one nvidia.com/gpu each for pending
// GPU pods up to the NodePool's GPU limit, and consolidates them away once
// the pods are gone.
func TestKarpenterFollowsGPUPods(t *testing.T) {
	m := StartMoto(t)
	c := StartCluster(t)
	s := StartAWSStandIn(t, m)
	ctx := context.Background()
	const cluster = "karpenter-ground"
	s.PointClusterAt(cluster, c)
	cfg := motoConfig(t, s.URL)
	e := ec2.NewFromConfig(cfg)
	discovery := []ec2types.Tag{{Key: aws.String("karpenter.sh/discovery"), Value: aws.String(cluster)}}
	vpc, err := e.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.0.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	var subnets []string
	for i, zone := range []string{"us-west-2a", "us-west-2b"} {
		sn, err := e.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String(fmt.Sprintf("10.0.%d.0/24", i)), AvailabilityZone: aws.String(zone),
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSubnet, Tags: discovery}}})
		if err != nil {
			t.Fatal(err)
		}
		subnets = append(subnets, aws.ToString(sn.Subnet.SubnetId))
	}
	if _, err := e.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String(cluster + "-nodes"), Description: aws.String("nodes"), VpcId: vpc.Vpc.VpcId,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSecurityGroup, Tags: discovery}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := iam.NewFromConfig(cfg).CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(cluster + "-node"),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := eks.NewFromConfig(cfg).CreateCluster(ctx, &eks.CreateClusterInput{Name: aws.String(cluster), RoleArn: aws.String("arn:aws:iam::123456789012:role/eks"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: subnets}}); err != nil {
		t.Fatal(err)
	}
	c.InstallKarpenterCRDs(t)
	// Karpenter's own settings (the chart's settings.batchMaxDuration and
	// batchIdleDuration): a shorter batch window than the 10 s default.
	k := StartKarpenter(t, c, s, "CLUSTER_NAME="+cluster, "BATCH_MAX_DURATION=2s", "BATCH_IDLE_DURATION=200ms")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Karpenter:\n%s", k.Logs())
		}
	})

	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	nodeClasses := dyn.Resource(schema.GroupVersionResource{Group: "karpenter.k8s.aws", Version: "v1", Resource: "ec2nodeclasses"})
	nodePools := dyn.Resource(schema.GroupVersionResource{Group: "karpenter.sh", Version: "v1", Resource: "nodepools"})
	for _, o := range []struct {
		client dynamic.NamespaceableResourceInterface
		doc    string
	}{{nodeClasses, `
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: ground-gpu}
spec:
  role: ` + cluster + `-node
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: ` + cluster + `}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: ` + cluster + `}}]
`}, {nodePools, `
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: ground-gpu}
spec:
  template:
    metadata: {labels: {llmd.dev/pool: ground-gpu}}
    spec:
      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: ground-gpu}
      requirements:
      - {key: node.kubernetes.io/instance-type, operator: In, values: [g5.xlarge]}
      - {key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}
      taints: [{key: nvidia.com/gpu, value: "true", effect: NoSchedule}]
  limits: {nvidia.com/gpu: "3"}
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 0s}
`}} {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(o.doc), &obj.Object); err != nil {
			t.Fatal(err)
		}
		if _, err := o.client.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = o.client.Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{}) })
	}

	ns := c.Namespace(t)
	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "vllm"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "vllm"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "vllm"}}, Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"llmd.dev/pool": "ground-gpu"},
			Tolerations:  []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Containers:   []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai", Resources: corev1.ResourceRequirements{Requests: gpu, Limits: gpu}}}}}}}
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	scale := func(n int32) {
		s, err := c.Client.AppsV1().Deployments(ns).GetScale(ctx, "vllm", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.Spec.Replicas = n
		if _, err := c.Client.AppsV1().Deployments(ns).UpdateScale(ctx, "vllm", s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// state is the pool's nodes and the pods running and pending.
	state := func() (nodes []corev1.Node, running, pending int) {
		list, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "karpenter.sh/nodepool=ground-gpu"})
		if err != nil {
			t.Fatal(err)
		}
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=vllm"})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			switch {
			case p.DeletionTimestamp != nil:
			case p.Status.Phase == corev1.PodRunning:
				running++
			case p.Status.Phase == corev1.PodPending:
				pending++
			}
		}
		return list.Items, running, pending
	}
	// wait is waitFor on state, returning how long it took; a timeout
	// shows the nodes and the pods, and a failed test Karpenter's log.
	wait := func(what string, done func(nodes []corev1.Node, running, pending int) bool) time.Duration {
		t.Helper()
		began := time.Now()
		waitFor(t, 2*time.Minute, what, func() (bool, string) {
			nodes, running, pending := state()
			var names []string
			for _, n := range nodes {
				names = append(names, n.Name)
			}
			return done(nodes, running, pending), fmt.Sprintf("nodes %v, %d pods running, %d pending", names, running, pending)
		})
		return time.Since(began)
	}

	took := wait("two GPU nodes for two pods", func(nodes []corev1.Node, running, _ int) bool { return len(nodes) == 2 && running == 2 })
	t.Logf("2 pods: 2 nodes in %s", took.Round(time.Millisecond))
	nodes, _, _ := state()
	for _, n := range nodes {
		it, gpus := n.Labels["node.kubernetes.io/instance-type"], n.Status.Allocatable["nvidia.com/gpu"]
		zone, capacity := n.Labels["topology.kubernetes.io/zone"], n.Labels["karpenter.sh/capacity-type"]
		if it != "g5.xlarge" || gpus.Value() != 1 || !strings.HasPrefix(zone, "us-west-2") || capacity != "on-demand" || !hasTaint(n, "nvidia.com/gpu") {
			t.Errorf("node %s: type %q, %s GPUs, zone %q, capacity %q, taints %v; want a g5.xlarge On-Demand node with 1 GPU and the GPU taint",
				n.Name, it, gpus.String(), zone, capacity, n.Spec.Taints)
		}
	}

	// Four pods against a limit of three GPUs: three nodes, one pod waits.
	scale(4)
	took = wait("three nodes at the NodePool's GPU limit", func(nodes []corev1.Node, running, pending int) bool {
		return len(nodes) == 3 && running == 3 && pending == 1
	})
	t.Logf("4 pods: 3 nodes (the limit) in %s, one pod Pending", took.Round(time.Millisecond))

	scale(0)
	took = wait("consolidation once the pods are gone", func(nodes []corev1.Node, running, pending int) bool {
		return len(nodes) == 0 && running == 0 && pending == 0
	})
	t.Logf("0 pods: nodes consolidated away in %s", took.Round(time.Millisecond))
}

func hasTaint(n corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}
