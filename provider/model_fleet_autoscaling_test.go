package provider

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
)

// autoscaledConfig is the cluster with a fleet sized by sizing (replicas,
// or an autoscaling block) and a router in front of it.
func autoscaledConfig(g inClusterGround, cluster, ns, sizing string) string {
	return g.config(cluster, "  addons = { monitoring = { enabled = false } }", fmt.Sprintf(`
resource "llmd_model_fleet" "test" {
  cluster   = llmd_inference_cluster.test.kubernetes
  name      = "qwen"
  namespace = %q
  storage   = llmd_inference_cluster.test.model_storage
  rollout   = { drain_timeout = "20s" }
%s
}

resource "llmd_prefix_router" "test" {
  cluster = llmd_inference_cluster.test.kubernetes
  fleet   = llmd_model_fleet.test.router_target
  name    = "router"
  image   = %q
}
`, ns, sizing, devRouterImage))
}

// TestAccFleetAutoscaling sizes a fleet on the router's demand and its GPU
// nodes on the fleet, for real on the local control plane: the cluster runs
// compute.mode = "karpenter" (Karpenter's chart installed by the apply, its
// controller the real one, played from the release's Deployment), so GPU
// nodes follow the pods. A fixed fleet of 3 gets 3 GPU nodes and switches to
// autoscaling (2 to 8 pods) keeping its 3 pods; the router pods (played from
// the router image under their own ServiceAccount, so the Roles and bindings
// the router resource made are what they use) serve their demand through
// the APIService the router resource registered, kube-controller-manager's
// HPA reads it through the aggregation layer and scales the Deployment to 8
// under load (Karpenter launches a node for each new pod) and back to 2
// after it (Karpenter consolidates the empty nodes away), every fleet pod
// played by a simulated vLLM at its IP; no request fails. A configuration
// with both replicas and autoscaling is a plan error, and destroy removes
// the cluster-wide objects (the APIService, the auth delegation) and,
// before any AWS part, Karpenter's nodes.
func TestAccFleetAutoscaling(t *testing.T) {
	g := newKarpenterGround(t, "autoscale", 8, 2)
	testenv.ServePodIPs(t)
	c := g.c
	const cluster, ns = "acc-autoscale", "llmd-autoscale"
	autoscaled := autoscaledConfig(g, cluster, ns, `  autoscaling = { min_replicas = 2, max_replicas = 8, target_per_pod = 2, scale_down_delay = "0s" }`)
	var load *testenv.ClosedLoop
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: resource.ComposeTestCheckFunc(checkNothingOwned(t, g.aws, cluster), checkNamespaceEmpty(c, ns),
			checkMetricsAPIGone(c), func(*terraform.State) error {
				if nodes := g.karpenterNodes(t); len(nodes) > 0 {
					return fmt.Errorf("Karpenter's nodes %v outlived the cluster", nodes)
				}
				return nil
			}),
		Steps: []resource.TestStep{
			{
				Config:      autoscaledConfig(g, cluster, ns, "  replicas = 3\n  autoscaling = { min_replicas = 2, max_replicas = 8 }"),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)Fixed and autoscaled at once.*remove replicas`),
			},
			{
				Config: autoscaledConfig(g, cluster, ns, "  replicas = 3"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(fleetRes, tfjsonpath.New("router_target").AtMapKey("autoscaled"), knownvalue.Bool(false)),
					statecheck.ExpectKnownValue(clusterRes, tfjsonpath.New("compute").AtMapKey("status"), knownvalue.StringExact("applied")),
					// Karpenter's nodes: as many as gpu_node_group.max_size.
					statecheck.ExpectKnownValue(clusterRes, tfjsonpath.New("kubernetes").AtMapKey("gpu_node_desired_size"), knownvalue.Int64Exact(8)),
				},
				Check: func(*terraform.State) error {
					// The fleet's apply waited for its pods: Karpenter made a GPU node each.
					if nodes := g.karpenterNodes(t); len(nodes) != 3 {
						return fmt.Errorf("Karpenter made GPU nodes %v for the fleet's 3 pods, want 3", nodes)
					}
					return nil
				},
			},
			{
				Config: autoscaled,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(fleetRes, tfjsonpath.New("router_target").AtMapKey("autoscaled"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue(fleetRes, tfjsonpath.New("router_target").AtMapKey("scale_to_zero_after"), knownvalue.Null()),
					// target_per_pod set alone: the demand, not the work's default.
					statecheck.ExpectKnownValue(fleetRes, tfjsonpath.New("autoscaling").AtMapKey("target_per_pod"), knownvalue.Int64Exact(2)),
					statecheck.ExpectKnownValue(fleetRes, tfjsonpath.New("autoscaling").AtMapKey("target_work_per_pod"), knownvalue.Null()),
				},
				Check: func(*terraform.State) error {
					// The switch kept the fleet's 3 pods: llmd stopped applying
					// replicas without the field falling back to 1.
					if n := fleetReplicas(t, c, ns); n != 3 {
						return fmt.Errorf("the fleet has %d replicas right after switching to autoscaling, want the 3 it had", n)
					}
					return nil
				},
			},
			{
				PreConfig: func() {
					sims := c.PlayFleet(t, ns, "llmd.dev/fleet=qwen", func(p *corev1.Pod) testenv.PlayedProcess {
						return simProcess{startDeclaredSim(t, c, ns, "qwen", p.Status.PodIP)}
					})
					waitUntil(t, "3 fleet pods played", func() bool { return sims.Serving() == 3 }, func() string { return "" })
					routers := playRouterPods(t, c, ns, "router", 2)
					waitMetricsAPIAvailable(t, c)

					// Load: 24 clients, each sending its next request as the
					// last ends, across the two router pods; at 2 per pod the
					// HPA wants at least 8 pods, its maximum.
					model := "Qwen/Qwen2.5-7B-Instruct"
					load = testenv.StartClosedLoop(t, 24, func(w int, i uint32) error {
						status, err := testenv.PostCompletion(routers[w%2].url, completionBody(t, model, prefixPrompt(uint32(w)+1, i)))
						if err == nil && status != http.StatusOK {
							err = fmt.Errorf("status %d", status)
						}
						return err
					})
					began := time.Now()
					// Each new pod waits for its GPU node: Karpenter's batch, then the instance's launch (its kwok EC2 holds each 30 s).
					waitWithin(t, 2*time.Minute, "the HPA to scale the fleet to 8 on the router's demand, and Karpenter to give each pod a node", func() bool {
						return fleetReplicas(t, c, ns) == 8 && sims.Serving() == 8
					}, func() string {
						return fmt.Sprintf("replicas %d, %d pods played, GPU nodes %v\n%s", fleetReplicas(t, c, ns), sims.Serving(), g.karpenterNodes(t), hpaStatus(t, c, ns))
					})
					t.Logf("3 -> 8 pods on %d GPU nodes in %s under 24 clients", len(g.karpenterNodes(t)), time.Since(began).Round(time.Millisecond))
					load.Stop()
					began = time.Now()
					waitUntil(t, "the HPA to scale the idle fleet in to 2", func() bool { return fleetReplicas(t, c, ns) == 2 },
						func() string { return hpaStatus(t, c, ns) })
					t.Logf("8 -> 2 pods %s after the load stopped; %d requests sent, %d failed", time.Since(began).Round(time.Millisecond), load.Sent.Load(), load.Failed.Load())
					// Karpenter removes empty nodes one at a time (its disruption
					// loop, about 25 s each here): the first one gone shows it.
					waitWithin(t, 2*time.Minute, "Karpenter to consolidate an empty GPU node away", func() bool { return len(g.karpenterNodes(t)) < 8 },
						func() string { return fmt.Sprintf("GPU nodes %v", g.karpenterNodes(t)) })
					t.Logf("GPU nodes 8 -> %d %s after the load stopped", len(g.karpenterNodes(t)), time.Since(began).Round(time.Millisecond))
				},
				// The autoscaler's changes are not drift: the plan is empty.
				Config:   autoscaled,
				PlanOnly: true,
				Check: func(*terraform.State) error {
					if n := load.Failed.Load(); n > 0 {
						return fmt.Errorf("%d of %d requests failed while the fleet scaled 3 -> 8 -> 2: %v", n, load.Sent.Load(), load.Failures())
					}
					return nil
				},
			},
			{
				// A no-op plan of the whole stack in Karpenter mode: its AWS
				// calls (the provider's only; Karpenter polls the stand-in too).
				PreConfig: func() { g.standIn.ResetCalls() },
				Config:    autoscaled,
				PlanOnly:  true,
			},
			{
				PreConfig: func() { checkNoOpPlanCalls(t, g.standIn, "Karpenter mode") },
				// Back to a fixed size: llmd takes the replicas back from
				// the HPA's last write, and the HPA goes.
				Config: autoscaledConfig(g, cluster, ns, "  replicas = 4"),
				Check: func(*terraform.State) error {
					if n := fleetReplicas(t, c, ns); n != 4 {
						return fmt.Errorf("the fleet has %d replicas after autoscaling was removed, want 4", n)
					}
					if _, err := c.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), "qwen", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
						return fmt.Errorf("the HPA after autoscaling was removed: %v", err)
					}
					return nil
				},
			},
		},
	})
}

// simProcess adapts a simulated vLLM to the fleet player.
type simProcess struct{ p *testenv.RouterProcess }

func (s simProcess) Stop(bool) { s.p.Stop() }

// startDeclaredSim runs a simulated vLLM at ip as the fleet's Deployment
// declares its container (startDeclaredReplicas, one pod).
func startDeclaredSim(t *testing.T, c *testenv.Cluster, ns, name, ip string) *testenv.RouterProcess {
	d := readDeclaredPod(t, c, ns, name)
	tok := testenv.Tokenizer(t, "qwen3")
	return testenv.StartRouter(t, 1, "sim", "--host", ip, "--port", d.port, "--kv-port", fmt.Sprint(d.kvPort),
		"--block-size", d.blockSize, "--model", d.model, "--time-scale", "4",
		"--tokenizer", tok.TokenizerJSON, "--tokenizer-config", tok.TokenizerConfig)
}

func fleetReplicas(t *testing.T, c *testenv.Cluster, ns string) int32 {
	d, err := c.Client.AppsV1().Deployments(ns).Get(context.Background(), "qwen", metav1.GetOptions{})
	if err != nil || d.Spec.Replicas == nil {
		return -1
	}
	return *d.Spec.Replicas
}

// hpaStatus is the fleet's HPA's conditions and metrics, for a failed wait.
func hpaStatus(t *testing.T, c *testenv.Cluster, ns string) string {
	h, err := c.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(context.Background(), "qwen", metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, cond := range h.Status.Conditions {
		fmt.Fprintf(&b, "%s=%s (%s: %s)\n", cond.Type, cond.Status, cond.Reason, cond.Message)
	}
	for _, m := range h.Status.CurrentMetrics {
		if m.Type == autoscalingv2.ExternalMetricSourceType && m.External != nil {
			fmt.Fprintf(&b, "%s per pod: %s\n", m.External.Metric.Name, m.External.Current.AverageValue)
		}
	}
	return b.String()
}

// waitMetricsAPIAvailable waits for the API server to find the router's
// metrics API available.
func waitMetricsAPIAvailable(t *testing.T, c *testenv.Cluster) {
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	var last string
	waitUntil(t, "the APIService "+workloads.MetricsAPIService+" available", func() bool {
		got, err := dyn.Resource(apiServices).Get(context.Background(), workloads.MetricsAPIService, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false
		}
		conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
		for _, cond := range conds {
			m, _ := cond.(map[string]any)
			if m["type"] == "Available" {
				last = fmt.Sprint(m["status"], m["message"])
				return m["status"] == "True"
			}
		}
		return false
	}, func() string { return last })
}

// checkMetricsAPIGone: destroy removed the router's cluster-wide objects.
func checkMetricsAPIGone(c *testenv.Cluster) resource.TestCheckFunc {
	return func(*terraform.State) error {
		dyn, err := dynamic.NewForConfig(c.RESTConfig())
		if err != nil {
			return err
		}
		if _, err := dyn.Resource(apiServices).Get(context.Background(), workloads.MetricsAPIService, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("APIService %s after destroy: %v", workloads.MetricsAPIService, err)
		}
		crbs, err := c.Client.RbacV1().ClusterRoleBindings().List(context.Background(), metav1.ListOptions{LabelSelector: "llmd.dev/router=router"})
		if err != nil {
			return err
		}
		if len(crbs.Items) > 0 {
			return fmt.Errorf("ClusterRoleBinding %s after destroy", crbs.Items[0].Name)
		}
		return nil
	}
}
