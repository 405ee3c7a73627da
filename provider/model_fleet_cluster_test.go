package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// eksTokenPrefix starts every EKS bearer token.
const eksTokenPrefix = "k8s-aws-v1."

// TestAccModelFleetOnCluster is the product's path: the cluster and the
// fleet in one configuration, the fleet reaching the cluster through the
// cluster's own `kubernetes` object with EKS tokens the provider mints from
// its assumed role. The AWS stand-in answers DescribeCluster with the local
// control plane's endpoint and CA, whose apiserver verifies each token with
// aws-iam-authenticator as EKS does. No token reaches the state or the
// trace-level logs of terraform and the provider; the fleet imports by
// <cluster>/<namespace>/<name> with every attribute verified.
func TestAccModelFleetOnCluster(t *testing.T) {
	g := newInClusterGround(t, "fleet", 3, 0)
	c := g.c
	testenv.ServePodIPs(t)
	logs := t.TempDir()
	t.Setenv("TF_LOG", "trace")
	t.Setenv("TF_ACC_LOG_PATH", filepath.Join(logs, "terraform.log"))
	t.Setenv("TF_LOG_PATH_MASK", filepath.Join(logs, "provider-%s.log"))

	const cluster, ns = "acc-fleet", "llmd-fleet"
	// The device plugin lands on the test's GPU nodes; monitoring has its own test.
	config := g.config(cluster, "  addons = { monitoring = { enabled = false } }", fmt.Sprintf(`
resource "llmd_model_fleet" "test" {
  cluster   = llmd_inference_cluster.test.kubernetes
  name      = "qwen"
  namespace = %q
  replicas  = 3
  storage   = llmd_inference_cluster.test.model_storage
}
`, ns))
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             checkNamespaceEmpty(c, ns),
		Steps: []resource.TestStep{
			{
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(fleetRes, tfjsonpath.New("ready_replicas"), knownvalue.Int64Exact(3)),
					statecheck.ExpectKnownValue("llmd_inference_cluster.test", tfjsonpath.New("kubernetes").AtMapKey("region"), knownvalue.StringExact(testenv.Region)),
					statecheck.ExpectKnownValue("llmd_inference_cluster.test", tfjsonpath.New("kubernetes").AtMapKey("gpu_node_taints"),
						knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("nvidia.com/gpu=true:NoSchedule")})),
				},
				Check: func(s *terraform.State) error {
					dep, err := c.Client.AppsV1().Deployments(ns).Get(context.Background(), "qwen", metav1.GetOptions{})
					if err != nil {
						return err
					}
					if sel := dep.Spec.Template.Spec.NodeSelector; sel["llmd.dev/pool"] != "gpu" {
						return fmt.Errorf("the pods' node selector %v is not the GPU node group's label", sel)
					}
					// The weights volume is the cluster's own file system, passed as is.
					storage := s.RootModule().Resources["llmd_inference_cluster.test"].Primary.Attributes
					pv, err := c.Client.CoreV1().PersistentVolumes().Get(context.Background(), ns+"-qwen-weights-"+storage["model_storage.file_system_id"], metav1.GetOptions{})
					if err != nil {
						return err
					}
					if csi := pv.Spec.CSI; csi == nil || csi.VolumeHandle != storage["model_storage.file_system_id"] || !strings.HasPrefix(csi.VolumeHandle, "fs-") ||
						csi.VolumeAttributes["dnsname"] != storage["model_storage.dns_name"] || csi.VolumeAttributes["mountname"] != storage["model_storage.mount_name"] ||
						csi.VolumeAttributes["mountname"] == "" {
						return fmt.Errorf("weights volume %+v, the cluster's file system %s %s %s", pv.Spec.CSI,
							storage["model_storage.file_system_id"], storage["model_storage.dns_name"], storage["model_storage.mount_name"])
					}
					playPods(t, c, ns, "qwen", 3)
					return checkNoToken(s, logs)
				},
			},
			{
				ResourceName:            fleetRes,
				ImportState:             true,
				ImportStateId:           cluster + "/" + ns + "/qwen",
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"timeouts"},
			},
		},
	})
}

// checkNoToken fails when an EKS token appears in the state or in any log
// of terraform or the provider, and when the logs are too thin to tell.
func checkNoToken(s *terraform.State, logDir string) error {
	for name, rs := range s.RootModule().Resources {
		for k, v := range rs.Primary.Attributes {
			if strings.Contains(v, eksTokenPrefix) {
				return fmt.Errorf("state of %s holds a token in %s", name, k)
			}
		}
	}
	files, err := filepath.Glob(filepath.Join(logDir, "*.log"))
	if err != nil || len(files) < 2 {
		return fmt.Errorf("want terraform's and the provider's trace logs in %s, found %v (%v)", logDir, files, err)
	}
	sawFleetLog := false
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if strings.Contains(string(b), eksTokenPrefix) {
			return fmt.Errorf("%s holds an EKS token", f)
		}
		sawFleetLog = sawFleetLog || strings.Contains(string(b), "applying model fleet")
	}
	if !sawFleetLog {
		return fmt.Errorf("the provider's own log lines are not in %v: the check would not see a leaked token", files)
	}
	return nil
}

// TestAccModelFleetDisappears: a fleet whose Deployment was deleted behind
// Terraform's back plans a create.
func TestAccModelFleetDisappears(t *testing.T) {
	c, moto := fleetSetup(t, 1)
	const ns = "fleet-gone"
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             checkNamespaceEmpty(c, ns),
		Steps: []resource.TestStep{
			{
				Config: directFleetConfig(c, moto, "gone", ns, "  replicas = 1"),
				Check: func(*terraform.State) error {
					ctx := context.Background()
					if err := c.Client.AppsV1().Deployments(ns).Delete(ctx, "gone", metav1.DeleteOptions{}); err != nil {
						return err
					}
					for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
						if _, err := c.Client.AppsV1().Deployments(ns).Get(ctx, "gone", metav1.GetOptions{}); apierrors.IsNotFound(err) {
							return nil
						}
					}
					return fmt.Errorf("Deployment still there")
				},
				ExpectNonEmptyPlan: true,
			},
			{
				Config:           directFleetConfig(c, moto, "gone", ns, "  replicas = 1"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(fleetRes, plancheck.ResourceActionCreate)}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(fleetRes, tfjsonpath.New("ready_replicas"), knownvalue.Int64Exact(1)),
				},
			},
		},
	})
}

// TestAccModelFleetUnschedulable: on a cluster made elsewhere (`kubernetes`,
// which tells the plan nothing of its nodes; with `cluster` the plan refuses
// this, TestAccModelFleetTooBigForGPUNodes), nine replicas on eight GPUs fail
// inside the create timeout with the scheduler's words; the next apply with
// eight adopts what the failed one left and converges. The timeout leaves the
// claim time to bind: Kubernetes' PV controller (v1.32 pv_controller.go,
// syncUnboundClaim) leaves a claim whose pre-bound volume is not yet in its
// cache for the next resync, 15 s (--pvclaimbinder-sync-period, which EKS
// does not let one set), and the scheduler retries the pods only after that.
func TestAccModelFleetUnschedulable(t *testing.T) {
	c, moto := fleetSetup(t, 8)
	const ns = "fleet-tight"
	began := time.Now()
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             checkNamespaceEmpty(c, ns),
		Steps: []resource.TestStep{
			{
				Config: directFleetConfig(c, moto, "tight", ns, `
  replicas = 9
  timeouts {
    create = "60s"
  }`),
				ExpectError: regexp.MustCompile(`(?s)8/9\s+ready.*1\s+Pending:\s+0/8\s+nodes\s+are\s+available:.*Insufficient\s+nvidia.com/gpu`),
			},
			{
				PreConfig: func() { t.Logf("the 9-replica create failed after %s", time.Since(began).Round(time.Second)) },
				Config:    directFleetConfig(c, moto, "tight", ns, "  replicas = 8"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(fleetRes, tfjsonpath.New("ready_replicas"), knownvalue.Int64Exact(8)),
				},
			},
		},
	})
}

// TestAccModelFleetPlanErrors: inputs that contradict the fleet's own
// settings fail at plan time, naming the attribute and the fix, before any
// cluster is reached.
func TestAccModelFleetPlanErrors(t *testing.T) {
	moto := motoSetup(t)
	c := &testenv.Cluster{Host: "https://127.0.0.1:1", CAData: []byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"), Token: "unused"}
	cases := map[string]struct{ body, want string }{
		"managed flag":    {`vllm = { extra_args = ["--block-size=16"] }`, `vllm\.extra_args:\s+"--block-size=16"\s+is\s+set\s+by\s+the\s+fleet`},
		"managed env":     {`vllm = { env = { VLLM_PORT = "9" } }`, `vllm\.env:\s+VLLM_PORT`},
		"service vllm":    {`baseline_service = { name = "vllm" }`, `(?s)baseline_service.name.*vllm`},
		"ports clash":     {`kv_events = { port = 6000, replay_port = 6000 }`, `kv_events\.replay_port:\s+equals\s+kv_events\.port`},
		"topic":           {`kv_events = { topic = "kv@{pod}" }`, `kv_events\.topic:.*may\s+use\s+only`},
		"quantity":        {`resources = { memory = "lots" }`, `resources\.memory:\s+"lots"\s+is\s+not\s+a\s+Kubernetes\s+quantity`},
		"unknown type":    {`kubernetes = { config_path = "/dev/null", instance_type = "x9.huge" }`, `resources:\s+instance\s+type\s+"x9.huge"\s+has\s+no\s+built-in`},
		"toleration form": {`scheduling = { tolerations = ["nvidia.com/gpu"] }`, `scheduling\.tolerations:.*want\s+key=value:Effect`},
		"open baseline": {`baseline_service = { type = "LoadBalancer", internal = false }`,
			`(?s)baseline_service:\s+an\s+internet-facing\s+load\s+balancer.*set\s+baseline_service.load_balancer_source_ranges`},
		"open by annotation": {`baseline_service = { type = "LoadBalancer", annotations = { "service.beta.kubernetes.io/aws-load-balancer-internal" = "false" } }`,
			`(?s)baseline_service:\s+an\s+internet-facing\s+load\s+balancer`},
		"branch revision": {`model = { source = "hf://Qwen/Qwen2.5-7B-Instruct@main" }`, `model.source:\s+revision\s+"main"\s+is\s+not\s+a\s+commit`},
		"baseline ranges without LB": {`baseline_service = { load_balancer_source_ranges = ["10.0.0.0/8"] }`,
			`baseline_service.load_balancer_source_ranges:\s+only\s+a\s+LoadBalancer`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := directFleetConfig(c, moto, "bad", "bad", "  "+tc.body)
			if strings.HasPrefix(tc.body, "kubernetes") {
				cfg = strings.Replace(cfg, "kubernetes = {", "kubernetes_unused = {", 1)
				cfg = regexp.MustCompile(`(?s)kubernetes_unused = \{.*?\n  \}\n`).ReplaceAllString(cfg, "")
			}
			resource.UnitTest(t, resource.TestCase{
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps:                    []resource.TestStep{{Config: cfg, PlanOnly: true, ExpectError: regexp.MustCompile(tc.want)}},
			})
		})
	}
	t.Run("no cluster", func(t *testing.T) {
		resource.UnitTest(t, resource.TestCase{
			ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
			Steps: []resource.TestStep{{PlanOnly: true, ExpectError: regexp.MustCompile(`(?s)set\s+cluster\s+=\s+llmd_inference_cluster`),
				Config: providerConfig(moto, "") + `
resource "llmd_model_fleet" "test" {
  name    = "x"
  storage = { claim_name = "weights" }
}`}},
		})
	})
}

// TestAccModelFleetStaging: weights staged from a pinned Hugging Face
// commit into <path>/<commit> by a Job off the GPU nodes that completes
// before the Deployment exists, with the write-only token in a Secret and
// nowhere in state. Day two: a new vLLM image is an ordinary apply (a new
// Job, the old one pruned); a new commit rolls the pods onto its own
// directory and the router's tokenizer path follows; a Job that failed
// stops the apply with the Hub's words, and the next apply runs it anew
// instead of returning the old failure (kwok, through a stage of the test
// ground's, plays the failing container); fixed, it recovers.
func TestAccModelFleetStaging(t *testing.T) {
	c, moto := fleetSetup(t, 2)
	systemNodes := c.AddSystemNodes(t, "fleet-stage-system", 1)
	const ns, token = "fleet-stage", "hf_testtokenthatmustnotleak"
	const commit1, commit2 = "a09a35458c702b33eeacc393d103063234e8bc28", "bb46c15ee4bb56c5b63245ef50fd7637234d6f75"
	cfg := func(body string) string {
		return directFleetConfig(c, moto, "staged", ns, `
  replicas = 2
  hf_token = "`+token+`"
`+body)
	}
	model := func(commit, extra string) string {
		return "  model = {\n    source = \"hf://Qwen/Qwen2.5-7B-Instruct@" + commit + "\"\n" + extra + "  }\n"
	}
	ctx := context.Background()
	jobs := func() ([]batchv1.Job, error) {
		l, err := c.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{LabelSelector: "llmd.dev/fleet=staged"})
		if err != nil {
			return nil, err
		}
		// A pruned Job may linger a moment with its pods.
		return slices.DeleteFunc(l.Items, func(j batchv1.Job) bool { return j.DeletionTimestamp != nil }), nil
	}
	// servedBy checks that the Deployment serves commit from its own
	// directory and every pod runs that template.
	servedBy := func(commit string) error {
		dep, err := c.Client.AppsV1().Deployments(ns).Get(ctx, "staged", metav1.GetOptions{})
		if err != nil {
			return err
		}
		tpl := dep.Spec.Template
		if got := tpl.Spec.Containers[0].Args[0]; got != "/models/Qwen2.5-7B-Instruct/"+commit || tpl.Annotations["llmd.dev/model-revision"] != commit {
			return fmt.Errorf("Deployment serves %s (revision %q), want commit %s", got, tpl.Annotations["llmd.dev/model-revision"], commit)
		}
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "llmd.dev/fleet=staged,app.kubernetes.io/component=decode"})
		if err != nil {
			return err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil && p.Annotations["llmd.dev/model-revision"] != commit {
				return fmt.Errorf("pod %s serves revision %q after the rollout", p.Name, p.Annotations["llmd.dev/model-revision"])
			}
		}
		return nil
	}
	var failedUID string
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             checkNamespaceEmpty(c, ns),
		Steps: []resource.TestStep{
			{
				Config: cfg(model(commit1, "")),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(fleetRes, tfjsonpath.New("ready_replicas"), knownvalue.Int64Exact(2)),
					statecheck.ExpectKnownValue(fleetRes, tfjsonpath.New("hf_token"), knownvalue.Null()),
					statecheck.ExpectKnownValue(fleetRes, tfjsonpath.New("router_target").AtMapKey("tokenizer_path"),
						knownvalue.StringExact("Qwen2.5-7B-Instruct/"+commit1+"/tokenizer.json")),
				},
				Check: func(s *terraform.State) error {
					for _, v := range s.RootModule().Resources[fleetRes].Primary.Attributes {
						if strings.Contains(v, token) {
							return fmt.Errorf("the Hugging Face token is in state")
						}
					}
					items, err := jobs()
					if err != nil || len(items) != 1 || items[0].Status.CompletionTime == nil {
						return fmt.Errorf("want one completed staging Job, got %d (%v)", len(items), err)
					}
					job := items[0]
					env := map[string]string{}
					for _, e := range job.Spec.Template.Spec.Containers[0].Env {
						env[e.Name] = e.Value
					}
					if env["REPO"] != "Qwen/Qwen2.5-7B-Instruct" || env["REVISION"] != commit1 || env["TARGET"] != "/models/Qwen2.5-7B-Instruct/"+commit1 ||
						env["NVIDIA_VISIBLE_DEVICES"] != "void" {
						return fmt.Errorf("staging Job env %v", env)
					}
					jobPods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job.Name})
					if err != nil || len(jobPods.Items) == 0 || !slices.Contains(systemNodes, jobPods.Items[0].Spec.NodeName) {
						return fmt.Errorf("staging pod not on a system node %v (%v)", systemNodes, err)
					}
					dep, err := c.Client.AppsV1().Deployments(ns).Get(ctx, "staged", metav1.GetOptions{})
					if err != nil {
						return err
					}
					if dep.CreationTimestamp.Before(job.Status.CompletionTime) {
						return fmt.Errorf("Deployment created at %s, before staging completed at %s", dep.CreationTimestamp, job.Status.CompletionTime)
					}
					secret, err := c.Client.CoreV1().Secrets(ns).Get(ctx, "staged-hf-token", metav1.GetOptions{})
					if err != nil || string(secret.Data["token"]) != token {
						return fmt.Errorf("token Secret: %v", err)
					}
					return servedBy(commit1)
				},
			},
			{
				// A vLLM upgrade with model.source set: the staging Job's image
				// follows vllm.image, and its template cannot change.
				Config: cfg(model(commit1, "") + "  vllm = { image = \"vllm/vllm-openai:v0.30.1\" }\n"),
				Check: func(*terraform.State) error {
					items, err := jobs()
					if err != nil || len(items) != 1 || items[0].Spec.Template.Spec.Containers[0].Image != "vllm/vllm-openai:v0.30.1" {
						return fmt.Errorf("after the upgrade want one staging Job on the new image, got %d (%v)", len(items), err)
					}
					return nil
				},
			},
			{
				Config: cfg(model(commit2, "") + "  vllm = { image = \"vllm/vllm-openai:v0.30.1\" }\n"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(fleetRes, tfjsonpath.New("router_target").AtMapKey("tokenizer_path"),
						knownvalue.StringExact("Qwen2.5-7B-Instruct/"+commit2+"/tokenizer.json")),
				},
				Check: func(*terraform.State) error { return servedBy(commit2) },
			},
			{
				Config: cfg(model(commit2, "    staging_image = \""+testenv.FailingJobImage+"\"\n")),
				ExpectError: regexp.MustCompile(`(?s)Job\s+fleet-stage/staged-stage-[0-9a-f]{8}\s+did\s+not\s+roll\s+out\s+\(JobFailed\).*last\s+log\s+line:\s+` +
					regexp.QuoteMeta(testenv.FailingJobLastLine)[:40]),
			},
			{
				// The same configuration again (the outage goes on): the apply
				// runs the Job anew rather than quoting the old failure.
				PreConfig: func() {
					items, err := jobs()
					if err != nil || len(items) == 0 {
						t.Fatalf("no failed staging Job (%v)", err)
					}
					for _, j := range items {
						if j.Spec.Template.Spec.Containers[0].Image == testenv.FailingJobImage {
							failedUID = string(j.UID)
						}
					}
				},
				Config:      cfg(model(commit2, "    staging_image = \""+testenv.FailingJobImage+"\"\n")),
				ExpectError: regexp.MustCompile(`(?s)\(JobFailed\)`),
			},
			{
				PreConfig: func() {
					items, err := jobs()
					if err != nil {
						t.Fatal(err)
					}
					for _, j := range items {
						if j.Spec.Template.Spec.Containers[0].Image == testenv.FailingJobImage && string(j.UID) == failedUID {
							t.Fatalf("the second apply left the failed Job %s in place instead of running it anew", j.Name)
						}
					}
				},
				Config: cfg(model(commit2, "") + "  vllm = { image = \"vllm/vllm-openai:v0.30.1\" }\n"),
				Check: func(*terraform.State) error {
					items, err := jobs()
					if err != nil || len(items) != 1 || items[0].Status.CompletionTime == nil {
						var seen []string
						for _, j := range items {
							seen = append(seen, fmt.Sprintf("%s (%s, completed %v)", j.Name, j.Spec.Template.Spec.Containers[0].Image, j.Status.CompletionTime))
						}
						return fmt.Errorf("after the recovery want one completed staging Job, got %v (%v)", seen, err)
					}
					return servedBy(commit2)
				},
			},
		},
	})
}

// missing and the apply adds it.
func TestAccModelFleetPodMonitor(t *testing.T) {
	c, moto := fleetSetup(t, 1)
	const ns = "fleet-monitor"
	cfg := directFleetConfig(c, moto, "watched", ns, "  replicas = 1")
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             checkNamespaceEmpty(c, ns),
		Steps: []resource.TestStep{
			{
				Config:            cfg,
				ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue(fleetRes, tfjsonpath.New("inventory"), knownvalue.ListSizeExact(6))},
			},
			{
				PreConfig:        func() { c.InstallPrometheusOperatorCRD(t, "podmonitors") },
				Config:           cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(fleetRes, plancheck.ResourceActionUpdate)}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(fleetRes, tfjsonpath.New("inventory").AtSliceIndex(6), knownvalue.StringExact("monitoring.coreos.com/v1/PodMonitor/fleet-monitor/watched")),
				},
				Check: func(*terraform.State) error {
					out, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/apis/monitoring.coreos.com/v1/namespaces", ns, "podmonitors", "watched").DoRaw(context.Background())
					if err != nil {
						return fmt.Errorf("reading the PodMonitor: %v", err)
					}
					if !strings.Contains(string(out), `"llmd.dev/fleet":"watched"`) || !strings.Contains(string(out), `"port":"http"`) {
						return fmt.Errorf("PodMonitor %s", out)
					}
					return nil
				},
			},
		},
	})
}

// TestAccModelFleetTooBigForGPUNodes: a fleet larger than the cluster's GPU
// node group holds fails at plan, from the cluster's exported facts alone
// (no cluster is reached), and plans while those facts are unknown (a
// cluster created or resized in the same apply), where the apply is left
// to name the Pending pods (TestAccModelFleetUnschedulable). The same plans
// show the autoscaler's targets as configured and defaulted.
func TestAccModelFleetTooBigForGPUNodes(t *testing.T) {
	moto := motoSetup(t)
	fleet := func(size, body string) string {
		return providerConfig(moto, "") + `
resource "terraform_data" "resize" {
  input = 8
}
resource "llmd_model_fleet" "test" {
  cluster = {
    name                  = "inference"
    endpoint              = "https://127.0.0.1:1"
    region                = "us-west-2"
    gpu_instance_type     = "g5.xlarge"
    gpu_node_desired_size = ` + size + `
  }
  name    = "big"
  storage = { claim_name = "weights" }
` + body + `
}`
	}
	for name, tc := range map[string]struct {
		size, body string
		want       []string
	}{
		"replicas": {"8", "  replicas = 9", []string{"replicas = 9, but the cluster's GPU node group holds 8 fleet pods: 8 nodes", "of g5.xlarge, 1 pod(s) each",
			"desired_size and max_size to 9 or more"}},
		"autoscaling maximum": {"2", "  autoscaling = { min_replicas = 2, max_replicas = 8 }",
			[]string{"autoscaling.max_replicas = 8, but the cluster's GPU node group holds 2 fleet pods"}},
		"tensor parallel": {"8", "  replicas = 1\n  vllm = { tensor_parallel_size = 2 }", []string{"vllm.tensor_parallel_size = 2 needs 2 GPUs on one node", "have 1"}},
	} {
		t.Run(name, func(t *testing.T) {
			resource.UnitTest(t, resource.TestCase{
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps:                    []resource.TestStep{{Config: fleet(tc.size, tc.body), PlanOnly: true, ExpectError: saysInOrder(tc.want...)}},
			})
		})
	}
	t.Run("size unknown until apply", func(t *testing.T) {
		resource.UnitTest(t, resource.TestCase{
			ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
			Steps:                    []resource.TestStep{{Config: fleet("terraform_data.resize.output", "  replicas = 9"), PlanOnly: true, ExpectNonEmptyPlan: true}},
		})
	})
	// The autoscaler's targets as planned: the work's default unless the
	// demand's target is set; both when both are.
	for name, tc := range map[string]struct {
		targets      string
		work, demand knownvalue.Check
	}{
		"work by default": {"", knownvalue.Int64Exact(1800), knownvalue.Null()},
		"demand alone":    {", target_per_pod = 75", knownvalue.Null(), knownvalue.Int64Exact(75)},
		"both":            {", target_per_pod = 75, target_work_per_pod = 1800", knownvalue.Int64Exact(1800), knownvalue.Int64Exact(75)},
	} {
		t.Run("autoscaling targets, "+name, func(t *testing.T) {
			targets := tfjsonpath.New("autoscaling")
			resource.UnitTest(t, resource.TestCase{
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps: []resource.TestStep{{Config: fleet("8", "  autoscaling = { min_replicas = 2, max_replicas = 8"+tc.targets+" }"),
					PlanOnly: true, ExpectNonEmptyPlan: true,
					ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPreRefresh: []plancheck.PlanCheck{
						plancheck.ExpectKnownValue("llmd_model_fleet.test", targets.AtMapKey("target_work_per_pod"), tc.work),
						plancheck.ExpectKnownValue("llmd_model_fleet.test", targets.AtMapKey("target_per_pod"), tc.demand),
					}}}},
			})
		})
	}
}
