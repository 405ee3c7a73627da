package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
)

// podImages are the container images of the pods a selector picks in ns
// (pods on their way out skipped); no pod is an error.
func podImages(c *testenv.Cluster, ns, selector string) ([]string, error) {
	pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
			for _, c := range cs {
				out = append(out, c.Image)
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no pod in %s selected by %s", ns, selector)
	}
	return out, nil
}

// TestAccImageMirrors: the cluster's image_mirrors reach every image the
// product deploys in one apply: the device plugin's pods, the fleet's vLLM
// pods and staging Job pods (through the cluster's kubernetes object) and
// the router's pods, each pulled from its registry's mirror with its
// repository, tag and digest; the plan after is empty. Dropping the
// mirrors rolls them back to the upstream references. A mirror that is no
// registry is a plan error naming the attribute.
func TestAccImageMirrors(t *testing.T) {
	g := newInClusterGround(t, "mirrors", 1, 1)
	c := g.c
	const cluster, ns = "acc-mirrors", "llmd-mirrors"
	const ecr = "123456789012.dkr.ecr.us-west-2.amazonaws.com"
	const commit = "a09a35458c702b33eeacc393d103063234e8bc28"
	config := func(mirrors string) string {
		return g.config(cluster, "  addons = { monitoring = { enabled = false } }\n"+mirrors, fmt.Sprintf(`
resource "llmd_model_fleet" "test" {
  cluster   = llmd_inference_cluster.test.kubernetes
  name      = "qwen"
  namespace = %q
  replicas  = 1
  storage   = llmd_inference_cluster.test.model_storage
  model     = { source = "hf://Qwen/Qwen2.5-7B-Instruct@%s" }
}

resource "llmd_prefix_router" "test" {
  cluster  = llmd_inference_cluster.test.kubernetes
  fleet    = llmd_model_fleet.test.router_target
  name     = "router"
  image    = %q
  replicas = 1
}
`, ns, commit, devRouterImage))
	}
	mirrors := `  image_mirrors = {
    "docker.io" = "` + ecr + `/docker-hub"
    "nvcr.io"   = "` + ecr + `/nvidia"
    "ghcr.io"   = "` + ecr + `/github"
  }`
	want := map[string]struct{ ns, selector, mirrored, upstream string }{
		"fleet":         {ns, "llmd.dev/fleet=qwen,app.kubernetes.io/component=decode", ecr + "/docker-hub/vllm/" + strings.TrimPrefix(workloads.DefaultVLLMImage, "vllm/"), workloads.DefaultVLLMImage},
		"staging Job":   {ns, "", ecr + "/docker-hub/vllm/" + strings.TrimPrefix(workloads.DefaultVLLMImage, "vllm/"), workloads.DefaultVLLMImage},
		"router":        {ns, "llmd.dev/router=router", ecr + "/github/" + strings.TrimPrefix(devRouterImage, "ghcr.io/"), devRouterImage},
		"device plugin": {workloads.DevicePluginNamespace, "llmd.dev/addon=" + workloads.DevicePluginName, ecr + "/nvidia/" + strings.TrimPrefix(workloads.DefaultDevicePluginImage, "nvcr.io/"), workloads.DefaultDevicePluginImage},
	}
	check := func(mirrored bool) func(*terraform.State) error {
		return func(*terraform.State) error {
			for what, w := range want {
				if w.selector == "" {
					// The current staging Job's pods (a superseded Job's pods
					// may wait for the garbage collector a moment).
					jobs, err := c.Client.BatchV1().Jobs(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "llmd.dev/fleet=qwen"})
					if err != nil {
						return err
					}
					for _, j := range jobs.Items {
						if j.DeletionTimestamp == nil {
							w.selector = "batch.kubernetes.io/job-name=" + j.Name
						}
					}
				}
				images, err := podImages(c, w.ns, w.selector)
				if err != nil {
					return fmt.Errorf("%s: %w", what, err)
				}
				expect := w.upstream
				if mirrored {
					expect = w.mirrored
				}
				for _, img := range images {
					if img != expect {
						return fmt.Errorf("%s pods run %s, want %s", what, img, expect)
					}
				}
				t.Logf("%s: %s", what, images)
			}
			return nil
		}
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             checkNamespaceEmpty(c, ns),
		Steps: []resource.TestStep{
			{
				Config:      config(`  image_mirrors = { "https://docker.io" = "` + ecr + `/docker-hub" }`),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)image_mirrors: key "https://docker.io": not a registry host.*upstream\s+registry\s+host`),
			},
			{
				Config: config(mirrors),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(clusterRes, tfjsonpath.New("kubernetes").AtMapKey("image_mirrors").AtMapKey("docker.io"),
						knownvalue.StringExact(ecr+"/docker-hub")),
					// What the user configured stays in state; the rewrite is what is applied.
					statecheck.ExpectKnownValue(fleetRes, tfjsonpath.New("vllm").AtMapKey("image"), knownvalue.StringExact(workloads.DefaultVLLMImage)),
				},
				Check: check(true),
			},
			{Config: config(mirrors), PlanOnly: true},
			{
				Config: config(""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(clusterRes, plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction(fleetRes, plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction(routerRes, plancheck.ResourceActionUpdate),
				}},
				Check: check(false),
			},
		},
	})
}
