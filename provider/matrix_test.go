package provider

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// matrixRow is one CLI the one-apply subset runs on.
type matrixRow struct {
	name string
	bin  func(t testing.TB) string
	// providerHost is the registry host the CLI resolves `llmd` to.
	providerHost string
	// floor: write-only attributes are refused there.
	floor bool
}

// TestAccMatrix runs the subset every supported CLI must pass, on one test
// ground, each row in its own cluster and namespace: cluster, fleet and
// router in one apply, an empty plan after it, an update in place, and an
// import of the fleet by id, then destroy. The floor (Terraform 1.5.7)
// first refuses a write-only attribute, naming it and the version. The
// whole acceptance suite runs on testenv.TerraformNewest.
func TestAccMatrix(t *testing.T) {
	rows := []matrixRow{
		{name: testenv.TerraformFloor.String(), bin: testenv.TerraformFloor.Binary, floor: true},
		{name: "terraform (preinstalled)", bin: testenv.PreinstalledTerraform},
		{name: testenv.OpenTofu.String(), bin: testenv.OpenTofu.Binary, providerHost: "registry.opentofu.org"},
	}
	g := newInClusterGround(t, "matrix", 1, 2)
	for i, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			t.Setenv("TF_ACC_TERRAFORM_PATH", row.bin(t))
			if row.providerHost != "" {
				t.Setenv("TF_ACC_PROVIDER_HOST", row.providerHost)
			}
			cluster, ns := fmt.Sprintf("acc-matrix-%d", i), fmt.Sprintf("llmd-matrix-%d", i)
			config := func(routerExtra string) string {
				return g.config(cluster, "  addons = { monitoring = { enabled = false } }", fleetAndRouterConfig(ns, routerExtra))
			}
			var steps []resource.TestStep
			if row.floor {
				steps = append(steps, resource.TestStep{
					Config:      config(`  api_key = "not-kept"`),
					ExpectError: regexp.MustCompile(`(?s)WriteOnly attribute api_key.*only supported in Terraform 1.11 and later`),
				})
			}
			steps = append(steps,
				resource.TestStep{
					Config: config(""),
					Check: resource.ComposeAggregateTestCheckFunc(
						resource.TestCheckResourceAttr(fleetRes, "ready_replicas", "1"),
						resource.TestCheckResourceAttr(routerRes, "replicas", "2"),
					),
				},
				resource.TestStep{Config: config(""), PlanOnly: true},
				resource.TestStep{
					Config: config("  replicas = 1"),
					Check: resource.ComposeAggregateTestCheckFunc(
						resource.TestCheckResourceAttr(routerRes, "replicas", "1"),
						checkDeploymentReplicas(g.c, ns, "router", 1),
					),
				},
				resource.TestStep{
					ResourceName:            fleetRes,
					ImportState:             true,
					ImportStateId:           cluster + "/" + ns + "/qwen",
					ImportStateVerify:       true,
					ImportStateVerifyIgnore: []string{"timeouts"},
				},
			)
			resource.Test(t, resource.TestCase{
				PreCheck:                 func() { testAccPreCheck(t) },
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				CheckDestroy:             checkNamespaceEmpty(g.c, ns),
				Steps:                    steps,
			})
		})
	}
}

// checkDeploymentReplicas checks the Deployment ns/name asks for want pods.
func checkDeploymentReplicas(c *testenv.Cluster, ns, name string, want int32) resource.TestCheckFunc {
	return func(*terraform.State) error {
		dep, err := c.Client.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if dep.Spec.Replicas == nil || *dep.Spec.Replicas != want {
			return fmt.Errorf("Deployment %s/%s has replicas %v, want %d", ns, name, dep.Spec.Replicas, want)
		}
		return nil
	}
}
