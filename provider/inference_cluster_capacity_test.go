package provider

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/llmd-dev/terraform-provider-llmd/internal/awsinfra"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// capacityFixtures are the reservations the capacity tests share: an open
// On-Demand Capacity Reservation with 2 of 4 g5.xlarge free, tagged
// pool=llm, and a Capacity Block that opens tomorrow, both in us-west-2a
// (the file system's default zone, where the GPU nodes go).
func capacityFixtures(standIn *testenv.AWSStandIn) {
	now := time.Now()
	standIn.AddCapacityReservation(testenv.CapacityReservation{ID: "cr-0open", InstanceType: "g5.xlarge", Zone: "us-west-2a", Total: 4, Available: 2,
		Tags: map[string]string{"pool": "llm"}})
	standIn.AddCapacityReservation(testenv.CapacityReservation{ID: "cr-0later", InstanceType: "g5.xlarge", Zone: "us-west-2a", Total: 4, Available: 4,
		Block: true, Start: now.Add(24 * time.Hour), End: now.Add(48 * time.Hour)})
}

// reservedGPU is a GPU node group of three on the pool=llm reservation.
func reservedGPU(fallback, extra string) string {
	return fmt.Sprintf(`
  gpu_node_group = {
    desired_size = 3
    min_size     = 1
    max_size     = 3
    capacity_reservation = { tags = { pool = "llm" }, fallback = %q }
%s  }`, fallback, extra)
}

// TestAccInferenceClusterCapacityReservation: an existing GPU node group
// moved onto a reservation too small for it (the opt-in replaces the node
// group, and the plan warns so). Without a fallback the plan fails naming
// desired_size and the free count; with the On-Demand fallback the plan
// warns in words, the apply makes a launch template with preference open
// and the node group takes the reservation's 2 free instances and one
// On-Demand, on Bottlerocket NVIDIA, whose device plugin defaults off. The
// next plan is empty; destroy deletes the launch template and gives the
// instances back.
func TestAccInferenceClusterCapacityReservation(t *testing.T) {
	standIn, c := standInSetup(t)
	capacityFixtures(standIn)
	logs := t.TempDir()
	t.Setenv("TF_LOG", "warn")
	t.Setenv("TF_ACC_LOG_PATH", filepath.Join(logs, "terraform.log"))
	t.Setenv("TF_LOG_PATH_MASK", filepath.Join(logs, "provider-%s.log"))
	const name = "acc-resv"
	res := "llmd_inference_cluster.test"
	onDemand := clusterConfig(standIn, name, reservedGPU("on_demand", `    ami_type = "BOTTLEROCKET_x86_64_NVIDIA"
`)+"\n  addons = { monitoring = { enabled = false } }\n")
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: func(s *terraform.State) error {
			if n := standIn.ReservationAvailable("cr-0open"); n != 2 {
				return fmt.Errorf("cr-0open has %d free after destroy, want its 2 back", n)
			}
			return checkNothingOwned(t, c, name)(s)
		},
		Steps: []resource.TestStep{
			{
				// Before: a node group of three without a reservation, which
				// keeps its shape (no launch template) until the user opts in.
				Config: clusterConfig(standIn, name, `
  gpu_node_group = { desired_size = 3, min_size = 1, max_size = 3 }`),
				Check: func(*terraform.State) error {
					if in, od := standIn.ReservationUse(name, "gpu"); in != 0 || od != 0 {
						return fmt.Errorf("a node group without capacity_reservation took %d reserved and %d fallback instances", in, od)
					}
					return expectLaunchTemplates(c, name, 0)
				},
			},
			{
				Config: clusterConfig(standIn, name, reservedGPU("none", "")), PlanOnly: true,
				ExpectError: saysInOrder("Preflight: gpu_node_group.desired_size", "Capacity Reservation cr-0open (g5.xlarge in us-west-2a, 2 of 4 free) has room for 2 of the 3 instances asked", "the other 1 fail to launch", "lower desired_size to 2"),
			},
			{
				Config: onDemand,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("gpu_node_group").AtMapKey("capacity_reservation"), knownvalue.ObjectExact(map[string]knownvalue.Check{
						"id": knownvalue.StringExact("cr-0open"), "tags": knownvalue.MapExact(map[string]knownvalue.Check{"pool": knownvalue.StringExact("llm")}),
						"fallback": knownvalue.StringExact("on_demand")})),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("gpu_node_group").AtMapKey("disk_size"), knownvalue.Int64Exact(200)),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("addons").AtMapKey("nvidia_device_plugin").AtMapKey("enabled"), knownvalue.Bool(false)),
				},
				Check: func(*terraform.State) error {
					if err := expectLaunchTemplates(c, name, 1); err != nil {
						return err
					}
					if in, od := standIn.ReservationUse(name, "gpu"); in != 2 || od != 1 {
						return fmt.Errorf("%d instances in cr-0open and %d On-Demand, want 2 and 1", in, od)
					}
					out, err := c.EC2.DescribeLaunchTemplateVersions(context.Background(), &ec2.DescribeLaunchTemplateVersionsInput{
						LaunchTemplateName: awsString("llmd-" + name + "-gpu"), Versions: []string{"$Latest"}})
					if err != nil {
						return err
					}
					d := out.LaunchTemplateVersions[0].LaunchTemplateData
					if d.CapacityReservationSpecification == nil || d.CapacityReservationSpecification.CapacityReservationPreference != "open" ||
						len(d.BlockDeviceMappings) != 1 || *d.BlockDeviceMappings[0].DeviceName != "/dev/xvdb" {
						return fmt.Errorf("launch template data %+v, want preference open and Bottlerocket's data volume", d)
					}
					return logsSay(logs, "Capacity reservation: gpu_node_group.desired_size",
						"has room for 2 of the 3 instances asked (desired_size): 1 will run as On-Demand Instances outside it, at On-Demand prices",
						"EKS cannot change ami_type, capacity_reservation of a node group in place")
				},
			},
			{Config: onDemand, PlanOnly: true},
		},
	})
}

// expectLaunchTemplates is nil when the cluster owns want launch templates.
func expectLaunchTemplates(c *awsinfra.Clients, name string, want int) error {
	parts, err := c.FindOwnedParts(context.Background(), name)
	if err != nil {
		return err
	}
	n := 0
	for _, p := range parts {
		if p.Kind == "ec2 launch-template" {
			n++
		}
	}
	if n != want {
		return fmt.Errorf("%d launch templates tagged %s=%s, want %d", n, awsinfra.OwnerTag, name, want)
	}
	return nil
}

// saysInOrder matches an error holding the phrases in order, however
// Terraform wraps its lines.
func saysInOrder(phrases ...string) *regexp.Regexp {
	var parts []string
	for _, p := range phrases {
		parts = append(parts, strings.Join(strings.Fields(regexp.QuoteMeta(p)), `\s+`))
	}
	return regexp.MustCompile(`(?s)` + strings.Join(parts, ".*"))
}

// logsSay fails unless one of the logs in dir holds every phrase: how a
// test sees a plan's warning diagnostics, which Terraform prints but the
// test framework does not return.
func logsSay(dir string, phrases ...string) error {
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		all := true
		for _, p := range phrases {
			all = all && strings.Contains(string(b), p)
		}
		if all {
			return nil
		}
	}
	return fmt.Errorf("no log in %v says %q", files, phrases)
}

// TestAccInferenceClusterCapacityPlanErrors: a Capacity Block outside its
// window, a Capacity Block without its capacity type, and a second device
// plugin on Bottlerocket NVIDIA fail at plan time naming the field and the
// fix, before anything is made.
func TestAccInferenceClusterCapacityPlanErrors(t *testing.T) {
	standIn, _ := standInSetup(t)
	capacityFixtures(standIn)
	block := func(capacityType string) string {
		return fmt.Sprintf(`
  gpu_node_group = {
    desired_size  = 2
    min_size      = 2
    max_size      = 2
    capacity_type = %q
    capacity_reservation = { id = "cr-0later" }
  }`, capacityType)
	}
	cases := map[string]struct {
		body string
		want *regexp.Regexp
	}{
		"block before its window": {body: block("CAPACITY_BLOCK"),
			want: saysInOrder("Preflight: gpu_node_group.desired_size", "Capacity Block cr-0later (g5.xlarge in us-west-2a, 4 of 4 free) opens at", "and closes at", "set desired_size and min_size to 0 until it opens")},
		"block as on-demand": {body: block("ON_DEMAND"),
			want: saysInOrder("Preflight: gpu_node_group.capacity_type", `needs capacity_type = "CAPACITY_BLOCK"`)},
		"block without a reservation": {body: `  gpu_node_group = { capacity_type = "CAPACITY_BLOCK" }`,
			want: saysInOrder(`capacity_type = "CAPACITY_BLOCK" runs the node group in a Capacity Block: name it in gpu_node_group.capacity_reservation`)},
		"second device plugin": {body: `  gpu_node_group = { ami_type = "BOTTLEROCKET_x86_64_NVIDIA" }
  addons = { nvidia_device_plugin = { enabled = true }, monitoring = { enabled = false } }`,
			want: saysInOrder("Second NVIDIA device plugin", "BOTTLEROCKET_x86_64_NVIDIA carries the NVIDIA device plugin already", "remove addons.nvidia_device_plugin.enabled")},
	}
	for label, tc := range cases {
		t.Run(label, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				PreCheck:                 func() { testAccPreCheck(t) },
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps:                    []resource.TestStep{{Config: clusterConfig(standIn, "acc-cap", tc.body), PlanOnly: true, ExpectError: tc.want}},
			})
		})
	}
}
