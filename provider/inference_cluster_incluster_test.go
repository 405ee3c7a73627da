package provider

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/llmd-dev/terraform-provider-llmd/internal/addons"
	"github.com/llmd-dev/terraform-provider-llmd/internal/awsinfra"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
)

const clusterRes = "llmd_inference_cluster.test"

// inClusterGround is a cluster test's ground on the local control plane:
// moto behind the AWS stand-in, whose DescribeCluster answers with the
// control plane's endpoint and CA; a deployer role the provider assumes,
// mapped to cluster admin by the control plane's EKS token webhook; kwok
// GPU nodes labelled as the GPU node group's nodes are, and system nodes.
type inClusterGround struct {
	standIn            *testenv.AWSStandIn
	aws                *awsinfra.Clients
	moto               *testenv.Moto
	c                  *testenv.Cluster
	roleARN            string
	gpuNodes, sysNodes []string
	// karpenterRepo serves Karpenter's chart where Karpenter makes the GPU
	// nodes (newKarpenterGround), up to maxGPUNodes; autoMode is set where
	// EKS Auto Mode makes them (newAutoModeGround).
	karpenterRepo string
	autoMode      bool
	maxGPUNodes   int
}

// newKarpenterGround is an in-cluster ground whose GPU nodes Karpenter
// makes (compute.mode = "karpenter"), up to maxGPUNodes: no GPU node at
// first, Karpenter's own chart at testenv.KarpenterVersion served from a
// local repository, and its controller (the real one, testenv's Karpenter
// build) played from the release's Deployment while it exists, with a
// batch window of 2 s instead of 10 s.
func newKarpenterGround(t *testing.T, prefix string, maxGPUNodes, systems int) inClusterGround {
	t.Helper()
	g := newInClusterGround(t, prefix, 0, systems)
	g.karpenterRepo, g.maxGPUNodes = testenv.StartChartRepo(t, testenv.KarpenterChart(t)).URL, maxGPUNodes
	testenv.PlayKarpenter(t, g.c, g.standIn, "kube-system", "karpenter", "BATCH_MAX_DURATION=2s", "BATCH_IDLE_DURATION=200ms")
	return g
}

// newAutoModeGround is an in-cluster ground whose GPU nodes EKS Auto Mode
// makes (compute.mode = "auto_mode") for the cluster named cluster, up to
// maxGPUNodes: no GPU node at first, and Auto Mode's node provisioning
// played by testenv.PlayAutoMode (Karpenter's own build behind Auto Mode's
// NodeClass) while the stand-in reports the cluster's Auto Mode compute on.
func newAutoModeGround(t *testing.T, prefix, cluster string, maxGPUNodes, systems int) inClusterGround {
	t.Helper()
	g := newInClusterGround(t, prefix, 0, systems)
	g.autoMode, g.maxGPUNodes = true, maxGPUNodes
	testenv.PlayAutoMode(t, g.c, g.standIn, cluster)
	return g
}

// karpenterNodes are the GPU nodes Karpenter made.
func (g inClusterGround) karpenterNodes(t *testing.T) []string {
	return g.nodesLabelled(t, "karpenter.sh/nodepool")
}

// nodesLabelled are the nodes selector selects that are not being deleted.
func (g inClusterGround) nodesLabelled(t *testing.T, selector string) []string {
	list, err := g.c.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range list.Items {
		if n.DeletionTimestamp == nil {
			names = append(names, n.Name)
		}
	}
	return names
}

func newInClusterGround(t *testing.T, prefix string, gpus, systems int) inClusterGround {
	t.Helper()
	standIn, aws := standInSetup(t)
	g := inClusterGround{standIn: standIn, aws: aws, moto: &testenv.Moto{URL: standIn.URL}, c: testenv.StartCluster(t)}
	g.gpuNodes = g.c.AddGPUNodes(t, testenv.GPUNodeSpec{Prefix: prefix + "-gpu", Count: gpus, GPUs: 1, Labels: map[string]string{"llmd.dev/pool": "gpu"}})
	if systems > 0 {
		g.sysNodes = g.c.AddSystemNodes(t, prefix+"-system", systems)
	}
	standIn.PointAllClustersAt(g.c)
	g.roleARN = createRole(t, g.moto, "/platform/", "llmd-"+prefix+"-deployer")
	g.c.MapIAMPrincipal(t, g.roleARN, "system:masters")
	return g
}

// provider is the provider block assuming the deployer role.
func (g inClusterGround) provider() string {
	return providerConfig(g.moto, `
  assume_role {
    role_arn     = "`+g.roleARN+`"
    session_name = "tf"
  }`)
}

// config is the provider assuming the deployer role and a cluster of
// len(gpuNodes) GPU nodes; extra goes inside the cluster resource, rest after it.
func (g inClusterGround) config(name, extra, rest string) string {
	gpu := fmt.Sprintf(`  gpu_node_group = {
    desired_size = %[1]d
    min_size     = %[1]d
    max_size     = %[1]d
  }`, len(g.gpuNodes))
	if g.karpenterRepo != "" {
		gpu = fmt.Sprintf(`  gpu_node_group = { max_size = %d }
  compute = {
    mode                 = "karpenter"
    karpenter_version    = %q
    karpenter_repository = %q
    consolidate_after    = "0s"
  }`, g.maxGPUNodes, testenv.KarpenterVersion, g.karpenterRepo)
	}
	if g.autoMode {
		gpu = fmt.Sprintf(`  gpu_node_group = { max_size = %d }
  compute = {
    mode              = "auto_mode"
    consolidate_after = "0s"
  }`, g.maxGPUNodes)
	}
	return g.provider() + fmt.Sprintf(`
resource "llmd_inference_cluster" "test" {
  name = %q
  networking = {
    vpc_cidr           = "10.0.0.0/16"
    availability_zones = ["us-west-2a", "us-west-2b"]
  }
%s
  model_storage = { deletion_protection = false }
%s
}
%s`, name, gpu, extra, rest)
}

// devicePluginPods are the nodes the device plugin's pods run on.
func devicePluginNodes(c *testenv.Cluster) ([]string, error) {
	pods, err := c.Client.CoreV1().Pods(workloads.DevicePluginNamespace).List(context.Background(),
		metav1.ListOptions{LabelSelector: "llmd.dev/addon=" + workloads.DevicePluginName})
	if err != nil {
		return nil, err
	}
	var nodes []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		if p.Status.Phase != corev1.PodRunning {
			return nil, fmt.Errorf("device plugin pod %s on %q is %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		}
		nodes = append(nodes, p.Spec.NodeName)
	}
	sort.Strings(nodes)
	return nodes, nil
}

// checkDevicePluginOnGPUNodes: one running device plugin pod on every GPU
// node, none on a system node (read from the pods the scheduler placed).
func (g inClusterGround) checkDevicePluginOnGPUNodes() error {
	nodes, err := devicePluginNodes(g.c)
	if err != nil {
		return err
	}
	want := slices.Clone(g.gpuNodes)
	sort.Strings(want)
	if !slices.Equal(nodes, want) {
		return fmt.Errorf("device plugin pods run on %v, want one on each GPU node %v and none on the system nodes %v", nodes, want, g.sysNodes)
	}
	return nil
}

func checkDevicePluginGone(c *testenv.Cluster) error {
	_, err := c.Client.AppsV1().DaemonSets(workloads.DevicePluginNamespace).Get(context.Background(), workloads.DevicePluginName, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("DaemonSet %s/%s: %v, want it gone", workloads.DevicePluginNamespace, workloads.DevicePluginName, err)
	}
	nodes, err := devicePluginNodes(c)
	if err != nil || len(nodes) > 0 {
		return fmt.Errorf("device plugin pods left on %v (%v)", nodes, err)
	}
	return nil
}

// TestAccInferenceClusterDevicePlugin: one apply creates the cluster in
// moto + the stand-in and, once its node groups are active, the NVIDIA
// device plugin through the cluster's own endpoint (the local control
// plane): its pods land on every kwok GPU node and on no system node. A
// second plan is empty; the DaemonSet deleted behind Terraform's back, then
// edited by another field manager, shows in the plan and the apply repairs
// it; the cluster imports with the add-on as applied; turned off, the
// DaemonSet and its pods go; destroy removes it before the cluster.
func TestAccInferenceClusterDevicePlugin(t *testing.T) {
	g := newInClusterGround(t, "devplug", 3, 2)
	const name = "acc-devplug"
	on := g.config(name, `  addons = { monitoring = { enabled = false } }`, "")
	off := g.config(name, `  addons = { `+inClusterOff+` }`, "")
	dp := tfjsonpath.New("addons").AtMapKey("nvidia_device_plugin")
	var began time.Time
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t); began = time.Now() },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: resource.ComposeTestCheckFunc(checkNothingOwned(t, g.aws, name),
			func(*terraform.State) error { return checkDevicePluginGone(g.c) }),
		Steps: []resource.TestStep{
			{
				Config: on,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(clusterRes, dp.AtMapKey("status"), knownvalue.StringExact("applied")),
					statecheck.ExpectKnownValue(clusterRes, dp.AtMapKey("image"), knownvalue.StringExact(workloads.DefaultDevicePluginImage)),
					statecheck.ExpectKnownValue(clusterRes, tfjsonpath.New("in_cluster_inventory"),
						knownvalue.ListExact([]knownvalue.Check{knownvalue.StringExact("apps/v1/DaemonSet/kube-system/nvidia-device-plugin")})),
				},
				Check: func(*terraform.State) error {
					t.Logf("create of cluster + device plugin: %s", time.Since(began).Round(time.Millisecond))
					return g.checkDevicePluginOnGPUNodes()
				},
			},
			{Config: on, PlanOnly: true},
			{
				// Deleted behind Terraform's back: the refresh records it, the plan repairs it.
				PreConfig: func() {
					if err := g.c.Client.AppsV1().DaemonSets(workloads.DevicePluginNamespace).Delete(context.Background(), workloads.DevicePluginName, metav1.DeleteOptions{}); err != nil {
						t.Fatal(err)
					}
				},
				Config: on,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(clusterRes, plancheck.ResourceActionUpdate),
					plancheck.ExpectUnknownValue(clusterRes, dp.AtMapKey("status")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue(clusterRes, dp.AtMapKey("status"), knownvalue.StringExact("applied"))},
				Check:             func(*terraform.State) error { return g.checkDevicePluginOnGPUNodes() },
			},
			{
				// Edited by someone else: the image moved under another field manager.
				PreConfig: func() {
					patch := `{"spec":{"template":{"spec":{"containers":[{"name":"nvidia-device-plugin","image":"nvcr.io/nvidia/k8s-device-plugin:v0.17.0"}]}}}}`
					if _, err := g.c.Client.AppsV1().DaemonSets(workloads.DevicePluginNamespace).Patch(context.Background(), workloads.DevicePluginName,
						types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
						t.Fatal(err)
					}
				},
				Config:             on,
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(clusterRes, plancheck.ResourceActionUpdate),
				}},
			},
			{
				Config:            on,
				ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue(clusterRes, dp.AtMapKey("status"), knownvalue.StringExact("applied"))},
				Check: func(*terraform.State) error {
					ds, err := g.c.Client.AppsV1().DaemonSets(workloads.DevicePluginNamespace).Get(context.Background(), workloads.DevicePluginName, metav1.GetOptions{})
					if err != nil {
						return err
					}
					if img := ds.Spec.Template.Spec.Containers[0].Image; img != workloads.DefaultDevicePluginImage {
						return fmt.Errorf("the apply left image %s, want %s back", img, workloads.DefaultDevicePluginImage)
					}
					return nil
				},
			},
			{
				ResourceName: clusterRes, ImportState: true, ImportStateId: name, ImportStateVerify: true,
				ImportStateVerifyIdentifierAttribute: "name",
				ImportStateVerifyIgnore:              []string{"timeouts", "model_storage.deletion_protection"},
			},
			{
				Config: off,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(clusterRes, dp.AtMapKey("status"), knownvalue.Null()),
					statecheck.ExpectKnownValue(clusterRes, tfjsonpath.New("in_cluster_inventory"), knownvalue.ListExact(nil)),
				},
				Check: func(*terraform.State) error { return checkDevicePluginGone(g.c) },
			},
			{Config: on, Check: func(*terraform.State) error { return g.checkDevicePluginOnGPUNodes() }},
		},
	})
}

// inventoryOf is a resource's inventory list from a state.
func inventoryOf(s *terraform.State, res string) []string {
	a := s.RootModule().Resources[res].Primary.Attributes
	var n int
	fmt.Sscan(a["inventory.#"], &n)
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, a[fmt.Sprintf("inventory.%d", i)])
	}
	return out
}

// stateHolds reports where a secret value appears in a state's attributes.
func stateHolds(s *terraform.State, secret string) []string {
	var where []string
	for name, r := range s.RootModule().Resources {
		for k, v := range r.Primary.Attributes {
			if strings.Contains(v, secret) {
				where = append(where, name+"."+k)
			}
		}
	}
	return where
}

// monitoringTestChart is the version of the kube-prometheus-stack stand-in
// chart the tests install; stuckChart's Deployment never becomes ready.
const (
	monitoringTestChart = "1.0.0"
	stuckChart          = "1.0.1"
)

// startMonitoringRepo serves the kube-prometheus-stack stand-in chart (the
// real prometheus-operator CRDs, few templates) from a local repository, a
// stand-in for the public one, and removes the CRDs when the test ends:
// uninstalling monitoring keeps them by design, and they are cluster-wide on
// the shared control plane.
func startMonitoringRepo(t *testing.T, c *testenv.Cluster) *testenv.ChartRepo {
	t.Helper()
	repo := testenv.StartChartRepo(t, testenv.KubePrometheusStack{Version: monitoringTestChart}.Chart(t),
		testenv.KubePrometheusStack{Version: stuckChart, NeverReady: true}.Chart(t))
	t.Cleanup(func() { removeMonitoringCRDs(t, c) })
	return repo
}

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

var prometheusRuleGVR = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheusrules"}

func removeMonitoringCRDs(t *testing.T, c *testenv.Cluster) {
	dyn, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Error(err)
		return
	}
	ctx := context.Background()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		list, err := dyn.Resource(crdGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Error(err)
			return
		}
		left := 0
		for _, crd := range list.Items {
			if strings.HasSuffix(crd.GetName(), ".monitoring.coreos.com") {
				left++
				if err := dyn.Resource(crdGVR).Delete(ctx, crd.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					t.Errorf("deleting CRD %s: %v", crd.GetName(), err)
				}
			}
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%d prometheus-operator CRDs still there after a minute", left)
			return
		}
	}
}

// monitoringAddon is the addons attribute that installs monitoring from
// the test's repository; extra goes into monitoring.
func monitoringAddon(repo *testenv.ChartRepo, devicePlugin bool, extra string) string {
	return fmt.Sprintf(`  addons = {
    nvidia_device_plugin = { enabled = %t }
    monitoring = {
      chart_repository = %q
      chart_version    = %q
      retention        = "15d"
%s
    }
  }`, devicePlugin, repo.URL, monitoringTestChart, extra)
}

// releaseAsApplied is the release the provider applies for the test's
// configuration, for acting on it behind Terraform's back.
func releaseAsApplied(repo *testenv.ChartRepo, version string) addons.Monitoring {
	return addons.Monitoring{Namespace: "monitoring", Release: addons.DefaultRelease, Repository: repo.URL, Chart: addons.DefaultChart,
		Version: version, NodeSelector: map[string]string{"llmd.dev/pool": "system"}, Retention: "15d",
		GrafanaAdminSecret: grafanaAdminSecret, DashboardLabel: workloads.DashboardLabel, Timeout: time.Minute}
}

// checkMonitoring: the release deployed with the CRDs served, the stack's
// pods on the system nodes, the dashboards labelled for Grafana's sidecar,
// the admin Secret holding a password that appears nowhere in the state.
func (g inClusterGround) checkMonitoring(s *terraform.State, password *string) error {
	ctx := context.Background()
	res, err := g.c.Client.Discovery().ServerResourcesForGroupVersion("monitoring.coreos.com/v1")
	if err != nil {
		return fmt.Errorf("the prometheus-operator CRDs are not served: %w", err)
	}
	kinds := map[string]bool{}
	for _, r := range res.APIResources {
		kinds[r.Kind] = true
	}
	for _, k := range []string{"ServiceMonitor", "PodMonitor", "Prometheus", "PrometheusRule"} {
		if !kinds[k] {
			return fmt.Errorf("monitoring.coreos.com/v1 serves %v, not %s", kinds, k)
		}
	}
	pods, err := g.c.Client.CoreV1().Pods("monitoring").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	if len(pods.Items) == 0 {
		return fmt.Errorf("no monitoring pods")
	}
	for _, p := range pods.Items {
		if !slices.Contains(g.sysNodes, p.Spec.NodeName) {
			return fmt.Errorf("monitoring pod %s runs on %q, not on a system node %v", p.Name, p.Spec.NodeName, g.sysNodes)
		}
	}
	cms, err := g.c.Client.CoreV1().ConfigMaps("monitoring").List(ctx, metav1.ListOptions{LabelSelector: workloads.DashboardLabel + "=1"})
	if err != nil {
		return err
	}
	var names []string
	for _, cm := range cms.Items {
		names = append(names, cm.Name)
	}
	sort.Strings(names)
	if !slices.Equal(names, []string{"llmd-dashboard-router", "llmd-dashboard-vllm"}) {
		return fmt.Errorf("dashboard ConfigMaps %v", names)
	}
	// The alerts went through the real PrometheusRule CRD's schema.
	dyn, err := dynamic.NewForConfig(g.c.RESTConfig())
	if err != nil {
		return err
	}
	rule, err := dyn.Resource(prometheusRuleGVR).Namespace("monitoring").Get(ctx, workloads.AlertsName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("the alerts' PrometheusRule: %w", err)
	}
	want, err := workloads.AlertRuleGroups()
	if err != nil {
		return err
	}
	if groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups"); len(groups) != len(want) {
		return fmt.Errorf("the PrometheusRule holds %d rule groups, want %d", len(groups), len(want))
	}
	secret, err := g.c.Client.CoreV1().Secrets("monitoring").Get(ctx, grafanaAdminSecret, metav1.GetOptions{})
	if err != nil {
		return err
	}
	got := string(secret.Data[addons.GrafanaAdminPasswordKey])
	if len(got) < 16 || string(secret.Data[addons.GrafanaAdminUserKey]) != "admin" {
		return fmt.Errorf("admin Secret holds user %q and a %d-character password", secret.Data[addons.GrafanaAdminUserKey], len(got))
	}
	if *password != "" && got != *password {
		return fmt.Errorf("the admin password changed behind the configuration (generated once, never overwritten)")
	}
	*password = got
	if where := stateHolds(s, got); len(where) > 0 {
		return fmt.Errorf("the Grafana admin password is in the state at %v", where)
	}
	return nil
}

// quiet drops Helm's progress lines of what a test does behind Terraform's back.
func quiet(string, ...any) {}

// interruptUpgrade leaves the release pending-upgrade, as a terraform killed
// during an upgrade does: an upgrade to the never-ready chart, cancelled
// while Helm waits on it.
func interruptUpgrade(t *testing.T, c *testenv.Cluster, m addons.Monitoring) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := addons.Apply(ctx, c.RESTConfig(), m, quiet)
		errc <- err
	}()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		s, _, err := addons.Read(context.Background(), c.RESTConfig(), m)
		if err == nil && s != nil && s.Status == "pending-upgrade" {
			break
		}
		select {
		case err := <-errc:
			t.Fatalf("the upgrade to %s ended before it could be interrupted: %v", m.Version, err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the release never went pending-upgrade (last %+v, %v)", s, err)
		}
	}
	cancel()
	<-errc
}

// TestAccInferenceClusterMonitoring: kube-prometheus-stack installed by the
// cluster's apply from a local chart repository (a stand-in for the public
// one), with the real prometheus-operator CRDs served, the stack on the
// system nodes, llmd's dashboards as sidecar ConfigMaps, its alerts as a
// PrometheusRule the real CRD accepts and a generated Grafana password in a
// Secret, never in state. The release's values edited with Helm behind
// Terraform's back show in the plan and the apply repairs them; a release
// left pending-upgrade by an interrupted apply is recovered; a configured
// write-only password replaces the generated one and stays out of state; the
// cluster imports; monitoring turned off uninstalls the release, its
// dashboards, alerts and Secret and keeps the CRDs.
func TestAccInferenceClusterMonitoring(t *testing.T) {
	g := newInClusterGround(t, "monitor", 1, 2)
	repo := startMonitoringRepo(t, g.c)
	const name = "acc-monitor"
	cfg := g.config(name, monitoringAddon(repo, false, ""), "")
	withPassword := g.config(name, monitoringAddon(repo, false, "")+`
  grafana_admin_password         = "correct-horse-battery"
  grafana_admin_password_version = "1"`, "")
	off := g.config(name, `  addons = { `+inClusterOff+` }`, "")
	mon := tfjsonpath.New("addons").AtMapKey("monitoring")
	var password string
	var began time.Time
	deployedAt := func(rev int64) []statecheck.StateCheck {
		return []statecheck.StateCheck{
			statecheck.ExpectKnownValue(clusterRes, mon.AtMapKey("status"), knownvalue.StringExact("deployed")),
			statecheck.ExpectKnownValue(clusterRes, mon.AtMapKey("version"), knownvalue.StringExact(monitoringTestChart)),
			statecheck.ExpectKnownValue(clusterRes, mon.AtMapKey("revision"), knownvalue.Int64Exact(rev)),
		}
	}
	repaired := resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
		plancheck.ExpectResourceAction(clusterRes, plancheck.ResourceActionUpdate),
		plancheck.ExpectUnknownValue(clusterRes, mon.AtMapKey("revision")),
	}}
	noDrift := func(*terraform.State) error {
		_, drift, err := addons.Read(context.Background(), g.c.RESTConfig(), releaseAsApplied(repo, monitoringTestChart))
		if err != nil || len(drift) > 0 {
			return fmt.Errorf("release drift after the apply: %v (%v)", drift, err)
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t); began = time.Now() },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             checkNothingOwned(t, g.aws, name),
		Steps: []resource.TestStep{
			{
				Config: cfg,
				ConfigStateChecks: append(deployedAt(1), statecheck.ExpectKnownValue(clusterRes, tfjsonpath.New("in_cluster_inventory"), knownvalue.ListExact([]knownvalue.Check{
					knownvalue.StringExact("core/v1/Namespace/-/monitoring"), knownvalue.StringExact("core/v1/Secret/monitoring/" + grafanaAdminSecret),
					knownvalue.StringExact("core/v1/ConfigMap/monitoring/llmd-dashboard-router"), knownvalue.StringExact("core/v1/ConfigMap/monitoring/llmd-dashboard-vllm"),
					knownvalue.StringExact("monitoring.coreos.com/v1/PrometheusRule/monitoring/" + workloads.AlertsName),
				}))),
				Check: func(s *terraform.State) error {
					t.Logf("create of cluster + monitoring: %s", time.Since(began).Round(time.Millisecond))
					return g.checkMonitoring(s, &password)
				},
			},
			{Config: cfg, PlanOnly: true},
			{
				// Another actor changes the release's values with Helm.
				PreConfig: func() {
					edited := releaseAsApplied(repo, monitoringTestChart)
					edited.Retention = "1d"
					if _, err := addons.Apply(context.Background(), g.c.RESTConfig(), edited, quiet); err != nil {
						t.Fatal(err)
					}
				},
				Config:             cfg,
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(clusterRes, plancheck.ResourceActionUpdate),
					plancheck.ExpectUnknownValue(clusterRes, mon.AtMapKey("status")),
				}},
			},
			{
				Config: cfg, ConfigPlanChecks: repaired, ConfigStateChecks: deployedAt(3),
				Check: resource.ComposeTestCheckFunc(noDrift, func(s *terraform.State) error { return g.checkMonitoring(s, &password) }),
			},
			{
				// An apply interrupted during an upgrade left the release pending-upgrade.
				PreConfig:        func() { interruptUpgrade(t, g.c, releaseAsApplied(repo, stuckChart)) },
				Config:           cfg,
				ConfigPlanChecks: repaired,
				// 4 pending, 5 the rollback to 3, 6 the upgrade.
				ConfigStateChecks: deployedAt(6),
				Check:             noDrift,
			},
			{
				Config:           withPassword,
				ConfigPlanChecks: repaired,
				Check: func(s *terraform.State) error {
					password = "correct-horse-battery"
					return g.checkMonitoring(s, &password)
				},
			},
			{
				ResourceName: clusterRes, ImportState: true, ImportStateId: name, ImportStateVerify: true,
				ImportStateVerifyIdentifierAttribute: "name",
				// Helm does not record where the chart came from, and the
				// password's version lives in Terraform only; an import takes
				// the defaults for them (so its status shows the retention as
				// drift), and the next plan upgrades to the configuration.
				ImportStateVerifyIgnore: []string{"timeouts", "model_storage.deletion_protection", "grafana_admin_password_version",
					"addons.monitoring.chart_repository", "addons.monitoring.retention", "addons.monitoring.status"},
			},
			{
				Config: off,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(clusterRes, mon.AtMapKey("status"), knownvalue.Null()),
					statecheck.ExpectKnownValue(clusterRes, tfjsonpath.New("in_cluster_inventory"), knownvalue.ListExact(nil)),
				},
				Check: func(*terraform.State) error {
					st, _, err := addons.Read(context.Background(), g.c.RESTConfig(), releaseAsApplied(repo, monitoringTestChart))
					if err != nil || st != nil {
						return fmt.Errorf("release after monitoring was turned off: %+v (%v)", st, err)
					}
					if _, err := g.c.Client.CoreV1().ConfigMaps("monitoring").Get(context.Background(), "llmd-dashboard-vllm", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
						return fmt.Errorf("dashboard ConfigMap after monitoring was turned off: %v", err)
					}
					if _, err := g.c.Client.Discovery().ServerResourcesForGroupVersion("monitoring.coreos.com/v1"); err != nil {
						return fmt.Errorf("the CRDs went with the release: %w", err)
					}
					dyn, err := dynamic.NewForConfig(g.c.RESTConfig())
					if err != nil {
						return err
					}
					if _, err := dyn.Resource(prometheusRuleGVR).Namespace("monitoring").Get(context.Background(), workloads.AlertsName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
						return fmt.Errorf("the alerts' PrometheusRule after monitoring was turned off: %v", err)
					}
					return nil
				},
			},
		},
	})
}

// TestAccInferenceClusterInClusterResumes: an in-cluster step that fails
// (a chart version the repository does not serve). On create the state
// records the incomplete cluster (tainted); after `terraform untaint` the
// next apply adopts the cluster by its tags (one EKS cluster, the same ARN)
// and finishes the add-ons; on update the state records the failure, and
// the next plan repairs it.
func TestAccInferenceClusterInClusterResumes(t *testing.T) {
	g := newInClusterGround(t, "resume", 2, 1)
	repo := startMonitoringRepo(t, g.c)
	const name = "acc-resume"
	good := g.config(name, monitoringAddon(repo, true, ""), "")
	missing := strings.Replace(good, `chart_version    = "`+monitoringTestChart+`"`, `chart_version    = "9.9.9"`, 1)
	mon := tfjsonpath.New("addons").AtMapKey("monitoring")
	var arn string
	oneCluster := func(s *terraform.State) error {
		parts, err := g.aws.FindOwnedParts(context.Background(), name)
		if err != nil {
			return err
		}
		clusters := 0
		for _, p := range parts {
			if p.Kind == "eks cluster" {
				clusters++
			}
		}
		got := s.RootModule().Resources[clusterRes].Primary.Attributes["arn"]
		if clusters != 1 || (arn != "" && got != arn) {
			return fmt.Errorf("%d EKS clusters, ARN %s (before %s): want the one cluster adopted", clusters, got, arn)
		}
		arn = got
		return g.checkDevicePluginOnGPUNodes()
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             checkNothingOwned(t, g.aws, name),
		Steps: []resource.TestStep{
			{Config: missing, ExpectError: regexp.MustCompile(`(?s)in-cluster add-ons.*chart_version\s+9\.9\.9.*apply\s+again\s+to\s+resume`)},
			{
				PreConfig:         func() { untaint(t, name) },
				Config:            good,
				ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue(clusterRes, mon.AtMapKey("status"), knownvalue.StringExact("deployed"))},
				Check:             oneCluster,
			},
			{Config: missing, ExpectError: regexp.MustCompile(`(?s)in-cluster add-ons.*9\.9\.9`)},
			{
				Config: good,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(clusterRes, plancheck.ResourceActionUpdate),
					plancheck.ExpectUnknownValue(clusterRes, mon.AtMapKey("status")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(clusterRes, mon.AtMapKey("status"), knownvalue.StringExact("deployed")),
					statecheck.ExpectKnownValue(clusterRes, mon.AtMapKey("version"), knownvalue.StringExact(monitoringTestChart)),
				},
				Check: oneCluster,
			},
		},
	})
}
