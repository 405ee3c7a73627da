package testenv

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestAutoModeFollowsGPUPods proves the Auto Mode ground: with Auto Mode
// on, the NodeClass CRD is served and validates as the EKS guide says, and
// a NodeClass with a NodePool on it get two g5.xlarge nodes for two pending
// GPU pods (Bottlerocket through EKS's public SSM parameter, launched by the
// real Karpenter), labelled eks.amazonaws.com/compute-type=auto and with the
// NodePool's labels and taint; the NodePool's status turns Ready; and a
// NodeClass deleted after its NodePool stays, held by its finalizer, until
// its nodes are gone. With Auto Mode off, nothing holds a NodeClass.
func TestAutoModeFollowsGPUPods(t *testing.T) {
	const cluster = "automode-ground"
	g := newGPUGround(t, cluster, func(in *eks.CreateClusterInput) {
		// How a client turns Auto Mode on (EKS User Guide, "Create an
		// EKS Auto Mode Cluster with the AWS CLI"): compute, block
		// storage and load balancing together, here with no built-in
		// node pools (so no node role in computeConfig) and without the
		// self-managed add-ons, as EKS requires.
		in.ComputeConfig = &ekstypes.ComputeConfigRequest{Enabled: aws.Bool(true)}
		in.BootstrapSelfManagedAddons = aws.Bool(false)
		in.StorageConfig = &ekstypes.StorageConfigRequest{BlockStorage: &ekstypes.BlockStorage{Enabled: aws.Bool(true)}}
		in.KubernetesNetworkConfig = &ekstypes.KubernetesNetworkConfigRequest{ElasticLoadBalancing: &ekstypes.ElasticLoadBalancing{Enabled: aws.Bool(true)}}
	})
	if !g.s.AutoModeEnabled(cluster) {
		t.Fatal("the stand-in reports Auto Mode off for a cluster created with it on")
	}
	PlayAutoMode(t, g.c, g.s, cluster)
	ctx := context.Background()
	nodeClasses, nodePools := g.dyn.Resource(nodeClassResource), g.dyn.Resource(nodePoolResource)
	waitFor(t, time.Minute, "the NodeClass CRD served", func() (bool, string) {
		_, err := nodeClasses.List(ctx, metav1.ListOptions{})
		return err == nil, errString(err)
	})

	nodeClass := `
apiVersion: eks.amazonaws.com/v1
kind: NodeClass
metadata: {name: auto-gpu}
spec:
  role: ` + cluster + `-node
  subnetSelectorTerms: [{id: ` + g.subnets[0] + `}, {id: ` + g.subnets[1] + `}]
  securityGroupSelectorTerms: [{id: ` + g.securityGroup + `}]
  ephemeralStorage: {size: 200Gi}
  tags: {llmd.dev/cluster: ` + cluster + `}
`
	// The CRD refuses what the guide rules out.
	for _, bad := range []struct{ from, to, want string }{
		{"  role: " + cluster + "-node\n", "", "spec.role: Required value"},
		{"{size: 200Gi}", "{size: 200Gi, iops: 2000}", "spec.ephemeralStorage.iops"},
		{"  tags:", "  snatPolicy: Sometimes\n  tags:", "spec.snatPolicy: Unsupported value"},
	} {
		obj := decode(t, strings.Replace(nodeClass, bad.from, bad.to, 1))
		_, err := nodeClasses.Create(ctx, obj, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("a NodeClass with %q: got %v, want an invalid object (%s)", bad.to, err, bad.want)
		}
	}
	g.create(t, nodeClassResource, nodeClass)
	g.create(t, nodePoolResource, gpuNodePool("auto-gpu", "{group: eks.amazonaws.com, kind: NodeClass, name: auto-gpu}", 2,
		"{key: eks.amazonaws.com/instance-gpu-manufacturer, operator: In, values: [nvidia]}"))

	// status is the NodePool's and the NodeClass's, the pool's GPUs and
	// whether both are Ready for their generation.
	status := func() (ready bool, gpus, state string) {
		np, err := nodePools.Get(ctx, "auto-gpu", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		nc, err := nodeClasses.Get(ctx, "auto-gpu", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		gpus, _, _ = unstructured.NestedString(np.Object, "status", "resources", "nvidia.com/gpu")
		return readyAt(np) && readyAt(nc), gpus, yamlOf(np.Object["status"]) + yamlOf(nc.Object["status"])
	}
	// Pods come once the pool is Ready: Karpenter looks again for pods a
	// pool that was not ready left only every 10 s.
	waitFor(t, time.Minute, "the NodePool and the NodeClass Ready", func() (bool, string) {
		ready, _, state := status()
		return ready, state
	})
	w, nodes := g.twoGPUNodes(t, "auto-gpu")
	for _, n := range nodes {
		if n.Labels[autoModeComputeTypeLabel] != "auto" {
			t.Errorf("node %s: labels %v, want %s=auto", n.Name, n.Labels, autoModeComputeTypeLabel)
		}
	}
	waitFor(t, 30*time.Second, "the NodePool's status counting 2 GPUs", func() (bool, string) {
		ready, gpus, state := status()
		return ready && gpus == "2", state
	})
	nc, err := nodeClasses.Get(ctx, "auto-gpu", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if iops, _, _ := unstructured.NestedInt64(nc.Object, "spec", "ephemeralStorage", "iops"); iops != 3000 || !slices.Contains(nc.GetFinalizers(), autoModeFinalizer) {
		t.Errorf("NodeClass: iops %d, finalizers %v; want the default 3000 and %s", iops, nc.GetFinalizers(), autoModeFinalizer)
	}

	// The NodePool goes, then its NodeClass: the NodeClass is held until
	// Karpenter has terminated the nodes.
	began := time.Now()
	if err := nodePools.Delete(ctx, "auto-gpu", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := nodeClasses.Delete(ctx, "auto-gpu", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	nc, err = nodeClasses.Get(ctx, "auto-gpu", metav1.GetOptions{})
	if nodes, _, _ := w.state(); err != nil || nc.GetDeletionTimestamp() == nil || len(nodes) == 0 {
		t.Errorf("right after the deletes: NodeClass %v (%v), nodes %v; want the NodeClass held while the nodes are there", nc, err, nodeNames(nodes))
	}
	waitFor(t, 2*time.Minute, "the NodeClass gone after its nodes", func() (bool, string) {
		nodes, _, _ := w.state()
		_, err := nodeClasses.Get(ctx, "auto-gpu", metav1.GetOptions{})
		if apierrors.IsNotFound(err) && len(nodes) > 0 {
			t.Fatalf("the NodeClass went while nodes %v remain", nodeNames(nodes))
		}
		return apierrors.IsNotFound(err), "nodes " + strings.Join(nodeNames(nodes), ",")
	})
	t.Logf("NodePool and NodeClass deleted: nodes and NodeClass gone in %s", time.Since(began).Round(time.Millisecond))

	// Auto Mode off: what held the NodeClasses goes with the controller.
	g.create(t, nodeClassResource, nodeClass)
	class := func() (held, mirrored bool, state string) {
		nc, err := nodeClasses.Get(ctx, "auto-gpu", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = g.dyn.Resource(ec2NodeClassResource).Get(ctx, "auto-gpu"+autoModeMirrorSuffix, metav1.GetOptions{})
		held, mirrored = slices.Contains(nc.GetFinalizers(), autoModeFinalizer), !apierrors.IsNotFound(err)
		return held, mirrored, fmt.Sprintf("finalizers %v, mirror: %v", nc.GetFinalizers(), err)
	}
	waitFor(t, 30*time.Second, "a new NodeClass held and mirrored", func() (bool, string) {
		held, mirrored, state := class()
		return held && mirrored, state
	})
	// Auto Mode turned off: the three capabilities together, an
	// asynchronous update that takes effect once EKS reports it done.
	e := eks.NewFromConfig(motoConfig(t, g.s.URL))
	off := &ekstypes.ComputeConfigRequest{Enabled: aws.Bool(false)}
	up, err := e.UpdateClusterConfig(ctx, &eks.UpdateClusterConfigInput{Name: aws.String(cluster), ComputeConfig: off,
		StorageConfig:           &ekstypes.StorageConfigRequest{BlockStorage: &ekstypes.BlockStorage{Enabled: aws.Bool(false)}},
		KubernetesNetworkConfig: &ekstypes.KubernetesNetworkConfigRequest{ElasticLoadBalancing: &ekstypes.ElasticLoadBalancing{Enabled: aws.Bool(false)}}})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the update turning Auto Mode off to finish", func() (bool, string) {
		u, err := e.DescribeUpdate(ctx, &eks.DescribeUpdateInput{Name: aws.String(cluster), UpdateId: up.Update.Id})
		if err != nil {
			return false, err.Error()
		}
		return u.Update.Status == ekstypes.UpdateStatusSuccessful, string(u.Update.Status)
	})
	waitFor(t, 30*time.Second, "the NodeClass released and its mirror gone once Auto Mode is off", func() (bool, string) {
		held, mirrored, state := class()
		return !held && !mirrored, state
	})
}

// readyAt reports whether o's Ready condition is True for its generation.
func readyAt(o *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		g, _, _ := unstructured.NestedInt64(m, "observedGeneration")
		if m["type"] == "Ready" && m["status"] == "True" && g == o.GetGeneration() {
			return true
		}
	}
	return false
}

func decode(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
		t.Fatal(err)
	}
	return obj
}

func yamlOf(v any) string {
	b, _ := yaml.Marshal(v)
	return string(b)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
