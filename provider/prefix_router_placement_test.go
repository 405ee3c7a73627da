package provider

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// routerNodes are the nodes the router's pods were scheduled to; a pod the
// scheduler has not placed is an error.
func routerNodes(c *testenv.Cluster, ns string) ([]string, error) {
	pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "llmd.dev/router=router"})
	if err != nil {
		return nil, err
	}
	var nodes []string
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" {
			return nil, fmt.Errorf("router pod %s is not scheduled: %+v", p.Name, p.Status.Conditions)
		}
		nodes = append(nodes, p.Spec.NodeName)
	}
	return nodes, nil
}

// TestAccPrefixRouterSystemNodes: a cluster whose system node group has
// labels and a taint of its own (and not the default llmd.dev/pool=system)
// reports them in its kubernetes object, and the router given that object
// as `cluster` selects those labels, tolerates that taint and runs on the
// one system node (its two replicas beside each other: the plan warns).
func TestAccPrefixRouterSystemNodes(t *testing.T) {
	g := newInClusterGround(t, "placement", 1, 1)
	c := g.c
	ctx := context.Background()
	// The system node as EKS labels and taints a node of this node group.
	node, err := c.Client.CoreV1().Nodes().Get(ctx, g.sysNodes[0], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(node.Labels, testenv.SystemNodeLabel)
	node.Labels["example.com/role"] = "router"
	node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: "dedicated", Value: "router", Effect: corev1.TaintEffectNoSchedule})
	if _, err := c.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	const cluster, ns = "acc-placement", "llmd-placement"
	config := g.config(cluster, `  addons = { monitoring = { enabled = false } }
  system_node_group = {
    desired_size = 1
    min_size     = 1
    max_size     = 1
    labels       = { "example.com/role" = "router" }
    taints       = [{ key = "dedicated", value = "router", effect = "NO_SCHEDULE" }]
  }`, fleetAndRouterConfig(ns, `
  replicas = 2
  timeouts {
    create = "2m"
  }`))
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             checkNamespaceEmpty(c, ns),
		Steps: []resource.TestStep{{
			Config: config,
			ConfigStateChecks: []statecheck.StateCheck{
				statecheck.ExpectKnownValue(clusterRes, tfjsonpath.New("kubernetes").AtMapKey("system_node_labels"),
					knownvalue.MapExact(map[string]knownvalue.Check{"example.com/role": knownvalue.StringExact("router")})),
				statecheck.ExpectKnownValue(clusterRes, tfjsonpath.New("kubernetes").AtMapKey("system_node_taints"),
					knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("dedicated=router:NoSchedule")})),
				statecheck.ExpectKnownValue(clusterRes, tfjsonpath.New("kubernetes").AtMapKey("system_node_desired_size"), knownvalue.Int64Exact(1)),
				statecheck.ExpectKnownValue(clusterRes, tfjsonpath.New("kubernetes").AtMapKey("gpu_node_desired_size"), knownvalue.Int64Exact(1)),
			},
			Check: func(*terraform.State) error {
				dep, err := c.Client.AppsV1().Deployments(ns).Get(ctx, "router", metav1.GetOptions{})
				if err != nil {
					return err
				}
				spec := dep.Spec.Template.Spec
				if !reflect.DeepEqual(spec.NodeSelector, map[string]string{"example.com/role": "router"}) ||
					!slices.ContainsFunc(spec.Tolerations, func(t corev1.Toleration) bool { return t.Key == "dedicated" && t.Value == "router" }) {
					return fmt.Errorf("router pods select %v and tolerate %+v, want the system node group's label and taint", spec.NodeSelector, spec.Tolerations)
				}
				nodes, err := routerNodes(c, ns)
				if err != nil {
					return err
				}
				if !slices.Equal(nodes, []string{g.sysNodes[0], g.sysNodes[0]}) {
					return fmt.Errorf("router pods run on %v, want both on the system node %s", nodes, g.sysNodes[0])
				}
				return nil
			},
		}},
	})
}

// TestAccPrefixRouterNoPendingReplica: on a cluster made elsewhere with one
// node the router may use beside tainted GPU nodes, both replicas run on
// that node. Spreading over hostnames is a preference: as a condition
// (DoNotSchedule) the GPU nodes, which the router does not tolerate, would
// count as nodes with no replica (nodeTaintsPolicy defaults to Ignore) and
// keep the second replica Pending.
func TestAccPrefixRouterNoPendingReplica(t *testing.T) {
	c, moto := fleetSetup(t, 2)
	sys := c.AddSystemNodes(t, "router-nopending-system", 1)
	const ns = "router-nopending"
	body := `  image    = "` + devRouterImage + `"
  replicas = 2
  timeouts {
    create = "2m"
  }`
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             checkNamespaceEmpty(c, ns),
		Steps: []resource.TestStep{{
			Config: directRouterConfig(c, moto, ns, "", body),
			Check: func(*terraform.State) error {
				nodes, err := routerNodes(c, ns)
				if err != nil {
					return err
				}
				if !slices.Equal(nodes, []string{sys[0], sys[0]}) {
					return fmt.Errorf("router pods run on %v, want both on the one untainted node %s", nodes, sys[0])
				}
				return nil
			},
		}},
	})
}
