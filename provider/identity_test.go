package provider

import (
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// TestAccIdentity runs on Terraform testenv.TerraformVersion (the
// preinstalled 1.11 has no resource identity): cluster, fleet and router in
// one apply each carry their identity, which the next refresh keeps, and
// each imports by that identity through an `import { identity = {...} }`
// block whose plan is a no-op against the configuration (for the cluster:
// but for deletion_protection, which no import can read).
func TestAccIdentity(t *testing.T) {
	t.Setenv("TF_ACC_TERRAFORM_PATH", testenv.Terraform(t))
	g := newInClusterGround(t, "identity", 1, 2)
	const cluster, ns = "acc-identity", "llmd-identity"
	config := g.config(cluster, "  addons = { monitoring = { enabled = false } }", fleetAndRouterConfig(ns, ""))
	inCluster := func(name string) map[string]knownvalue.Check {
		return map[string]knownvalue.Check{"cluster_region": knownvalue.StringExact(testenv.Region), "cluster_name": knownvalue.StringExact(cluster),
			"namespace": knownvalue.StringExact(ns), "name": knownvalue.StringExact(name)}
	}
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
		},
	})
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
