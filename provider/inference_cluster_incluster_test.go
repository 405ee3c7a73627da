package provider

import (
	"context"
	"fmt"
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
	"k8s.io/apimachinery/pkg/types"

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

// config is the provider assuming the deployer role and a cluster of
// len(gpuNodes) GPU nodes; extra goes inside the cluster resource, rest after it.
func (g inClusterGround) config(name, extra, rest string) string {
	return providerConfig(g.moto, `
  assume_role {
    role_arn     = "`+g.roleARN+`"
    session_name = "tf"
  }`) + fmt.Sprintf(`
resource "llmd_inference_cluster" "test" {
  name = %q
  networking = {
    vpc_cidr           = "10.0.0.0/16"
    availability_zones = ["us-west-2a", "us-west-2b"]
  }
  gpu_node_group = {
    desired_size = %[2]d
    min_size     = %[2]d
    max_size     = %[2]d
  }
  model_storage = { deletion_protection = false }
%s
}
%s`, name, len(g.gpuNodes), extra, rest)
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
