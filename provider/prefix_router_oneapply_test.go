package provider

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
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
	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
	"github.com/llmd-dev/terraform-provider-llmd/router/config"
)

const routerRes = "llmd_prefix_router.test"

// devRouterImage names the router image in tests: the provider under test is
// a development build, which pins none. The pods it declares are played by
// the image built from this commit (testenv.RouterImageRootfs), started from
// its own root filesystem.
const devRouterImage = "ghcr.io/llmd-dev/llmd-router:dev"

// playedRouter is one router pod played by the router image.
type playedRouter struct {
	pod, url string
}

// playRouterPods starts, for every running router pod, the router image's
// entrypoint from the image's own root filesystem exactly as the pod spec
// says: its args and env, the ConfigMap's files at its mount path, the Qwen
// tokenizer files testenv provides at the fleet's paths under the claim's
// mount, and the pod's own ServiceAccount token (minted through the
// TokenRequest API) where the kubelet mounts it, so the router's in-cluster
// configuration lists and watches the fleet's pods through the real API
// server under the Role the resource made. One thing differs from a pod: the
// process shares this machine's network, so the config listens on the pod's
// IP rather than on every address.
func playRouterPods(t *testing.T, c *testenv.Cluster, ns, name string, want int) []playedRouter {
	t.Helper()
	ctx := context.Background()
	dep, err := c.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := dep.Spec.Template.Spec
	ctr := spec.Containers[0]
	var cmName, claim string
	for _, v := range spec.Volumes {
		if v.ConfigMap != nil {
			cmName = v.ConfigMap.Name
		}
		if v.PersistentVolumeClaim != nil {
			claim = v.PersistentVolumeClaim.ClaimName
		}
	}
	cm, err := c.Client.CoreV1().ConfigMaps(ns).Get(ctx, cmName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var mounts = map[string]string{}
	for _, m := range ctr.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	configPath := flagValue(ctr.Args, "--config")
	if filepath.Dir(configPath) != mounts["config"] {
		t.Fatalf("--config %s is not in the ConfigMap's mount %s", configPath, mounts["config"])
	}
	cfg, err := config.Parse([]byte(cm.Data[filepath.Base(configPath)]))
	if err != nil {
		t.Fatalf("the router would refuse its ConfigMap: %v", err)
	}
	if claim == "" || cfg.Tokenizer.JSON == "" || !strings.HasPrefix(cfg.Tokenizer.JSON, mounts["weights"]+"/") {
		t.Fatalf("tokenizer %s is not on the claim %q mounted at %s", cfg.Tokenizer.JSON, claim, mounts["weights"])
	}
	// The played process gets the container's env (the Go runtime's
	// settings); a value from a Secret or a field the test could not play.
	var env []string
	for _, e := range ctr.Env {
		if e.ValueFrom != nil {
			t.Fatalf("the router container takes env %s from %+v, which the test does not play", e.Name, e.ValueFrom)
		}
		env = append(env, e.Name+"="+e.Value)
	}
	if ctr.Image != devRouterImage || len(ctr.Command) != 0 {
		t.Fatalf("router container runs %s %v, want the image %s's own entrypoint", ctr.Image, ctr.Command, devRouterImage)
	}
	// The claim's content, as far as the router reads it: the tokenizer files at the fleet's paths.
	tokFiles := testenv.Tokenizer(t, "qwen3")
	files := map[string][]byte{}
	for from, to := range map[string]string{tokFiles.TokenizerJSON: cfg.Tokenizer.JSON, tokFiles.TokenizerConfig: cfg.Tokenizer.Config} {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		files[to] = b
	}
	img := testenv.RouterImageRootfs(t)
	host, apiPort, _ := strings.Cut(strings.TrimPrefix(c.Host, "https://"), ":")

	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "llmd.dev/router=" + name})
	if err != nil {
		t.Fatal(err)
	}
	var out []playedRouter
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" || p.DeletionTimestamp != nil {
			continue
		}
		if p.Spec.ServiceAccountName != spec.ServiceAccountName || p.Spec.NodeSelector["llmd.dev/pool"] != "system" {
			t.Fatalf("pod %s runs as %q on %v", p.Name, p.Spec.ServiceAccountName, p.Spec.NodeSelector)
		}
		_, port, _ := strings.Cut(cfg.Listen, ":")
		podCfg := *cfg
		podCfg.Listen = p.Status.PodIP + ":" + port
		// Each pod has its own network namespace; the played pods share the
		// host's, so each binds its peer port on its own pod IP.
		if _, peerPort, ok := strings.Cut(cfg.Peers.Listen, ":"); ok {
			podCfg.Peers.Listen = p.Status.PodIP + ":" + peerPort
		}
		if a := cfg.Autoscaling; a != nil && a.MetricsListen != "" {
			_, apiPort, _ := strings.Cut(a.MetricsListen, ":")
			played := *a
			played.MetricsListen = p.Status.PodIP + ":" + apiPort
			podCfg.Autoscaling = &played
		}
		yaml, err := podCfg.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		tok, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, p.Spec.ServiceAccountName, &authv1.TokenRequest{
			Spec: authv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(3600)),
				BoundObjectRef: &authv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("minting pod %s's ServiceAccount token: %v", p.Name, err)
		}
		podFiles := map[string][]byte{}
		for k, v := range cm.Data { // a ConfigMap volume projects every key as a file
			podFiles[filepath.Join(mounts["config"], k)] = []byte(v)
		}
		podFiles[configPath] = yaml
		for k, v := range map[string][]byte{
			"/var/run/secrets/kubernetes.io/serviceaccount/token":     []byte(tok.Status.Token),
			"/var/run/secrets/kubernetes.io/serviceaccount/ca.crt":    c.CAData,
			"/var/run/secrets/kubernetes.io/serviceaccount/namespace": []byte(ns)} {
			podFiles[k] = v
		}
		for k, v := range files {
			podFiles[k] = v
		}
		proc := img.Start(t, testenv.Container{Args: ctr.Args, PodIP: p.Status.PodIP, Files: podFiles,
			Env: append([]string{"KUBERNETES_SERVICE_HOST=" + host, "KUBERNETES_SERVICE_PORT=" + apiPort}, env...)})
		url := "http://" + podCfg.Listen
		waitUntil(t, "router pod "+p.Name+" to see the fleet", func() bool {
			resp, err := http.Get(url + "/readyz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}, proc.Logs)
		out = append(out, playedRouter{pod: p.Name, url: url})
	}
	if len(out) != want {
		t.Fatalf("%d running router pods, want %d", len(out), want)
	}
	return out
}

func ptrTo[T any](v T) *T { return &v }

func waitUntil(t *testing.T, what string, ok func() bool, logs func() string) {
	t.Helper()
	waitWithin(t, 30*time.Second, what, ok, logs)
}

// waitWithin is waitUntil with another bound.
func waitWithin(t *testing.T, bound time.Duration, what string, ok func() bool, logs func() string) {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: gave up after %s\n%s", what, bound, logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// prefixPrompt is 256 shared tokens (four 64-token blocks) of prefix seed,
// then 8 tokens unique to the request.
func prefixPrompt(seed, request uint32) []uint32 {
	out := make([]uint32, 0, 264)
	for i := uint32(0); i < 256; i++ {
		out = append(out, 1000+(seed*7919+i*104729)%50000)
	}
	for i := uint32(0); i < 8; i++ {
		out = append(out, 60000+request*8+i)
	}
	return out
}

func completionBody(t *testing.T, model string, prompt []uint32) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"model": model, "prompt": prompt, "max_tokens": 4})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// postCompletion sends one completion and returns the pod header and status.
func postCompletion(t *testing.T, url string, body []byte) (string, int) {
	t.Helper()
	resp, err := http.Post(url+"/v1/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s/v1/completions: %v", url, err)
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	return resp.Header.Get("X-Llmd-Pod"), resp.StatusCode
}

// routeExplained is /v1/route's answer, as far as the test reads it.
type routeExplained struct {
	Pod    string `json:"pod"`
	Blocks int    `json:"blocks"`
	Chosen int    `json:"chosen"`
	Scores []struct {
		Pod string `json:"pod"`
		Hit struct {
			GPUBlocks int `json:"gpu_blocks"`
		} `json:"hit"`
	} `json:"scores"`
}

func explainRoute(t *testing.T, url string, body []byte) routeExplained {
	t.Helper()
	resp, err := http.Post(url+"/v1/route", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e routeExplained
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &e) != nil {
		t.Fatalf("/v1/route: status %d: %s", resp.StatusCode, b)
	}
	return e
}

// oneApplyConfig is the whole product in one configuration: the cluster
// (moto + the AWS stand-in, whose DescribeCluster points at the local
// control plane) with its in-cluster add-ons (monitoring from the test's
// chart repository), the fleet on it and the router in front of the fleet.
func oneApplyConfig(g inClusterGround, repo *testenv.ChartRepo, cluster, ns, scoring string) string {
	addons := strings.TrimSuffix(monitoringAddon(repo, true, ""), "  }") + "    inference_extension = {}\n  }"
	return g.config(cluster, addons, fmt.Sprintf(`
resource "llmd_model_fleet" "test" {
  cluster   = llmd_inference_cluster.test.kubernetes
  name      = "qwen"
  namespace = %q
  replicas  = 3
  storage   = llmd_inference_cluster.test.model_storage
}

resource "llmd_prefix_router" "test" {
  cluster = llmd_inference_cluster.test.kubernetes
  fleet   = llmd_model_fleet.test.router_target
  name    = "router"
  image   = %q
%s
}

resource "llmd_prefix_router" "picker" {
  cluster = llmd_inference_cluster.test.kubernetes
  fleet   = llmd_model_fleet.test.router_target
  name    = "picker"
  image   = %q
  gateway = {}
}
`, ns, devRouterImage, scoring, devRouterImage))
}

// oneApplyFlow gives the router its own priority classes; its pods'
// capacity is the fleet's max_num_seqs (256) by default.
const oneApplyFlow = `
  limits = {
    priority_classes = [{ name = "interactive", ttl = "60s" }, { name = "standard" }, { name = "batch", ttl = "10s" }]
  }`

// oneApplyKeys adds a tenant's key, by its digest.
const oneApplyKeys = `
  api_keys = [{ sha256 = sha256("key-of-acme"), tenant = "acme", class = "standard" }]`

// pickerRes is the one-apply test's second router, in gateway mode.
const pickerRes = "llmd_prefix_router.picker"

// TestAccPrefixRouterOneApply is the product's headline: ONE apply of
// cluster (with its device plugin on every GPU node, monitoring, whose
// CRDs the fleet's PodMonitor and the router's ServiceMonitor then find, and
// GIE's InferencePool CRD) + fleet + router + a second router in gateway
// mode (the InferencePool over the fleet's pods naming it as the endpoint
// picker, for a team's own gateway), then the containers are played from the
// cluster says (each Deployment's pod spec read back from the API): an
// `llmd-router sim` per fleet pod on its IP, `llmd-router serve` per router
// pod with its spec's args, its ConfigMap and its own ServiceAccount's
// token. Requests sharing a prefix land on one pod through the router and
// spread through the baseline Service's endpoints; a second plan is empty; a
// scoring change rolls the router pods only; the router imports by
// <cluster>/<namespace>/<name> with every attribute verified; destroy leaves nothing tagged
// in AWS and nothing in the namespace.
func TestAccPrefixRouterOneApply(t *testing.T) {
	began := time.Now()
	g := newInClusterGround(t, "oneapply", 3, 2)
	aws, c := g.aws, g.c
	testenv.ServePodIPs(t)
	repo := startMonitoringRepo(t, c)
	const cluster, ns = "acc-oneapply", "llmd-oneapply"
	const model = "Qwen/Qwen2.5-7B-Instruct"
	// The cluster installs GIE's CRD here, and its add-on never deletes it
	// (that would delete every pool): the package's tests share the control
	// plane, so it is gone before and after.
	deleteInferencePoolCRD(t, c)
	t.Cleanup(func() { deleteInferencePoolCRD(t, c) })

	var fleetGeneration, routerGeneration int64
	var routerChecksum string
	var applied time.Time
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             resource.ComposeTestCheckFunc(checkNothingOwned(t, aws, cluster), checkNamespaceEmpty(c, ns)),
		Steps: []resource.TestStep{
			{
				Config: oneApplyConfig(g, repo, cluster, ns, oneApplyFlow),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(routerRes, tfjsonpath.New("url"), knownvalue.StringExact("http://router."+ns+".svc.cluster.local:8000")),
					statecheck.ExpectKnownValue(routerRes, tfjsonpath.New("namespace"), knownvalue.StringExact(ns)),
					statecheck.ExpectKnownValue(fleetRes, tfjsonpath.New("ready_replicas"), knownvalue.Int64Exact(3)),
					statecheck.ExpectKnownValue(pickerRes, tfjsonpath.New("inference_pool"), knownvalue.StringExact("picker")),
				},
				Check: func(s *terraform.State) error {
					applied = time.Now()
					if err := checkPoolOverFleet(c, ns, "picker", 3, "FailClose"); err != nil {
						return err
					}
					objects := 0
					for _, name := range []string{fleetRes, routerRes, pickerRes} {
						var n int
						fmt.Sscan(s.RootModule().Resources[name].Primary.Attributes["inventory.#"], &n)
						objects += n
					}
					t.Logf("one apply of cluster + fleet + router + gateway-mode router: %s since the test began, %d Kubernetes objects (fleet + routers' inventories)",
						applied.Sub(began).Round(time.Millisecond), objects)
					if err := g.checkDevicePluginOnGPUNodes(); err != nil {
						return err
					}
					// Monitoring came up in the same apply, before the fleet and the router asked for its CRDs.
					for _, inv := range []struct{ res, want string }{{fleetRes, "monitoring.coreos.com/v1/PodMonitor/" + ns + "/qwen"},
						{routerRes, "monitoring.coreos.com/v1/ServiceMonitor/" + ns + "/router"}} {
						if !slices.Contains(inventoryOf(s, inv.res), inv.want) {
							return fmt.Errorf("%s's inventory %v lacks %s", inv.res, inventoryOf(s, inv.res), inv.want)
						}
					}

					fleetIPs, _ := startDeclaredReplicas(t, c, ns, "qwen", 3)
					routers := playRouterPods(t, c, ns, "router", 2)
					fleetPods := map[string]bool{}
					pods, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "llmd.dev/fleet=qwen"})
					if err != nil {
						return err
					}
					for _, p := range pods.Items {
						fleetPods[p.Name] = true
					}

					// Through the first router pod's address: one pod per prefix.
					chosen := map[uint32]map[string]int{}
					for req := uint32(0); req < 8; req++ {
						prefix := req % 2
						pod, status := postCompletion(t, routers[0].url, completionBody(t, model, prefixPrompt(prefix+1, req)))
						if status != http.StatusOK || !fleetPods[pod] {
							return fmt.Errorf("request %d: status %d from %q, want 200 from a fleet pod", req, status, pod)
						}
						if chosen[prefix] == nil {
							chosen[prefix] = map[string]int{}
						}
						chosen[prefix][pod]++
					}
					for prefix, pods := range chosen {
						if len(pods) != 1 {
							return fmt.Errorf("prefix %d went to %v through the router, want one pod", prefix, pods)
						}
					}
					if err := checkRouterFlow(t, c, ns, routers[0].url, model); err != nil {
						return err
					}
					// /v1/route explains a fresh request of prefix 0 as cached on that pod, on both router pods
					// (each follows the KV events on its own).
					var podA string
					for p := range chosen[0] {
						podA = p
					}
					for _, rt := range routers {
						var e routeExplained
						deadline := time.Now().Add(10 * time.Second)
						for {
							e = explainRoute(t, rt.url, completionBody(t, model, prefixPrompt(1, 99)))
							if (e.Pod == podA && e.Scores[e.Chosen].Hit.GPUBlocks == 4) || time.Now().After(deadline) {
								break
							}
							time.Sleep(100 * time.Millisecond)
						}
						if e.Pod != podA || e.Blocks != 4 || e.Scores[e.Chosen].Hit.GPUBlocks != 4 {
							return fmt.Errorf("router %s explains %+v, want pod %s with the 4 shared blocks cached", rt.pod, e, podA)
						}
					}

					// The same requests round-robin over the baseline Service's endpoints spread over the pods.
					endpoints := baselineEndpointIPs(t, c, ns, "qwen-baseline", 3)
					slices.Sort(fleetIPs)
					if !slices.Equal(endpoints, fleetIPs) {
						return fmt.Errorf("baseline endpoints %v, want the fleet pods %v", endpoints, fleetIPs)
					}
					spread := map[uint32]map[string]bool{}
					for req := uint32(0); req < 8; req++ {
						prefix, ip := req%2, endpoints[int(req/2)%len(endpoints)]
						if _, status := postCompletion(t, "http://"+ip+":8000", completionBody(t, model, prefixPrompt(prefix+1, req))); status != http.StatusOK {
							return fmt.Errorf("baseline request %d to %s: status %d", req, ip, status)
						}
						if spread[prefix] == nil {
							spread[prefix] = map[string]bool{}
						}
						spread[prefix][ip] = true
					}
					for prefix, ips := range spread {
						if len(ips) < 2 {
							return fmt.Errorf("prefix %d through the baseline reached %v only", prefix, ips)
						}
					}
					t.Logf("router: prefix 0 -> %v, prefix 1 -> %v; baseline: prefix 0 -> %d pods, prefix 1 -> %d pods",
						chosen[0], chosen[1], len(spread[0]), len(spread[1]))

					fleet, err := c.Client.AppsV1().Deployments(ns).Get(context.Background(), "qwen", metav1.GetOptions{})
					if err != nil {
						return err
					}
					router, err := c.Client.AppsV1().Deployments(ns).Get(context.Background(), "router", metav1.GetOptions{})
					if err != nil {
						return err
					}
					fleetGeneration, routerGeneration = fleet.Generation, router.Generation
					routerChecksum = router.Spec.Template.Annotations[workloads.ConfigChecksumKey]
					return nil
				},
			},
			{
				Config:   oneApplyConfig(g, repo, cluster, ns, oneApplyFlow),
				PlanOnly: true,
			},
			{
				ResourceName:            routerRes,
				ImportState:             true,
				ImportStateId:           cluster + "/" + ns + "/router",
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"timeouts"},
			},
			{
				Config: oneApplyConfig(g, repo, cluster, ns, oneApplyFlow+oneApplyKeys+`
  scoring = {
    scorers = [
      { type = "prefix", weight = 1 },
      { type = "queue", weight = 1 },
    ]
  }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(routerRes, plancheck.ResourceActionUpdate),
					plancheck.ExpectResourceAction(fleetRes, plancheck.ResourceActionNoop),
					plancheck.ExpectResourceAction(pickerRes, plancheck.ResourceActionNoop),
					plancheck.ExpectResourceAction("llmd_inference_cluster.test", plancheck.ResourceActionNoop),
				}},
				Check: func(*terraform.State) error {
					fleet, err := c.Client.AppsV1().Deployments(ns).Get(context.Background(), "qwen", metav1.GetOptions{})
					if err != nil {
						return err
					}
					router, err := c.Client.AppsV1().Deployments(ns).Get(context.Background(), "router", metav1.GetOptions{})
					if err != nil {
						return err
					}
					if fleet.Generation != fleetGeneration {
						return fmt.Errorf("the fleet's Deployment moved from generation %d to %d on a scoring change", fleetGeneration, fleet.Generation)
					}
					if router.Generation == routerGeneration || router.Spec.Template.Annotations[workloads.ConfigChecksumKey] == routerChecksum {
						return fmt.Errorf("the router's pods did not roll (generation %d, checksum %s)", router.Generation, routerChecksum)
					}
					cm, err := c.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "router", metav1.GetOptions{})
					if err != nil {
						return err
					}
					cfg, err := config.Parse([]byte(cm.Data[workloads.RouterConfigFile]))
					if err != nil {
						return err
					}
					if len(cfg.Scoring.Scorers) != 2 || cfg.Scoring.Scorers[1].Type != "queue" {
						return fmt.Errorf("the ConfigMap scores with %+v", cfg.Scoring.Scorers)
					}
					acme := sha256.Sum256([]byte("key-of-acme"))
					if keys := cm.Data[workloads.RouterAPIKeysFile]; keys != hex.EncodeToString(acme[:])+" tenant=acme class=standard\n" ||
						flagValue(router.Spec.Template.Spec.Containers[0].Args, "--api-keys-file") != workloads.RouterConfigDir+"/"+workloads.RouterAPIKeysFile {
						return fmt.Errorf("api_keys: the ConfigMap lists %q for %q", keys, router.Spec.Template.Spec.Containers[0].Args)
					}
					t.Logf("scoring change: router generation %d -> %d, fleet generation %d unchanged", routerGeneration, router.Generation, fleet.Generation)
					return nil
				},
			},
			{
				ResourceName:            routerRes,
				ImportState:             true,
				ImportStateId:           cluster + "/" + ns + "/router",
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"timeouts"},
			},
		},
	})
}

// checkRouterFlow checks the router pod at url admits as its limits say:
// each pod's capacity is the fleet's max_num_seqs, its classes are the
// configuration's and reach the engines as their priority (the fleet's
// default scheduling policy is priority), a request naming one is served
// and one naming another class is 400 listing them.
func checkRouterFlow(t *testing.T, c *testenv.Cluster, ns, url, model string) error {
	t.Helper()
	dep, err := c.Client.AppsV1().Deployments(ns).Get(context.Background(), "router", metav1.GetOptions{})
	if err != nil {
		return err
	}
	args := dep.Spec.Template.Spec.Containers[0].Args
	if flagValue(args, "--max-in-flight-per-pod") != "256" || flagValue(args, "--max-pending-per-pod") != "2" ||
		flagValue(args, "--max-pending-prefill-per-pod") != "2048" || flagValue(args, "--prefill-reserve") != "0.25" ||
		flagValue(args, "--priority-classes") != "interactive=1m0s,standard,batch=10s" || !slices.Contains(args, "--engine-priority") {
		return fmt.Errorf("router args %q: want the fleet's max_num_seqs 256 per pod, 2 pending, 2,048 prefill tokens pending with a quarter of the pods held open, "+
			"the configured classes and --engine-priority", args)
	}
	body := completionBody(t, model, prefixPrompt(7, 1))
	for class, want := range map[string]int{"interactive": http.StatusOK, "premium": http.StatusBadRequest} {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/completions", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-llmd-priority", class)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want || (want == http.StatusBadRequest && !strings.Contains(string(b), "interactive, standard, batch")) {
			return fmt.Errorf("x-llmd-priority %s: status %d: %s", class, resp.StatusCode, b)
		}
	}
	return nil
}
