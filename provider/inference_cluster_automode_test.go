package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// autoModeLabel is the label EKS Auto Mode puts on the nodes it launches.
const autoModeLabel = "eks.amazonaws.com/compute-type=auto"

// TestAccAutoMode makes cluster, fleet and router in one apply with
// compute.mode = "auto_mode" on the local ground: the stand-in turns on the
// cluster's Auto Mode compute (with block storage and load balancing), the
// cluster applies its NodeClass and GPU NodePool, and Auto Mode's node
// provisioning (played by testenv with Karpenter's own build) launches a
// GPU node for each of the fleet's 2 pods; the fleet grown to 8 gets 8. No
// NVIDIA device plugin is installed (Auto Mode's nodes carry it; asking for
// one is a plan error), a no-op plan of the stack stays within 60 AWS
// calls, and destroy removes the NodePool's nodes before any AWS part.
func TestAccAutoMode(t *testing.T) {
	const cluster, ns = "acc-automode", "llmd-automode"
	g := newAutoModeGround(t, "automode", cluster, 8, 2)
	testenv.ServePodIPs(t)
	fixed := func(n int) string { return autoscaledConfig(g, cluster, ns, fmt.Sprintf("  replicas = %d", n)) }
	autoNodes := func() []string { return g.nodesLabelled(t, autoModeLabel) }
	var began time.Time
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: resource.ComposeTestCheckFunc(checkNothingOwned(t, g.aws, cluster), checkNamespaceEmpty(g.c, ns), func(*terraform.State) error {
			if nodes := autoNodes(); len(nodes) > 0 {
				return fmt.Errorf("Auto Mode's nodes %v outlived the cluster", nodes)
			}
			return nil
		}),
		Steps: []resource.TestStep{
			{
				// What Auto Mode's nodes carry or need is refused in words:
				// a second device plugin, an AMI type, the networking
				// add-ons of the system nodes turned off.
				Config: strings.Replace(g.config(cluster, "  addons = { nvidia_device_plugin = { enabled = true }, vpc_cni = { enabled = false } }", ""),
					"gpu_node_group = { max_size = 8 }", `gpu_node_group = { max_size = 8, ami_type = "AL2023_x86_64_NVIDIA" }`, 1),
				PlanOnly: true,
				// Terraform orders errors by where they point in the configuration.
				ExpectError: regexp.MustCompile(`(?s)AMI type in EKS Auto Mode.*Second NVIDIA device plugin.*auto_mode.*Networking add-on off in EKS Auto Mode.*vpc_cni`),
			},
			{
				Config: fixed(2),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(clusterRes, tfjsonpath.New("compute").AtMapKey("status"), knownvalue.StringExact("applied")),
					statecheck.ExpectKnownValue(clusterRes, tfjsonpath.New("addons").AtMapKey("nvidia_device_plugin").AtMapKey("enabled"), knownvalue.Bool(false)),
					statecheck.ExpectKnownValue(clusterRes, tfjsonpath.New("kubernetes").AtMapKey("gpu_node_desired_size"), knownvalue.Int64Exact(8)),
				},
				Check: func(*terraform.State) error {
					out, err := g.aws.EKS.DescribeCluster(context.Background(), &eks.DescribeClusterInput{Name: aws.String(cluster)})
					if err != nil {
						return err
					}
					cc, sc, lb := out.Cluster.ComputeConfig, out.Cluster.StorageConfig, out.Cluster.KubernetesNetworkConfig
					if cc == nil || !aws.ToBool(cc.Enabled) || len(cc.NodePools) != 0 || sc == nil || sc.BlockStorage == nil || !aws.ToBool(sc.BlockStorage.Enabled) ||
						lb == nil || lb.ElasticLoadBalancing == nil || !aws.ToBool(lb.ElasticLoadBalancing.Enabled) {
						return fmt.Errorf("EKS reports compute %+v, storage %+v, network %+v: want Auto Mode's three capabilities on and no built-in node pools", cc, sc, lb)
					}
					// The fleet's apply waited for its pods: Auto Mode made a GPU node each.
					if nodes := autoNodes(); len(nodes) != 2 {
						return fmt.Errorf("Auto Mode made GPU nodes %v for the fleet's 2 pods, want 2", nodes)
					}
					return nil
				},
			},
			{
				PreConfig: func() { began = time.Now() },
				Config:    fixed(8),
				Check: func(*terraform.State) error {
					if nodes := autoNodes(); len(nodes) != 8 {
						return fmt.Errorf("Auto Mode made GPU nodes %v for the fleet's 8 pods, want 8", nodes)
					}
					t.Logf("the fleet grown 2 -> 8 pods on 8 Auto Mode nodes in one apply of %s", time.Since(began).Round(time.Millisecond))
					return nil
				},
			},
			{
				// A no-op plan of the whole stack in Auto Mode: its AWS calls.
				PreConfig: func() { g.standIn.ResetCalls() },
				Config:    fixed(8),
				PlanOnly:  true,
			},
			{
				PreConfig: func() { checkNoOpPlanCalls(t, g.standIn, "Auto Mode") },
				Config:    fixed(8),
				PlanOnly:  true,
			},
		},
	})
}

// checkNoOpPlanCalls fails the test where the provider's AWS calls since
// the stand-in's last reset exceed 60 per refresh of the stack (each
// refresh reads the cluster's model storage once).
func checkNoOpPlanCalls(t *testing.T, standIn *testenv.AWSStandIn, mode string) {
	t.Helper()
	calls := standIn.CallsBy("terraform-provider-llmd/")
	refreshes := countOp(calls, "DescribeFileSystems")
	t.Logf("a no-op plan of cluster, fleet and router in %s: %d AWS calls over %d refreshes: %v", mode, len(calls), refreshes, calls)
	if refreshes == 0 || len(calls) > 60*refreshes {
		t.Fatalf("a no-op plan made %d AWS calls in %d refreshes, want at most 60 each", len(calls), refreshes)
	}
}
