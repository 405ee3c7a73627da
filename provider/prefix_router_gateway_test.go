package provider

import (
	"context"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// TestAccPrefixRouterGatewayPlanErrors: gateway-mode settings that
// contradict the fleet or the mode are plan errors naming the attribute;
// nothing is applied.
func TestAccPrefixRouterGatewayPlanErrors(t *testing.T) {
	moto := motoSetup(t)
	c := &testenv.Cluster{Host: "https://127.0.0.1:1", CAData: []byte("unused"), Token: "unused"}
	image := "  image = \"" + devRouterImage + "\"\n"
	handFleet := directFleetConfig(c, moto, "qwen", "gw-plan-errors", "") + `
resource "llmd_prefix_router" "test" {
  kubernetes = { config_path = "/nonexistent" }
  name    = "router"
  image   = "` + devRouterImage + `"
  gateway = {}
  fleet = {
    namespace = "llmd", selector = "app in (vllm,sglang)", http_port = 8000, kv_events_port = 5557, replay_port = 5558
    topic = "kv@{ip}:{port}@{model}", block_size = 64, served_model = "m"
  }
}
`
	for _, tc := range []struct{ name, config, want string }{
		{"target port", directRouterConfig(c, moto, "gw-plan-errors", "", image+"  gateway = { target_port = 8080 }"),
			`gateway.target_port\s+=\s+8080,\s+but\s+fleet.http_port\s+=\s+8000`},
		{"selector", directRouterConfig(c, moto, "gw-plan-errors", "", image+`  gateway = { selector = { app = "vllm" } }`),
			`(?s)gateway.selector\s+=\s+\{app=vllm\},\s+but\s+the\s+fleet's\s+pods\s+carry.*Remove\s+gateway.selector`},
		{"api key", directRouterConfig(c, moto, "gw-plan-errors", "", image+"  gateway = {}\n  api_key = \"k\"\n  api_key_version = \"1\""),
			`(?s)authentication\s+is\s+the\s+gateway's\s+job.*Remove\s+api_key`},
		{"load balancer", directRouterConfig(c, moto, "gw-plan-errors", "", image+`  gateway = {}
  service = { type = "LoadBalancer" }`), `service.type\s+=\s+"LoadBalancer":\s+in\s+gateway\s+mode`},
		{"set-based selector", handFleet, `(?s)fleet.selector:\s+"app\s+in\s+\(vllm,sglang\)".*selector.matchLabels`},
		{"failure mode", directRouterConfig(c, moto, "gw-plan-errors", "", image+`  gateway = { failure_mode = "Open" }`),
			`(?s)gateway.failure_mode.*FailClose`},
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

var inferencePoolGVR = schema.GroupVersionResource{Group: "inference.networking.k8s.io", Version: "v1", Resource: "inferencepools"}

// checkPoolOverFleet: the InferencePool router (the gateway-mode router's
// name) selects exactly the fleet's fleetPods pods (named qwen-*, no router
// pod) on vLLM's port 8000, and names the router's Service and picker port
// with failureMode.
func checkPoolOverFleet(c *testenv.Cluster, ns, router string, fleetPods int, failureMode string) error {
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		return err
	}
	p, err := dyn.Resource(inferencePoolGVR).Namespace(ns).Get(ctx, router, metav1.GetOptions{})
	if err != nil {
		return err
	}
	match, _, _ := unstructured.NestedStringMap(p.Object, "spec", "selector", "matchLabels")
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(match).String()})
	if err != nil {
		return err
	}
	fleet := 0
	for _, p := range pods.Items {
		if strings.HasPrefix(p.Name, "qwen-") {
			fleet++
		}
	}
	if len(match) == 0 || len(pods.Items) != fleetPods || fleet != fleetPods {
		return fmt.Errorf("the pool's selector %v picks %d pods, %d of the fleet's; want the fleet's %d", match, len(pods.Items), fleet, fleetPods)
	}
	ports, _, _ := unstructured.NestedSlice(p.Object, "spec", "targetPorts")
	if !reflect.DeepEqual(ports, []any{map[string]any{"number": int64(8000)}}) {
		return fmt.Errorf("pool target ports %v", ports)
	}
	ref, _, _ := unstructured.NestedMap(p.Object, "spec", "endpointPickerRef")
	if ref["kind"] != "Service" || ref["name"] != router || !reflect.DeepEqual(ref["port"], map[string]any{"number": int64(9002)}) ||
		ref["failureMode"] != failureMode {
		return fmt.Errorf("endpointPickerRef %v", ref)
	}
	return nil
}

// TestAccPrefixRouterGateway: on a real API server without the InferencePool
// CRD, gateway mode is an apply error naming the cluster add-on that
// installs it, and nothing is applied; once GIE's CRD is served, the router
// is rendered as the pool's endpoint picker: the InferencePool over the
// fleet's pods (their labels, vLLM's port) names the router's Service and
// picker port with failure_mode, the Service carries that port with GIE's
// appProtocol, the pods serve the picker only and are probed over gRPC, the
// Role may read the pool; a change of failure_mode updates the pool in
// place, and destroy empties the namespace.
func TestAccPrefixRouterGateway(t *testing.T) {
	c, moto := fleetSetup(t, 2)
	c.AddSystemNodes(t, "router-gateway-system", 1)
	const ns = "router-gateway"
	cfg := func(gateway string) string {
		return directRouterConfig(c, moto, ns, "", `  image    = "`+devRouterImage+`"
  replicas = 1
  scheduling = { node_selector = { "llmd.dev/pool" = "system" } }
  gateway  = `+gateway)
	}
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	pool := func() (*unstructured.Unstructured, error) {
		return dyn.Resource(inferencePoolGVR).Namespace(ns).Get(ctx, "router", metav1.GetOptions{})
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             checkNamespaceEmpty(c, ns),
		Steps: []resource.TestStep{
			{
				Config: cfg("{}"),
				ExpectError: regexp.MustCompile(`(?s)gateway:\s+the\s+cluster\s+does\s+not\s+serve\s+inference.networking.k8s.io/v1,\s+Kind=InferencePool.*` +
					`llmd_inference_cluster\s+\(addons.inference_extension\s+=\s+\{\s+enabled\s+=\s+true\s+\},\s+GIE\s+v1.6.0\)`),
			},
			{
				PreConfig: func() {
					if _, err := c.Client.AppsV1().Deployments(ns).Get(ctx, "router", metav1.GetOptions{}); err == nil {
						t.Fatal("the refused gateway-mode apply left a router Deployment")
					}
					c.InstallInferencePoolCRD(t)
				},
				Config: cfg("{}"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(routerRes, tfjsonpath.New("inference_pool"), knownvalue.StringExact("router")),
					statecheck.ExpectKnownValue(routerRes, tfjsonpath.New("url"), knownvalue.StringExact("")),
					statecheck.ExpectKnownValue(routerRes, tfjsonpath.New("gateway").AtMapKey("failure_mode"), knownvalue.StringExact("FailClose")),
				},
				Check: func(*terraform.State) error {
					if err := checkPoolOverFleet(c, ns, "router", 2, "FailClose"); err != nil {
						return err
					}
					svc, err := c.Client.CoreV1().Services(ns).Get(ctx, "router", metav1.GetOptions{})
					if err != nil {
						return err
					}
					var grpcPort *corev1.ServicePort
					for i, sp := range svc.Spec.Ports {
						if sp.Port == 9002 {
							grpcPort = &svc.Spec.Ports[i]
						}
					}
					if svc.Spec.Type != corev1.ServiceTypeClusterIP || grpcPort == nil || grpcPort.Name != "grpc-ext-proc" ||
						grpcPort.AppProtocol == nil || *grpcPort.AppProtocol != "http2" {
						return fmt.Errorf("service %+v", svc.Spec)
					}
					dep, err := c.Client.AppsV1().Deployments(ns).Get(ctx, "router", metav1.GetOptions{})
					if err != nil {
						return err
					}
					ctr := dep.Spec.Template.Spec.Containers[0]
					if args := strings.Join(ctr.Args, " "); !strings.Contains(args, "--picker-listen :9002") || !strings.Contains(args, "--picker-only") ||
						!strings.Contains(args, "--picker-health-listen :9003") {
						return fmt.Errorf("router args %q", args)
					}
					for svcName, pr := range map[string]*corev1.Probe{"readiness": ctr.ReadinessProbe, "liveness": ctr.LivenessProbe} {
						if pr == nil || pr.GRPC == nil || pr.GRPC.Port != 9003 || pr.GRPC.Service == nil || *pr.GRPC.Service != svcName {
							return fmt.Errorf("%s probe %+v", svcName, pr)
						}
					}
					cm, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, "router", metav1.GetOptions{})
					if err != nil {
						return err
					}
					if y := cm.Data["router.yaml"]; !strings.Contains(y, "inference_pool: router") || !strings.Contains(y, `selector: ""`) {
						return fmt.Errorf("router config does not follow the pool:\n%s", y)
					}
					role, err := c.Client.RbacV1().Roles(ns).Get(ctx, "router", metav1.GetOptions{})
					if err != nil {
						return err
					}
					readsPools := slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
						return slices.Equal(r.APIGroups, []string{"inference.networking.k8s.io"}) && slices.Equal(r.Resources, []string{"inferencepools"}) &&
							slices.Equal(r.Verbs, []string{"get", "list", "watch"})
					})
					if !readsPools {
						return fmt.Errorf("role rules %+v", role.Rules)
					}
					rb, err := c.Client.RbacV1().RoleBindings(ns).Get(ctx, "router", metav1.GetOptions{})
					if err != nil || rb.RoleRef.Name != "router" || len(rb.Subjects) != 1 || rb.Subjects[0].Name != "router" {
						return fmt.Errorf("role binding %+v %v", rb, err)
					}
					return nil
				},
			},
			{
				Config: cfg(`{ failure_mode = "FailOpen" }`),
				Check: func(*terraform.State) error {
					p, err := pool()
					if err != nil {
						return err
					}
					mode, _, _ := unstructured.NestedString(p.Object, "spec", "endpointPickerRef", "failureMode")
					if mode != "FailOpen" {
						return fmt.Errorf("failureMode %q after the update", mode)
					}
					if l := p.GetLabels(); l["llmd.dev/router"] != "router" {
						return fmt.Errorf("pool labels %v", l)
					}
					return nil
				},
			},
		},
	})
}
