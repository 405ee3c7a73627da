package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/querycheck"
	"github.com/hashicorp/terraform-plugin-testing/querycheck/queryfilter"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// TestAccTerraformNative runs on testenv.TerraformNewest (the
// preinstalled 1.11 has no resource identity): cluster, fleet and router in
// one apply each carry their identity, which the next refresh keeps, and
// each imports by that identity through an `import { identity = {...} }`
// block whose plan is a no-op against the configuration (for the cluster:
// but for deletion_protection, which no import can read). Then `terraform
// query` lists each by that identity: the cluster (not one made by hand
// beside it), the fleet with its settings read back, the router by
// namespace; a prefix or a namespace holding none lists nothing. Between
// the two, the action llmd_model_fleet_restart rolls the fleet's pods and
// leaves its plan empty, and refuses a Deployment no fleet made.
func TestAccTerraformNative(t *testing.T) {
	t.Setenv("TF_ACC_TERRAFORM_PATH", testenv.Terraform(t))
	g := newInClusterGround(t, "identity", 1, 2)
	const cluster, ns = "acc-identity", "llmd-identity"
	config := g.config(cluster, "  addons = { monitoring = { enabled = false } }", fleetAndRouterConfig(ns, ""))
	// A cluster made elsewhere, which the clusters' list must not yield.
	if _, err := g.aws.EKS.CreateCluster(context.Background(), &eks.CreateClusterInput{Name: aws.String("handmade"),
		RoleArn: aws.String(g.roleARN), ResourcesVpcConfig: &ekstypes.VpcConfigRequest{}, Tags: map[string]string{"team": "ml"}}); err != nil {
		t.Fatal(err)
	}
	inCluster := func(name string) map[string]knownvalue.Check {
		return map[string]knownvalue.Check{"cluster_region": knownvalue.StringExact(testenv.Region), "cluster_name": knownvalue.StringExact(cluster),
			"namespace": knownvalue.StringExact(ns), "name": knownvalue.StringExact(name)}
	}
	var fleetIPs []string
	var routers []playedRouter
	var player *benchmarkPlayer
	importByIdentity := func(res string) resource.TestStep {
		return resource.TestStep{Config: config, ResourceName: res, ImportState: true, ImportStateKind: resource.ImportBlockWithResourceIdentity}
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.RequireAbove(tfversion.Version1_12_0)},
		CheckDestroy:             checkNamespaceEmpty(g.c, ns),
		Steps: []resource.TestStep{
			{
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectIdentity("llmd_inference_cluster.test", map[string]knownvalue.Check{
						"region": knownvalue.StringExact(testenv.Region), "name": knownvalue.StringExact(cluster)}),
					statecheck.ExpectIdentity(fleetRes, inCluster("qwen")),
					statecheck.ExpectIdentity(routerRes, inCluster("router")),
					statecheck.ExpectIdentityValueMatchesState("llmd_inference_cluster.test", tfjsonpath.New("name")),
				},
			},
			{Config: config, PlanOnly: true},
			func() resource.TestStep {
				// deletion_protection lives in Terraform only: an import
				// takes the safe default (true), which this configuration
				// turns off, as the ID imports' ImportStateVerifyIgnore says.
				s := importByIdentity("llmd_inference_cluster.test")
				s.ExpectNonEmptyPlan = true
				s.ImportPlanChecks.PreApply = []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("llmd_inference_cluster.test", plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue("llmd_inference_cluster.test", tfjsonpath.New("model_storage").AtMapKey("deletion_protection"), knownvalue.Bool(false)),
				}
				return s
			}(),
			importByIdentity(fleetRes),
			importByIdentity(routerRes),
			{
				// An action aimed at a Deployment no fleet made (the
				// router's) fails, naming what is missing.
				Config:      config + restartConfig(ns, "router", "restart_router"),
				ExpectError: regexp.MustCompile(`has no llmd.dev/fleet-settings annotation`),
			},
			{
				Config: config + restartConfig(ns, "qwen", "restart"),
				Check:  checkRestarted(g.c, ns, "qwen"),
			},
			// The restart changed no managed state: the fleet's next plan
			// is empty.
			{Config: config + restartConfig(ns, "qwen", "restart"), PlanOnly: true},
			{
				// An A/B aimed at no router fails before any Job, naming it.
				Config:      config + strings.ReplaceAll(abConfig("ab_nowhere"), "llmd_prefix_router.test.url", fmt.Sprintf("%q", "http://nowhere."+ns+".svc.cluster.local:8000")),
				ExpectError: regexp.MustCompile(`router: no Deployment ` + ns + `/nowhere`),
			},
			{
				// The A/B: the fleet's pod and both router pods played,
				// the benchmark Job's pod played when kwok schedules it.
				PreConfig: func() {
					fleetIPs, _ = startDeclaredReplicas(t, g.c, ns, "qwen", 1)
					routers = playRouterPods(t, g.c, ns, "router", 2)
					player = playBenchmarkPods(t, g.c, ns)
				},
				Config: config + abConfig("ab"),
				Check: func(*terraform.State) error {
					if err := checkABRan(g.c, ns, player, fleetIPs, routers); err != nil {
						return err
					}
					return checkABProgress(g.c, ns, player)
				},
			},
			// The A/B changed no managed state.
			{Config: config + abConfig("ab"), PlanOnly: true},
			{
				// terraform query: the list blocks alone, beside the
				// configuration's provider block.
				Query:  true,
				Config: listConfig(cluster, ns),
				QueryResultChecks: []querycheck.QueryResultCheck{
					// The hand-made cluster carries no owner tag.
					querycheck.ExpectLength("llmd_inference_cluster.all", 1),
					querycheck.ExpectIdentity("llmd_inference_cluster.all", map[string]knownvalue.Check{
						"region": knownvalue.StringExact(testenv.Region), "name": knownvalue.StringExact(cluster)}),
					querycheck.ExpectLength("llmd_inference_cluster.other_prefix", 0),
					querycheck.ExpectLength("llmd_model_fleet.fleets", 1),
					querycheck.ExpectIdentity("llmd_model_fleet.fleets", inCluster("qwen")),
					querycheck.ExpectResourceKnownValues("llmd_model_fleet.fleets", queryfilter.ByResourceIdentity(inCluster("qwen")),
						[]querycheck.KnownValueCheck{
							{Path: tfjsonpath.New("name"), KnownValue: knownvalue.StringExact("qwen")},
							{Path: tfjsonpath.New("namespace"), KnownValue: knownvalue.StringExact(ns)},
							{Path: tfjsonpath.New("replicas"), KnownValue: knownvalue.Int64Exact(1)},
							{Path: tfjsonpath.New("cluster").AtMapKey("name"), KnownValue: knownvalue.StringExact(cluster)},
						}),
					querycheck.ExpectLength("llmd_prefix_router.routers", 1),
					querycheck.ExpectIdentity("llmd_prefix_router.routers", inCluster("router")),
					querycheck.ExpectLength("llmd_prefix_router.elsewhere", 0),
				},
			},
		},
	})
}

// restartConfig invokes llmd_model_fleet_restart on the Deployment name in
// ns once, when terraform_data.<trigger> is created.
func restartConfig(ns, name, trigger string) string {
	return fmt.Sprintf(`
action "llmd_model_fleet_restart" "%[3]s" {
  config {
    cluster   = llmd_inference_cluster.test.kubernetes
    namespace = %[1]q
    name      = %[2]q
    timeout   = "5m"
  }
}

resource "terraform_data" "%[3]s" {
  input = "once"
  lifecycle {
    action_trigger {
      events  = [after_create]
      actions = [action.llmd_model_fleet_restart.%[3]s]
    }
  }
}
`, ns, name, trigger)
}

// checkRestarted checks that the Deployment ns/name was restarted and
// rolled out before the action returned: its pod template and every pod
// carry the restart annotation, and every replica is updated and ready.
func checkRestarted(c *testenv.Cluster, ns, name string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ctx := context.Background()
		dep, err := c.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		at := dep.Spec.Template.Annotations[kube.RestartedAtAnnotation]
		if at == "" {
			return fmt.Errorf("Deployment %s/%s: no %s on its pod template", ns, name, kube.RestartedAtAnnotation)
		}
		want := *dep.Spec.Replicas
		if s := dep.Status; s.ObservedGeneration < dep.Generation || s.UpdatedReplicas != want || s.ReadyReplicas != want || s.Replicas != want {
			return fmt.Errorf("Deployment %s/%s not rolled out when the action returned: %+v", ns, name, s)
		}
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "llmd.dev/fleet=" + name})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Annotations[kube.RestartedAtAnnotation] != at {
				return fmt.Errorf("pod %s is from before the restart (annotation %q, want %q)", p.Name, p.Annotations[kube.RestartedAtAnnotation], at)
			}
		}
		return nil
	}
}

// listConfig is a query of every list resource: clusters (all, and by a
// prefix none has), the fleets in cluster with their resources, the routers
// in namespace ns and in a namespace holding none.
func listConfig(cluster, ns string) string {
	return fmt.Sprintf(`
list "llmd_inference_cluster" "all" {
  provider = llmd
}

list "llmd_inference_cluster" "other_prefix" {
  provider = llmd
  config {
    name_prefix = "zz-"
  }
}

list "llmd_model_fleet" "fleets" {
  provider         = llmd
  include_resource = true
  config {
    cluster_name = %[1]q
  }
}

list "llmd_prefix_router" "routers" {
  provider = llmd
  config {
    cluster_name = %[1]q
    namespace    = %[2]q
  }
}

list "llmd_prefix_router" "elsewhere" {
  provider = llmd
  config {
    cluster_name = %[1]q
    namespace    = "default"
  }
}
`, cluster, ns)
}

// fleetAndRouterConfig is a one-replica fleet "qwen" in ns on
// llmd_inference_cluster.test and a router "router" in front of it, extra
// added inside the router's block.
func fleetAndRouterConfig(ns, extra string) string {
	return fmt.Sprintf(`
resource "llmd_model_fleet" "test" {
  cluster   = llmd_inference_cluster.test.kubernetes
  name      = "qwen"
  namespace = %q
  replicas  = 1
  storage   = llmd_inference_cluster.test.model_storage
}

resource "llmd_prefix_router" "test" {
  cluster = llmd_inference_cluster.test.kubernetes
  fleet   = llmd_model_fleet.test.router_target
  name    = "router"
  image   = %q
%s
}
`, ns, devRouterImage, extra)
}
