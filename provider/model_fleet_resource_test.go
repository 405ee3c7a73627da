package provider

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

const fleetRes = "llmd_model_fleet.test"

// fleetSetup is a control plane with n fake g5.xlarge GPU nodes, pod IPs a
// local process can answer on, and moto for the provider's AWS settings.
func fleetSetup(t *testing.T, nodes int) (*testenv.Cluster, *testenv.Moto) {
	t.Helper()
	moto := motoSetup(t)
	c := testenv.StartCluster(t)
	testenv.ServePodIPs(t)
	currentNodeGroup = strings.ToLower(strings.TrimPrefix(t.Name(), "TestAcc"))
	c.AddGPUNodes(t, testenv.GPUNodeSpec{Prefix: currentNodeGroup, Count: nodes, GPUs: 1})
	return c, moto
}

// currentNodeGroup is the node group of the running fleet test's nodes
// (acceptance tests of this package run one at a time).
var currentNodeGroup string

// directFleetConfig is a fleet on the local control plane through the
// resource-level kubernetes block (a cluster made elsewhere). Its pods select
// the test's own nodes (fleetSetup's node group), so what one test leaves
// behind never takes another test's GPUs on the shared control plane.
func directFleetConfig(c *testenv.Cluster, moto *testenv.Moto, name, ns, body string) string {
	if !strings.Contains(body, "scheduling") {
		body += "\n  scheduling = { node_selector = { \"eks.amazonaws.com/nodegroup\" = \"" + currentNodeGroup + "\" } }\n"
	}
	return providerConfig(moto, "") + fmt.Sprintf(`
resource "llmd_model_fleet" "test" {
  kubernetes = {
    host                   = %q
    cluster_ca_certificate = %q
    token                  = %q
  }
  name      = %q
  namespace = %q
  storage = {
    file_system_id = "fs-0123456789abcdef0"
    dns_name       = "fs-0123456789abcdef0.fsx.us-west-2.amazonaws.com"
    mount_name     = "abcdefgh"
  }
%s
}
`, c.Host, base64.StdEncoding.EncodeToString(c.CAData), c.Token, name, ns, body)
}

// declaredPod is what the Deployment's pod spec tells a container to be.
type declaredPod struct {
	args        []string
	port        string
	blockSize   string
	model       string
	kvPort      int
	replayPort  int
	topicFormat string // with $(POD_IP)
}

func flagValue(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// readDeclaredPod reads the fleet's pod spec back from the API server.
func readDeclaredPod(t *testing.T, c *testenv.Cluster, ns, name string) declaredPod {
	t.Helper()
	dep, err := c.Client.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ctr := dep.Spec.Template.Spec.Containers[0]
	d := declaredPod{args: ctr.Args, port: flagValue(ctr.Args, "--port"), blockSize: flagValue(ctr.Args, "--block-size"),
		model: flagValue(ctr.Args, "--served-model-name")}
	var kv struct {
		Enable   bool   `json:"enable_kv_cache_events"`
		Endpoint string `json:"endpoint"`
		Replay   string `json:"replay_endpoint"`
		Topic    string `json:"topic"`
	}
	if err := json.Unmarshal([]byte(flagValue(ctr.Args, "--kv-events-config")), &kv); err != nil || !kv.Enable {
		t.Fatalf("--kv-events-config %q: %v (enabled %v)", flagValue(ctr.Args, "--kv-events-config"), err, kv.Enable)
	}
	fmt.Sscanf(kv.Endpoint, "tcp://*:%d", &d.kvPort)
	fmt.Sscanf(kv.Replay, "tcp://*:%d", &d.replayPort)
	d.topicFormat = kv.Topic
	if dep.Spec.Template.Spec.EnableServiceLinks == nil || *dep.Spec.Template.Spec.EnableServiceLinks {
		t.Error("the fleet's pods have service links on (vLLM would read VLLM_PORT)")
	}
	return d
}

// playPods starts, for every running pod of the fleet, the simulated vLLM
// replica its spec declares, bound to the pod's IP, and checks it answers
// there. It returns the pod IPs; the replicas stop before it returns, so a
// later rollout's pods can take the addresses.
func playPods(t *testing.T, c *testenv.Cluster, ns, name string, want int) []string {
	t.Helper()
	ips, sims := startDeclaredReplicas(t, c, ns, name, want)
	for _, sim := range sims {
		sim.Stop()
	}
	return ips
}

// startDeclaredReplicas is playPods without the stop: the replicas run until
// the test ends (or the caller stops them), keyed by pod name.
func startDeclaredReplicas(t *testing.T, c *testenv.Cluster, ns, name string, want int) ([]string, map[string]*testenv.RouterProcess) {
	t.Helper()
	d := readDeclaredPod(t, c, ns, name)
	tok := testenv.Tokenizer(t, "qwen3")
	pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "llmd.dev/fleet=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	sims := map[string]*testenv.RouterProcess{}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		ip := p.Status.PodIP
		ips = append(ips, ip)
		// The engine tokenizes with the model's own files, as vLLM does.
		sim := testenv.StartRouter(t, 1, "sim", "--host", ip, "--port", d.port, "--kv-port", fmt.Sprint(d.kvPort),
			"--block-size", d.blockSize, "--model", d.model, "--time-scale", "20",
			"--tokenizer", tok.TokenizerJSON, "--tokenizer-config", tok.TokenizerConfig)
		sims[p.Name] = sim
		if d.replayPort != d.kvPort+1 {
			t.Fatalf("declared replay port %d: the simulator replays at kv port + 1 (%d)", d.replayPort, d.kvPort+1)
		}
		if got, want := sim.Announced[0]["topic"], strings.ReplaceAll(d.topicFormat, "$(POD_IP)", ip); got != want {
			t.Fatalf("pod %s: vLLM would publish under %q, the simulated engine at its address under %v", p.Name, want, got)
		}
		resp, err := http.Get("http://" + ip + ":" + d.port + "/v1/models")
		if err != nil {
			t.Fatalf("pod %s at %s: %v", p.Name, ip, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), d.model) {
			t.Fatalf("pod %s serves %s, want model %s", p.Name, body, d.model)
		}
	}
	if len(ips) != want {
		t.Fatalf("%d running pods with an IP, want %d", len(ips), want)
	}
	return ips, sims
}

// baselineEndpointIPs are the ready addresses of the baseline Service's EndpointSlices.
func baselineEndpointIPs(t *testing.T, c *testenv.Cluster, ns, svc string, want int) []string {
	t.Helper()
	var ips []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		ips = nil
		slicesList, err := c.Client.DiscoveryV1().EndpointSlices(ns).List(context.Background(), metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range slicesList.Items {
			for _, e := range s.Endpoints {
				if e.Conditions.Ready == nil || *e.Conditions.Ready {
					ips = append(ips, e.Addresses...)
				}
			}
		}
		if len(ips) == want || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	slices.Sort(ips)
	return ips
}

func checkNamespaceEmpty(c *testenv.Cluster, ns string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		ctx := context.Background()
		if _, err := c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return nil
		}
		deps, _ := c.Client.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		svcs, _ := c.Client.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
		pvcs, _ := c.Client.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		return fmt.Errorf("destroy left namespace %s with %d deployments, %d services, %d claims", ns, len(deps.Items), len(svcs.Items), len(pvcs.Items))
	}
}

// TestAccModelFleetLifecycle: 8 replicas Ready on 8 GPU nodes, each pod's IP
// answered by the simulated vLLM its spec declares and listed by the
// baseline Service; a block-size change and 8 -> 6 replicas roll in place;
// a scale and an argument edit behind Terraform's back show in the plan,
// are refused with the other manager's name and repaired with
// force_conflicts; a deleted Service is recreated; destroy empties the namespace.
func TestAccModelFleetLifecycle(t *testing.T) {
	c, moto := fleetSetup(t, 8)
	const name, ns = "qwen", "fleet-life"
	cfg := func(body string) string { return directFleetConfig(c, moto, name, ns, body) }
	var created time.Time
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             checkNamespaceEmpty(c, ns),
		Steps: []resource.TestStep{
			{
				PreConfig: func() { created = time.Now() },
				Config:    cfg(""),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(fleetRes, tfjsonpath.New("ready_replicas"), knownvalue.Int64Exact(8)),
					statecheck.ExpectKnownValue(fleetRes, tfjsonpath.New("router_target"), knownvalue.ObjectExact(map[string]knownvalue.Check{
						"namespace": knownvalue.StringExact(ns), "selector": knownvalue.StringExact("app.kubernetes.io/component=decode,llmd.dev/fleet=" + name),
						"http_port": knownvalue.Int64Exact(8000), "kv_events_port": knownvalue.Int64Exact(5557), "replay_port": knownvalue.Int64Exact(5558),
						"topic": knownvalue.StringExact("kv@{ip}:{port}@{model}"), "block_size": knownvalue.Int64Exact(64),
						"served_model": knownvalue.StringExact("Qwen/Qwen2.5-7B-Instruct"), "claim_name": knownvalue.StringExact(name + "-weights-fs-0123456789abcdef0"),
						"model_path": knownvalue.StringExact("Qwen2.5-7B-Instruct"), "tokenizer_path": knownvalue.StringExact("Qwen2.5-7B-Instruct/tokenizer.json"),
						"tokenizer_config_path": knownvalue.StringExact("Qwen2.5-7B-Instruct/tokenizer_config.json"),
						"max_num_seqs":          knownvalue.Int64Exact(256), "deployment": knownvalue.StringExact(name),
						"autoscaled": knownvalue.Bool(false), "scale_to_zero_after": knownvalue.Null(),
						"s3_region": knownvalue.Null(), "s3_reader_role": knownvalue.Null(), "scheduling_policy": knownvalue.StringExact("priority")})),
					statecheck.ExpectKnownValue(fleetRes, tfjsonpath.New("baseline_endpoint"), knownvalue.StringExact("http://qwen-baseline.fleet-life.svc.cluster.local:8000")),
					statecheck.ExpectKnownValue(fleetRes, tfjsonpath.New("inventory"), knownvalue.ListExact([]knownvalue.Check{
						knownvalue.StringExact("core/v1/Namespace/-/fleet-life"), knownvalue.StringExact("core/v1/PersistentVolume/-/fleet-life-qwen-weights-fs-0123456789abcdef0"),
						knownvalue.StringExact("core/v1/PersistentVolumeClaim/fleet-life/qwen-weights-fs-0123456789abcdef0"), knownvalue.StringExact("apps/v1/Deployment/fleet-life/qwen"),
						knownvalue.StringExact("core/v1/Service/fleet-life/qwen-baseline"), knownvalue.StringExact("policy/v1/PodDisruptionBudget/fleet-life/qwen")})),
				},
				Check: func(*terraform.State) error {
					t.Logf("8-replica fleet applied in %s", time.Since(created).Round(time.Millisecond))
					ips := playPods(t, c, ns, name, 8)
					slices.Sort(ips)
					if got := baselineEndpointIPs(t, c, ns, "qwen-baseline", 8); !slices.Equal(got, ips) {
						return fmt.Errorf("baseline Service endpoints %v, want the pods %v", got, ips)
					}
					pv, err := c.Client.CoreV1().PersistentVolumes().Get(context.Background(), "fleet-life-qwen-weights-fs-0123456789abcdef0", metav1.GetOptions{})
					if err != nil {
						return err
					}
					if csi := pv.Spec.CSI; csi == nil || csi.Driver != "fsx.csi.aws.com" || csi.VolumeHandle != "fs-0123456789abcdef0" ||
						csi.VolumeAttributes["mountname"] != "abcdefgh" || pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain {
						return fmt.Errorf("weights volume %+v", pv.Spec)
					}
					return nil
				},
			},
			{
				Config: cfg(`
  replicas = 6
  vllm     = { block_size = 16 }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(fleetRes, plancheck.ResourceActionUpdate)}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(fleetRes, tfjsonpath.New("ready_replicas"), knownvalue.Int64Exact(6)),
					statecheck.ExpectKnownValue(fleetRes, tfjsonpath.New("router_target").AtMapKey("block_size"), knownvalue.Int64Exact(16)),
				},
				Check: func(*terraform.State) error {
					if d := readDeclaredPod(t, c, ns, name); d.blockSize != "16" {
						return fmt.Errorf("pods declare --block-size %s after the update", d.blockSize)
					}
					playPods(t, c, ns, name, 6)
					return nil
				},
			},
			{
				// Behind Terraform's back: kubectl scales the fleet and edits an argument.
				PreConfig: func() {
					patch := `{"spec":{"replicas":3,"template":{"spec":{"containers":[{"name":"vllm","args":["/models/x"]}]}}}}`
					if _, err := c.Client.AppsV1().Deployments(ns).Patch(context.Background(), name, k8stypes.StrategicMergePatchType, []byte(patch),
						metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
						t.Fatal(err)
					}
				},
				Config: cfg(`
  replicas = 6
  vllm     = { block_size = 16 }`),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
			},
			{
				Config: cfg(`
  replicas = 6
  vllm     = { block_size = 16 }`),
				ExpectError: regexp.MustCompile(`(?s)owned\s+by\s+another\s+field\s+manager.*kubectl-edit.*force_conflicts\s+=\s+true`),
			},
			{
				Config: cfg(`
  replicas        = 6
  vllm            = { block_size = 16 }
  force_conflicts = true`),
				ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue(fleetRes, tfjsonpath.New("ready_replicas"), knownvalue.Int64Exact(6))},
				Check: func(*terraform.State) error {
					if d := readDeclaredPod(t, c, ns, name); d.blockSize != "16" || d.model != "Qwen/Qwen2.5-7B-Instruct" {
						return fmt.Errorf("args not repaired: %q", d.args)
					}
					return nil
				},
			},
			{
				PreConfig: func() {
					if err := c.Client.CoreV1().Services(ns).Delete(context.Background(), "qwen-baseline", metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: cfg(`
  replicas        = 6
  vllm            = { block_size = 16 }
  force_conflicts = true`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(fleetRes, plancheck.ResourceActionUpdate)}},
				Check: func(*terraform.State) error {
					_, err := c.Client.CoreV1().Services(ns).Get(context.Background(), "qwen-baseline", metav1.GetOptions{})
					return err
				},
			},
		},
	})
}
