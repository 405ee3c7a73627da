package provider

import (
	"context"
	"encoding/base64"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// directRouterConfig is a fleet (replicas 2) and a router in front of it on
// the local control plane through the resource-level kubernetes block.
func directRouterConfig(c *testenv.Cluster, moto *testenv.Moto, ns, fleetBody, routerBody string) string {
	return directFleetConfig(c, moto, "qwen", ns, "  replicas = 2\n"+fleetBody) + fmt.Sprintf(`
resource "llmd_prefix_router" "test" {
  kubernetes = {
    host                   = %q
    cluster_ca_certificate = %q
    token                  = %q
  }
  fleet = llmd_model_fleet.test.router_target
  name  = "router"
%s
}
`, c.Host, base64.StdEncoding.EncodeToString(c.CAData), c.Token, routerBody)
}

// TestAccPrefixRouterPlanErrors: settings that contradict the fleet, a dev
// build without an image and scoring the router's own configuration code
// refuses are plan errors naming the attributes; nothing is applied.
func TestAccPrefixRouterPlanErrors(t *testing.T) {
	moto := motoSetup(t)
	// The plan never reaches a cluster: an address nothing listens on proves it.
	c := &testenv.Cluster{Host: "https://127.0.0.1:1", CAData: []byte("unused"), Token: "unused"}
	image := "  image = \"" + devRouterImage + "\"\n"
	handFleet := func(kvPort int) string {
		return directFleetConfig(c, moto, "qwen", "plan-errors", "") + fmt.Sprintf(`
resource "llmd_prefix_router" "test" {
  kubernetes = { config_path = "/nonexistent" }
  name  = "router"
  image = %q
  fleet = {
    namespace = "llmd", selector = "app=vllm", http_port = 8000, kv_events_port = %d, replay_port = 5558
    topic = "kv@{ip}:{port}@{model}", block_size = 64, served_model = "m"
  }
}
`, devRouterImage, kvPort)
	}
	for _, tc := range []struct {
		name, config, want string
	}{
		{"block size", directRouterConfig(c, moto, "plan-errors", "", image+"  block_size = 16"),
			`block_size\s+=\s+16,\s+but\s+fleet.block_size\s+=\s+64`},
		{"model", directRouterConfig(c, moto, "plan-errors", "", image+`  served_model = "meta-llama/Llama-3.1-8B"`),
			`served_model\s+=\s+"meta-llama/Llama-3.1-8B",\s+but\s+fleet.served_model\s+=\s+"Qwen/Qwen2.5-7B-Instruct"`},
		{"no image", directRouterConfig(c, moto, "plan-errors", "", ""), `(?s)No router image.*development\s+build.*pins\s+no\s+router\s+image:\s+set\s+image`},
		{"unknown scorer", directRouterConfig(c, moto, "plan-errors", "", image+`  scoring = { scorers = [{ type = "prefx", weight = 1 }] }`),
			`scoring.scorers\[0\].type:\s+unknown\s+scorer\s+"prefx"`},
		{"preset and scorers", directRouterConfig(c, moto, "plan-errors", "", image+`  scoring = { preset = "llmd", scorers = [{ type = "queue", weight = 1 }] }`),
			`either\s+scoring.preset\s+or\s+scoring.scorers`},
		{"ranges without LB", directRouterConfig(c, moto, "plan-errors", "", image+`  service = { load_balancer_source_ranges = ["10.0.0.0/8"] }`),
			`service.load_balancer_source_ranges:\s+only\s+a\s+LoadBalancer`},
		{"open to the internet", directRouterConfig(c, moto, "plan-errors", "", image+`  service = { type = "LoadBalancer", internal = false }`),
			`(?s)service:\s+an\s+internet-facing\s+load\s+balancer.*load_balancer_source_ranges.*or\s+set\s+api_key`},
		{"key without version", directRouterConfig(c, moto, "plan-errors", "", image+`  api_key = "k"`),
			`(?s)set\s+api_key\s+and\s+api_key_version\s+together`},
		{"claim in another namespace", directRouterConfig(c, moto, "plan-errors", "", image+`  namespace = "edge"`),
			`namespace:\s+"edge"\s+is\s+not\s+fleet.namespace\s+"plan-errors"`},
		{"hand-made fleet", handFleet(8000), `fleet.kv_events_port\s+=\s+8000\s+is\s+fleet.http_port\s+too`},
		{"key digest", directRouterConfig(c, moto, "plan-errors", "", image+`  api_keys = [{ sha256 = "key-of-acme" }]`),
			`(?s)api_keys\[0\].sha256.*must\s+be\s+64\s+hex\s+digits:\s+give\s+sha256\(key\)`},
		{"key of no class", directRouterConfig(c, moto, "plan-errors", "", image+`  api_keys = [{ sha256 = sha256("k"), class = "gold" }]`),
			`api_keys\[0\].class:\s+"gold"\s+is\s+not\s+one\s+of\s+the\s+classes\s+high,\s+standard,\s+low`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				PreCheck:                 func() { testAccPreCheck(t) },
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps:                    []resource.TestStep{{Config: tc.config, PlanOnly: true, ExpectError: regexp.MustCompile(tc.want)}},
			})
		})
	}
}

// TestAccPrefixRouterDriftAndService: a router behind an internet-facing
// load balancer with source ranges, its two pods on two system nodes. A ServiceMonitor demanded without the CRD is
// an apply error; a ConfigMap deleted and a Deployment scaled behind
// Terraform's back show in the plan and are repaired; destroy empties the
// namespace.
func TestAccPrefixRouterDriftAndService(t *testing.T) {
	c, moto := fleetSetup(t, 2)
	c.AddSystemNodes(t, "router-drift-system", 2)
	const ns = "router-drift"
	body := `  image     = "` + devRouterImage + `"
  replicas  = 2
  scheduling = { node_selector = { "llmd.dev/pool" = "system" } }
  service = {
    type                        = "LoadBalancer"
    internal                    = false
    port                        = 80
    annotations                 = { "service.beta.kubernetes.io/aws-load-balancer-type" = "external" }
    load_balancer_source_ranges = ["192.168.0.0/16", "10.0.0.0/8"]
  }`
	cfg := func(extra string) string { return directRouterConfig(c, moto, ns, "", body+extra) }
	ctx := context.Background()
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             checkNamespaceEmpty(c, ns),
		Steps: []resource.TestStep{
			{
				Config:      cfg("\n  metrics = { service_monitor = true }"),
				ExpectError: regexp.MustCompile(`(?s)metrics.service_monitor = true, but the cluster does not serve.*ServiceMonitor`),
			},
			{
				Config: cfg(""),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(routerRes, tfjsonpath.New("url"), knownvalue.StringExact("http://router."+ns+".svc.cluster.local:80")),
					statecheck.ExpectKnownValue(routerRes, tfjsonpath.New("load_balancer_hostname"), knownvalue.StringExact("")),
					statecheck.ExpectKnownValue(routerRes, tfjsonpath.New("inventory"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.StringExact("core/v1/Namespace/-/" + ns),
						knownvalue.StringExact("core/v1/ServiceAccount/" + ns + "/router"),
						knownvalue.StringExact("rbac.authorization.k8s.io/v1/Role/" + ns + "/router"),
						knownvalue.StringExact("rbac.authorization.k8s.io/v1/RoleBinding/" + ns + "/router"),
						knownvalue.StringExact("core/v1/ConfigMap/" + ns + "/router"), knownvalue.StringExact("apps/v1/Deployment/" + ns + "/router"),
						knownvalue.StringExact("core/v1/Service/" + ns + "/router"), knownvalue.StringExact("policy/v1/PodDisruptionBudget/" + ns + "/router"),
						knownvalue.StringExact("networking.k8s.io/v1/NetworkPolicy/" + ns + "/router-peers")})),
				},
				Check: func(*terraform.State) error {
					svc, err := c.Client.CoreV1().Services(ns).Get(ctx, "router", metav1.GetOptions{})
					if err != nil {
						return err
					}
					if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || !slices.Equal(svc.Spec.LoadBalancerSourceRanges, []string{"10.0.0.0/8", "192.168.0.0/16"}) ||
						svc.Annotations["service.beta.kubernetes.io/aws-load-balancer-scheme"] != "internet-facing" ||
						svc.Annotations["service.beta.kubernetes.io/aws-load-balancer-type"] != "external" || svc.Spec.Ports[0].Port != 80 {
						return fmt.Errorf("service %+v %v", svc.Spec, svc.Annotations)
					}
					pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "llmd.dev/router=router"})
					if err != nil {
						return err
					}
					nodes := map[string]bool{}
					for _, p := range pods.Items {
						nodes[p.Spec.NodeName] = true
					}
					if len(pods.Items) != 2 || len(nodes) != 2 {
						return fmt.Errorf("router pods on nodes %v, want 2 pods on 2 nodes", nodes)
					}
					return nil
				},
			},
			{
				PreConfig: func() {
					if err := c.Client.CoreV1().ConfigMaps(ns).Delete(ctx, "router", metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config:           cfg(""),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(routerRes, plancheck.ResourceActionUpdate)}},
				Check: func(*terraform.State) error {
					_, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, "router", metav1.GetOptions{})
					return err
				},
			},
			{
				PreConfig: func() {
					// kubectl scale's merge patch on the scale subresource:
					// no precondition to conflict with the controller's writes.
					if _, err := c.Client.AppsV1().Deployments(ns).Patch(ctx, "router", types.MergePatchType, []byte(`{"spec":{"replicas":1}}`), metav1.PatchOptions{FieldManager: "kubectl-scale"}, "scale"); err != nil {
						t.Fatal(err)
					}
				},
				Config:             cfg(""),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
			{
				Config: cfg("\n  force_conflicts = true"),
				Check: func(*terraform.State) error {
					dep, err := c.Client.AppsV1().Deployments(ns).Get(ctx, "router", metav1.GetOptions{})
					if err != nil {
						return err
					}
					if *dep.Spec.Replicas != 2 {
						return fmt.Errorf("replicas %d after the repair, want 2", *dep.Spec.Replicas)
					}
					return nil
				},
			},
		},
	})
}

// TestAccPrefixRouterExposure: a LoadBalancer router Service is internal by
// default with the annotations EKS's built-in service controller reads (an
// internal NLB); an internet-facing one with an API key keeps the key in a
// Secret the pods read, never in state, and rolls the pods when
// api_key_version changes; dropping the key deletes the Secret.
func TestAccPrefixRouterExposure(t *testing.T) {
	c, moto := fleetSetup(t, 2)
	c.AddSystemNodes(t, "router-exposure-system", 2)
	const ns = "router-exposure"
	base := `  image      = "` + devRouterImage + `"
  scheduling = { node_selector = { "llmd.dev/pool" = "system" } }
`
	cfg := func(extra string) string { return directRouterConfig(c, moto, ns, "", base+extra) }
	ctx := context.Background()
	service := func() (*corev1.Service, error) {
		return c.Client.CoreV1().Services(ns).Get(ctx, "router", metav1.GetOptions{})
	}
	template := func() (corev1.PodTemplateSpec, error) {
		dep, err := c.Client.AppsV1().Deployments(ns).Get(ctx, "router", metav1.GetOptions{})
		if err != nil {
			return corev1.PodTemplateSpec{}, err
		}
		return dep.Spec.Template, nil
	}
	const open = `  service = { type = "LoadBalancer", internal = false }
  api_key = "s3cret-key"
`
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             checkNamespaceEmpty(c, ns),
		Steps: []resource.TestStep{
			{
				Config: cfg(`  service = { type = "LoadBalancer" }`),
				Check: func(*terraform.State) error {
					svc, err := service()
					if err != nil {
						return err
					}
					a := svc.Annotations
					if a["service.beta.kubernetes.io/aws-load-balancer-internal"] != "true" || a["service.beta.kubernetes.io/aws-load-balancer-type"] != "nlb" ||
						a["service.beta.kubernetes.io/aws-load-balancer-scheme"] != "internal" {
						return fmt.Errorf("LoadBalancer Service annotations %v, want an internal NLB", a)
					}
					return nil
				},
			},
			{
				Config: cfg(open + `  api_key_version = "1"`),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(routerRes, tfjsonpath.New("api_key"), knownvalue.Null()),
				},
				Check: func(st *terraform.State) error {
					svc, err := service()
					if err != nil {
						return err
					}
					if _, internal := svc.Annotations["service.beta.kubernetes.io/aws-load-balancer-internal"]; internal ||
						svc.Annotations["service.beta.kubernetes.io/aws-load-balancer-scheme"] != "internet-facing" {
						return fmt.Errorf("internet-facing Service annotations %v", svc.Annotations)
					}
					secret, err := c.Client.CoreV1().Secrets(ns).Get(ctx, "router-api-key", metav1.GetOptions{})
					if err != nil {
						return err
					}
					if string(secret.Data["api-key"]) != "s3cret-key" {
						return fmt.Errorf("api key Secret holds %q", secret.Data["api-key"])
					}
					tpl, err := template()
					if err != nil {
						return err
					}
					env := tpl.Spec.Containers[0].Env
					i := slices.IndexFunc(env, func(e corev1.EnvVar) bool { return e.Name == "LLMD_API_KEY" })
					if i < 0 || env[i].ValueFrom == nil || env[i].ValueFrom.SecretKeyRef == nil || env[i].ValueFrom.SecretKeyRef.Name != "router-api-key" {
						return fmt.Errorf("router env %v does not read the key from the Secret", env)
					}
					if tpl.Annotations["llmd.dev/api-key-version"] != "1" {
						return fmt.Errorf("pod template annotations %v, want the key's version", tpl.Annotations)
					}
					for _, r := range st.RootModule().Resources {
						for k, v := range r.Primary.Attributes {
							if strings.Contains(v, "s3cret-key") {
								return fmt.Errorf("the API key is in state at %s.%s", r.Type, k)
							}
						}
					}
					return nil
				},
			},
			{
				Config:           cfg(open + `  api_key_version = "2"`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(routerRes, plancheck.ResourceActionUpdate)}},
				Check: func(*terraform.State) error {
					tpl, err := template()
					if err != nil {
						return err
					}
					if tpl.Annotations["llmd.dev/api-key-version"] != "2" {
						return fmt.Errorf("a new key version does not reach the pod template: %v", tpl.Annotations)
					}
					return nil
				},
			},
			{
				Config: cfg(""),
				Check: func(*terraform.State) error {
					_, err := c.Client.CoreV1().Secrets(ns).Get(ctx, "router-api-key", metav1.GetOptions{})
					if !apierrors.IsNotFound(err) {
						return fmt.Errorf("the api key Secret outlived api_key (%v)", err)
					}
					return nil
				},
			},
		},
	})
}
