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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
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
	const cluster = "karpenter-ground"
	g := newGPUGround(t, cluster, nil)
	g.c.InstallKarpenterCRDs(t)
	// Karpenter's own settings (the chart's settings.batchMaxDuration and
	// batchIdleDuration): a shorter batch window than the 10 s default.
	k := StartKarpenter(t, g.c, g.s, "CLUSTER_NAME="+cluster, "BATCH_MAX_DURATION=2s", "BATCH_IDLE_DURATION=200ms")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Karpenter:\n%s", k.Logs())
		}
	})
	g.create(t, ec2NodeClassResource, `
apiVersion: karpenter.k8s.aws/v1
kind: EC2NodeClass
metadata: {name: ground-gpu}
spec:
  role: `+cluster+`-node
  amiSelectorTerms: [{alias: al2023@latest}]
  subnetSelectorTerms: [{tags: {karpenter.sh/discovery: `+cluster+`}}]
  securityGroupSelectorTerms: [{tags: {karpenter.sh/discovery: `+cluster+`}}]
`)
	g.create(t, nodePoolResource, gpuNodePool("ground-gpu", "{group: karpenter.k8s.aws, kind: EC2NodeClass, name: ground-gpu}", 3))

	w, _ := g.twoGPUNodes(t, "ground-gpu")

	// Four pods against a limit of three GPUs: three nodes, one pod waits.
	w.scale(4)
	took := w.wait("three nodes at the NodePool's GPU limit", func(nodes []corev1.Node, running, pending int) bool {
		return len(nodes) == 3 && running == 3 && pending == 1
	})
	t.Logf("4 pods: 3 nodes (the limit) in %s, one pod Pending", took.Round(time.Millisecond))

	w.scale(0)
	took = w.wait("consolidation once the pods are gone", func(nodes []corev1.Node, running, pending int) bool {
		return len(nodes) == 0 && running == 0 && pending == 0
	})
	t.Logf("0 pods: nodes consolidated away in %s", took.Round(time.Millisecond))
}

// gpuNodePool is a NodePool of On-Demand g5.xlarge nodes on nodeClassRef
// (YAML), labelled llmd.dev/pool=<name> and tainted for GPU pods, up to
// gpus GPUs, consolidated as soon as they are empty or underused; extra
// requirements (YAML list items) are added.
func gpuNodePool(name, nodeClassRef string, gpus int, extra ...string) string {
	reqs := append([]string{"{key: node.kubernetes.io/instance-type, operator: In, values: [g5.xlarge]}",
		"{key: karpenter.sh/capacity-type, operator: In, values: [on-demand]}"}, extra...)
	return fmt.Sprintf(`
apiVersion: karpenter.sh/v1
kind: NodePool
metadata: {name: %[1]s}
spec:
  template:
    metadata: {labels: {llmd.dev/pool: %[1]s}}
    spec:
      nodeClassRef: %[2]s
      requirements: [%[3]s]
      taints: [{key: nvidia.com/gpu, value: "true", effect: NoSchedule}]
  limits: {nvidia.com/gpu: "%[4]d"}
  disruption: {consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 0s}
`, name, nodeClassRef, strings.Join(reqs, ", "), gpus)
}

// gpuGround is the AWS side of a cluster whose GPU nodes Karpenter
// launches, in the stand-in: a VPC with two subnets and a node security
// group (tagged karpenter.sh/discovery=<cluster>), the node role
// <cluster>-node, and the EKS cluster, pointed at the control plane.
type gpuGround struct {
	c             *Cluster
	s             *AWSStandIn
	dyn           dynamic.Interface
	subnets       []string
	securityGroup string
}

// newGPUGround makes a gpuGround; tweak, if not nil, completes the
// CreateCluster request.
func newGPUGround(t *testing.T, cluster string, tweak func(*eks.CreateClusterInput)) gpuGround {
	m := StartMoto(t)
	g := gpuGround{c: StartCluster(t)}
	g.s = StartAWSStandIn(t, m)
	ctx := context.Background()
	g.s.PointClusterAt(cluster, g.c)
	cfg := motoConfig(t, g.s.URL)
	e := ec2.NewFromConfig(cfg)
	discovery := []ec2types.Tag{{Key: aws.String("karpenter.sh/discovery"), Value: aws.String(cluster)}}
	vpc, err := e.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.0.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	for i, zone := range []string{"us-west-2a", "us-west-2b"} {
		sn, err := e.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, CidrBlock: aws.String(fmt.Sprintf("10.0.%d.0/24", i)), AvailabilityZone: aws.String(zone),
			TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSubnet, Tags: discovery}}})
		if err != nil {
			t.Fatal(err)
		}
		g.subnets = append(g.subnets, aws.ToString(sn.Subnet.SubnetId))
	}
	sg, err := e.CreateSecurityGroup(ctx, &ec2.CreateSecurityGroupInput{GroupName: aws.String(cluster + "-nodes"), Description: aws.String("nodes"), VpcId: vpc.Vpc.VpcId,
		TagSpecifications: []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeSecurityGroup, Tags: discovery}}})
	if err != nil {
		t.Fatal(err)
	}
	g.securityGroup = aws.ToString(sg.GroupId)
	if _, err := iam.NewFromConfig(cfg).CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(cluster + "-node"),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)}); err != nil {
		t.Fatal(err)
	}
	in := &eks.CreateClusterInput{Name: aws.String(cluster), RoleArn: aws.String("arn:aws:iam::123456789012:role/eks"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: g.subnets}}
	if tweak != nil {
		tweak(in)
	}
	if _, err := eks.NewFromConfig(cfg).CreateCluster(ctx, in); err != nil {
		t.Fatal(err)
	}
	if g.dyn, err = dynamic.NewForConfig(g.c.RESTConfig()); err != nil {
		t.Fatal(err)
	}
	return g
}

// create creates the object doc of resource r, deleted when the test ends.
func (g gpuGround) create(t *testing.T, r schema.GroupVersionResource, doc string) {
	t.Helper()
	obj := decode(t, doc)
	if _, err := g.dyn.Resource(r).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating %s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
	t.Cleanup(func() { _ = g.dyn.Resource(r).Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{}) })
}

// gpuPods is a Deployment "vllm" of one-GPU pods that tolerate the GPU
// taint and select the nodes labelled llmd.dev/pool=<pool>.
type gpuPods struct {
	t    *testing.T
	c    *Cluster
	ns   string
	pool string
}

// gpuPods starts replicas pods in a namespace of the test's.
func (g gpuGround) gpuPods(t *testing.T, pool string, replicas int32) gpuPods {
	t.Helper()
	w := gpuPods{t: t, c: g.c, ns: g.c.Namespace(t), pool: pool}
	gpu := corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "vllm"}, Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas),
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "vllm"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "vllm"}}, Spec: corev1.PodSpec{
			NodeSelector: map[string]string{"llmd.dev/pool": pool},
			Tolerations:  []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Containers:   []corev1.Container{{Name: "vllm", Image: "vllm/vllm-openai", Resources: corev1.ResourceRequirements{Requests: gpu, Limits: gpu}}}}}}}
	if _, err := g.c.Client.AppsV1().Deployments(w.ns).Create(context.Background(), dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return w
}

func (w gpuPods) scale(n int32) {
	// A merge patch on the scale subresource, as kubectl scale sends
	// without --resource-version: no precondition, so the Deployment
	// controller's status writes cannot make it conflict.
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
	if _, err := w.c.Client.AppsV1().Deployments(w.ns).Patch(context.Background(), "vllm", types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "scale"); err != nil {
		w.t.Fatal(err)
	}
}

// state is the pool's nodes and the pods running and pending.
func (w gpuPods) state() (nodes []corev1.Node, running, pending int) {
	ctx := context.Background()
	list, err := w.c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "llmd.dev/pool=" + w.pool})
	if err != nil {
		w.t.Fatal(err)
	}
	pods, err := w.c.Client.CoreV1().Pods(w.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=vllm"})
	if err != nil {
		w.t.Fatal(err)
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

// wait is waitFor on state, returning how long it took; a timeout shows
// the nodes and the pods.
func (w gpuPods) wait(what string, done func(nodes []corev1.Node, running, pending int) bool) time.Duration {
	w.t.Helper()
	began := time.Now()
	waitFor(w.t, 2*time.Minute, what, func() (bool, string) {
		nodes, running, pending := w.state()
		return done(nodes, running, pending), fmt.Sprintf("nodes %v, %d pods running, %d pending", nodeNames(nodes), running, pending)
	})
	return time.Since(began)
}

func nodeNames(nodes []corev1.Node) []string {
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	return names
}

// twoGPUNodes starts two GPU pods for the pool and waits until they run on
// two nodes, each an On-Demand g5.xlarge with one GPU, tainted for them.
func (g gpuGround) twoGPUNodes(t *testing.T, pool string) (gpuPods, []corev1.Node) {
	t.Helper()
	w := g.gpuPods(t, pool, 2)
	took := w.wait("two GPU nodes for two pods", func(nodes []corev1.Node, running, _ int) bool { return len(nodes) == 2 && running == 2 })
	t.Logf("2 pods: 2 nodes in %s", took.Round(time.Millisecond))
	nodes, _, _ := w.state()
	for _, n := range nodes {
		checkGPUNode(t, n)
	}
	return w, nodes
}

// checkGPUNode checks that n is an On-Demand g5.xlarge with one GPU in the
// region, tainted for GPU pods.
func checkGPUNode(t *testing.T, n corev1.Node) {
	t.Helper()
	it, gpus := n.Labels["node.kubernetes.io/instance-type"], n.Status.Allocatable["nvidia.com/gpu"]
	zone, capacity := n.Labels["topology.kubernetes.io/zone"], n.Labels["karpenter.sh/capacity-type"]
	if it != "g5.xlarge" || gpus.Value() != 1 || !strings.HasPrefix(zone, "us-west-2") || capacity != "on-demand" || !hasTaint(n, "nvidia.com/gpu") {
		t.Errorf("node %s: type %q, %s GPUs, zone %q, capacity %q, taints %v; want a g5.xlarge On-Demand node with 1 GPU and the GPU taint",
			n.Name, it, gpus.String(), zone, capacity, n.Spec.Taints)
	}
}

func hasTaint(n corev1.Node, key string) bool {
	for _, t := range n.Spec.Taints {
		if t.Key == key {
			return true
		}
	}
	return false
}
