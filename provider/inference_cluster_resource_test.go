package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/llmd-dev/terraform-provider-llmd/internal/awsinfra"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// standInSetup starts moto with the AWS stand-in in front of it (for access
// entries and injected states), points the SDK's environment away from the
// machine's own AWS settings and makes waiters poll every few milliseconds.
// The clients returned are for arranging and checking behind Terraform's back.
func standInSetup(t *testing.T) (*testenv.AWSStandIn, *awsinfra.Clients) {
	t.Helper()
	return standInOn(t, motoSetup(t))
}

// motoSetup is the environment and a freshly reset moto, for tests that put
// several stand-ins in front of one moto.
func motoSetup(t *testing.T) *testenv.Moto {
	t.Helper()
	moto := testenv.StartMoto(t)
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": testenv.AccessKey, "AWS_SECRET_ACCESS_KEY": testenv.SecretKey,
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
		awsinfra.PollIntervalEnv: "10ms"} {
		t.Setenv(k, v)
	}
	return moto
}

// standInOn puts a stand-in of the test's own in front of moto.
func standInOn(t *testing.T, moto *testenv.Moto) (*testenv.AWSStandIn, *awsinfra.Clients) {
	t.Helper()
	standIn := testenv.StartAWSStandIn(t, moto)
	// Checks go through the stand-in too, so they see what it serves over moto.
	return standIn, motoClients(t, &testenv.Moto{URL: standIn.URL})
}

// inClusterOff turns the in-cluster add-ons off, for clusters whose API
// nothing answers (moto's endpoints are fakes).
const inClusterOff = "nvidia_device_plugin = { enabled = false }, monitoring = { enabled = false }"

// clusterConfig is a cluster of two zones; its file system is unprotected
// (so the test's destroy may delete it) unless body sets model_storage, and
// its in-cluster add-ons are off unless body sets addons or says
// "# in-cluster add-ons on".
func clusterConfig(standIn *testenv.AWSStandIn, name, body string) string {
	if !strings.Contains(body, "model_storage") {
		body += "\n  model_storage = { deletion_protection = false }\n"
	}
	if !strings.Contains(body, "addons") && !strings.Contains(body, "# in-cluster add-ons on") {
		body += "\n  addons = { " + inClusterOff + " }\n"
	}
	return providerConfig(&testenv.Moto{URL: standIn.URL}, "") + fmt.Sprintf(`
resource "llmd_inference_cluster" "test" {
  name = %q
  networking = {
    vpc_cidr           = "10.0.0.0/16"
    availability_zones = ["us-west-2a", "us-west-2b"]
  }
  tags = { env = "acc" }
%s
}
`, name, body)
}

// checkNothingOwned is the destroy check: nothing in EC2, IAM or EKS carries the owner tag.
func checkNothingOwned(t *testing.T, c *awsinfra.Clients, name string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		if err := expectOwnedParts(c, name, 0); err != nil {
			return fmt.Errorf("destroy left parts: %w", err)
		}
		return nil
	}
}

// expectOwnedParts is nil when exactly want parts in EC2, IAM, EKS and FSx
// carry the owner tag of the cluster name, else an error listing them.
func expectOwnedParts(c *awsinfra.Clients, name string, want int) error {
	parts, err := c.FindOwnedParts(context.Background(), name)
	if err != nil {
		return err
	}
	if len(parts) != want {
		return fmt.Errorf("%d parts tagged %s=%s, want %d: %s", len(parts), awsinfra.OwnerTag, name, want, partIDs(parts))
	}
	return nil
}

func partIDs(parts []awsinfra.OwnedPart) string {
	var ids []string
	for _, p := range parts {
		ids = append(ids, p.Kind+" "+p.ID)
	}
	return strings.Join(ids, ", ")
}

// TestAccInferenceClusterLifecycle: create (all parts tagged, outputs set),
// import by name with ImportStateVerify, scaling updated in place, drift
// (the node group scaled in moto behind Terraform) shows in the next plan and
// the apply repairs it, and destroy leaves nothing tagged.
func TestAccInferenceClusterLifecycle(t *testing.T) {
	standIn, aws := standInSetup(t)
	const name = "acc-life"
	res := "llmd_inference_cluster.test"
	scaled := clusterConfig(standIn, name, `
  gpu_node_group = {
    desired_size = 4
    min_size     = 2
    max_size     = 8
  }`)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             checkNothingOwned(t, aws, name),
		Steps: []resource.TestStep{
			{
				Config: clusterConfig(standIn, name, ""),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("arn"), knownvalue.StringExact("arn:aws:eks:us-west-2:123456789012:cluster/"+name)),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("kubernetes").AtMapKey("name"), knownvalue.StringExact(name)),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("kubernetes").AtMapKey("endpoint"), knownvalue.StringRegexp(regexp.MustCompile(`^https://`))),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("gpu_node_group").AtMapKey("desired_size"), knownvalue.Int64Exact(8)),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("gpu_node_group").AtMapKey("instance_type"), knownvalue.StringExact("g5.xlarge")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("system_node_group").AtMapKey("instance_type"), knownvalue.StringExact("m6i.4xlarge")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("tags_all"), knownvalue.MapExact(map[string]knownvalue.Check{
						"env": knownvalue.StringExact("acc"), "team": knownvalue.StringExact("inference")})),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("admin_principal_arn"), knownvalue.StringRegexp(regexp.MustCompile(`^arn:aws:(iam|sts)::123456789012:`))),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("networking").AtMapKey("public_subnet_ids"), knownvalue.SetSizeExact(2)),
				},
				Check: func(*terraform.State) error {
					parts, err := aws.FindOwnedParts(context.Background(), name)
					if err != nil {
						return err
					}
					kinds := map[string]int{}
					for _, p := range parts {
						kinds[p.Kind]++
						if p.Tags["team"] != "inference" {
							return fmt.Errorf("%s %s lacks the provider's default tag: %v", p.Kind, p.ID, p.Tags)
						}
					}
					want := map[string]int{"ec2 vpc": 1, "ec2 subnet": 4, "ec2 internet-gateway": 1, "ec2 route-table": 2, "ec2 elastic-ip": 1,
						"ec2 nat-gateway": 1, "ec2 security-group": 1, "fsx file-system": 1, "iam role": 3, "eks cluster": 1, "eks nodegroup": 2}
					if fmt.Sprint(kinds) != fmt.Sprint(want) {
						return fmt.Errorf("owned parts %v, want %v", kinds, want)
					}
					// The caller's, and the node role's that EKS makes itself.
					if entries := standIn.AccessEntries(name); len(entries) != 2 {
						return fmt.Errorf("access entries %v, want the caller's and the node role's", entries)
					}
					return nil
				},
			},
			{
				ResourceName: res, ImportState: true, ImportStateId: name, ImportStateVerify: true,
				ImportStateVerifyIdentifierAttribute: "name",
				// deletion_protection lives in Terraform only; an import protects the file system.
				ImportStateVerifyIgnore: []string{"timeouts", "model_storage.deletion_protection"},
			},
			{
				Config:           scaled,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate)}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("gpu_node_group").AtMapKey("desired_size"), knownvalue.Int64Exact(4)),
				},
				Check: expectNodeGroupSize(aws, name, "gpu", 4),
			},
			{
				// Drift: someone scales the GPU node group to 1 behind Terraform's back.
				PreConfig: func() {
					if _, err := aws.EKS.UpdateNodegroupConfig(context.Background(), &eks.UpdateNodegroupConfigInput{ClusterName: awsString(name), NodegroupName: awsString("gpu"),
						ScalingConfig: &ekstypes.NodegroupScalingConfig{DesiredSize: awsInt32(1), MinSize: awsInt32(1), MaxSize: awsInt32(8)}}); err != nil {
						t.Fatalf("drifting the node group: %v", err)
					}
				},
				Config:             scaled,
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				// The refreshed plan reads the drift and proposes to repair it in place.
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(res, tfjsonpath.New("gpu_node_group").AtMapKey("desired_size"), knownvalue.Int64Exact(4)),
				}},
			},
			{
				Config:           scaled,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate)}},
				Check:            expectNodeGroupSize(aws, name, "gpu", 4),
			},
		},
	})
}

func awsString(s string) *string { return awssdk.String(s) }

func awsInt32(v int32) *int32 { return awssdk.Int32(v) }

func expectNodeGroupSize(c *awsinfra.Clients, cluster, ng string, want int32) resource.TestCheckFunc {
	return func(*terraform.State) error {
		out, err := c.EKS.DescribeNodegroup(context.Background(), &eks.DescribeNodegroupInput{ClusterName: awsString(cluster), NodegroupName: awsString(ng)})
		if err != nil {
			return err
		}
		if got := *out.Nodegroup.ScalingConfig.DesiredSize; got != want {
			return fmt.Errorf("node group %s desired size %d in AWS, want %d", ng, got, want)
		}
		return nil
	}
}

// faultBody is the configuration of the fault-injection tests: the
// defaults plus an S3 import, so every create step is among them.
const faultBody = `
  model_storage = {
    deletion_protection = false
    s3_import           = { uri = "s3://llmd-weights/qwen/" }
  }
`

// createSteps are the mutating operations of a clean create, in the order the
// stand-in first saw them: the steps a create can fail at.
func createSteps(t *testing.T, moto *testenv.Moto) []string {
	standIn, c := standInOn(t, moto)
	const name = "acc-steps"
	var steps []string
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             checkNothingOwned(t, c, name),
		Steps: []resource.TestStep{{
			Config: clusterConfig(standIn, name, faultBody),
			Check: func(*terraform.State) error {
				seen := map[string]bool{}
				for _, op := range standIn.Calls() {
					if seen[op] || !regexp.MustCompile(`^(Create|Attach|Associate|Allocate|Modify|Authorize)`).MatchString(op) {
						continue
					}
					seen[op] = true
					steps = append(steps, op)
				}
				if len(steps) < 10 {
					return fmt.Errorf("a clean create made only %v", steps)
				}
				return nil
			},
		}},
	})
	return steps
}

// TestAccInferenceClusterResumesAfterFault fails the first apply at each
// create step in turn; the second apply must converge with zero deletes and
// keep the cluster the first apply created. The steps run in parallel, each
// with its own cluster name and its own stand-in (so its own call record)
// in front of one moto.
func TestAccInferenceClusterResumesAfterFault(t *testing.T) {
	moto := motoSetup(t)
	steps := createSteps(t, moto)
	t.Logf("create steps: %v", steps)
	for k, op := range steps {
		t.Run(fmt.Sprintf("%d-%s", k+1, op), func(t *testing.T) {
			standIn, c := standInOn(t, moto)
			name := "acc-fault-" + strings.ToLower(op)
			if len(name) > 38 {
				name = name[:38]
			}
			var firstCreated string
			resource.ParallelTest(t, resource.TestCase{
				PreCheck:                 func() { testAccPreCheck(t) },
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				CheckDestroy:             checkNothingOwned(t, c, name),
				Steps: []resource.TestStep{
					{
						PreConfig:   func() { standIn.Fail(op) },
						Config:      clusterConfig(standIn, name, faultBody),
						ExpectError: regexp.MustCompile(`InjectedFault`),
					},
					{
						PreConfig: func() {
							// Resume, as documented: untaint keeps what the failed create made.
							untaint(t, name)
							standIn.ClearFaults()
							standIn.ResetCalls()
							if cl, err := c.EKS.DescribeCluster(context.Background(), &eks.DescribeClusterInput{Name: awsString(name)}); err == nil {
								firstCreated = cl.Cluster.CreatedAt.String()
							}
						},
						Config: clusterConfig(standIn, name, faultBody),
						Check: func(*terraform.State) error {
							for _, call := range standIn.Calls() {
								if regexp.MustCompile(`^(Delete|Release|Detach|Disassociate)`).MatchString(call) {
									return fmt.Errorf("the resuming apply called %s", call)
								}
							}
							cl, err := c.EKS.DescribeCluster(context.Background(), &eks.DescribeClusterInput{Name: awsString(name)})
							if err != nil {
								return err
							}
							if firstCreated != "" && cl.Cluster.CreatedAt.String() != firstCreated {
								return fmt.Errorf("cluster was recreated: created %s, first apply made it at %s", cl.Cluster.CreatedAt, firstCreated)
							}
							// vpc, 4 subnets, igw, 2 route tables, eip, nat, the file system's security group,
							// the file system, 3 roles (cluster, nodes, FSx CSI driver), cluster, 2 node groups
							if err := expectOwnedParts(c, name, 18); err != nil {
								return fmt.Errorf("after resuming (no duplicates): %w", err)
							}
							return nil
						},
						ConfigStateChecks: []statecheck.StateCheck{
							statecheck.ExpectKnownValue("llmd_inference_cluster.test", tfjsonpath.New("arn"), knownvalue.StringExact("arn:aws:eks:us-west-2:123456789012:cluster/"+name)),
						},
					},
				},
			})
		})
	}
}

// untaint does what `terraform untaint` does to the test's working
// directory (terraform-plugin-testing has no step for it): it clears the
// tainted status of the cluster named name in the state file.
func untaint(t *testing.T, name string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(os.TempDir(), "plugintest*", "work*", "terraform.tfstate"))
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil || !strings.Contains(string(raw), `"name": "`+name+`"`) {
			continue
		}
		var st map[string]any
		if err := json.Unmarshal(raw, &st); err != nil {
			t.Fatalf("reading %s: %v", f, err)
		}
		// An update that failed leaves no taint: nothing to clear then.
		found := false
		for _, r := range st["resources"].([]any) {
			for _, inst := range r.(map[string]any)["instances"].([]any) {
				if m := inst.(map[string]any); m["status"] == "tainted" {
					delete(m, "status")
					found = true
				}
			}
		}
		if !found {
			return
		}
		out, err := json.MarshalIndent(st, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, out, 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("no state file holds the cluster %s", name)
}

// failAfterFileSystemAndNodeGroups fails the first apply once the file
// system and both node groups exist: the managed add-ons' create is refused
// while they are made side by side with them.
func failAfterFileSystemAndNodeGroups(standIn *testenv.AWSStandIn, cfg string) resource.TestStep {
	return resource.TestStep{
		PreConfig:   func() { standIn.Fail("CreateAddon") },
		Config:      cfg,
		ExpectError: regexp.MustCompile(`(?s)InjectedFault.*terraform\s+destroy.*removes\s+them.*terraform\s+untaint`),
	}
}

// expectPaidParts checks, before the step, that the failed create left the
// file system and both node groups.
func expectPaidParts(t *testing.T, standIn *testenv.AWSStandIn, c *awsinfra.Clients, name string) func() {
	return func() {
		standIn.ClearFaults()
		parts, err := c.FindOwnedParts(context.Background(), name)
		if err != nil {
			t.Fatal(err)
		}
		kinds := map[string]int{}
		for _, p := range parts {
			kinds[p.Kind]++
		}
		if kinds["fsx file-system"] != 1 || kinds["eks nodegroup"] != 2 {
			t.Fatalf("the failed create left %v, want the file system and both node groups", kinds)
		}
	}
}

// TestAccInferenceClusterFailedCreateDestroys: a create fails after the file
// system and the GPU nodes exist; `terraform destroy` then removes every
// part, though deletion_protection is on (the file system holds no weights
// yet): the failed create is in the state.
func TestAccInferenceClusterFailedCreateDestroys(t *testing.T) {
	standIn, c := standInSetup(t)
	const name = "acc-failed-destroy"
	cfg := clusterConfig(standIn, name, `
  model_storage = { s3_import = { uri = "s3://llmd-weights/qwen/" } }
`)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             checkNothingOwned(t, c, name),
		Steps: []resource.TestStep{
			failAfterFileSystemAndNodeGroups(standIn, cfg),
			{PreConfig: expectPaidParts(t, standIn, c, name), Config: cfg, Destroy: true, Check: checkNothingOwned(t, c, name)},
		},
	})
}

// TestAccInferenceClusterFailedCreateConverges: the same failure, then a
// plain `terraform apply`: Terraform replaces the tainted cluster and the
// apply converges, with no part duplicated and nothing left to plan.
func TestAccInferenceClusterFailedCreateConverges(t *testing.T) {
	standIn, c := standInSetup(t)
	const name = "acc-failed-apply"
	cfg := clusterConfig(standIn, name, faultBody)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             checkNothingOwned(t, c, name),
		Steps: []resource.TestStep{
			failAfterFileSystemAndNodeGroups(standIn, cfg),
			{
				PreConfig: expectPaidParts(t, standIn, c, name),
				Config:    cfg,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction("llmd_inference_cluster.test", plancheck.ResourceActionDestroyBeforeCreate)}},
				Check: func(*terraform.State) error {
					if err := expectOwnedParts(c, name, 18); err != nil {
						return fmt.Errorf("after converging (the FSx CSI driver's role among them): %w", err)
					}
					return nil
				},
			},
		},
	})
}

// TestAccInferenceClusterPreflight: plan-time errors name the field and the fix.
func TestAccInferenceClusterPreflight(t *testing.T) {
	standIn, _ := standInSetup(t)
	standIn.SetQuota(awsinfra.QuotaGAndVTOnDemand, 16)
	cases := map[string]struct {
		body, name string
		want       *regexp.Regexp
	}{
		"zone without the GPU type": {name: "pf-zone", want: regexp.MustCompile(`(?s)g5\.xlarge is not offered in us-west-2d.*us-west-2a, us-west-2b, us-west-2c`),
			body: `
  gpu_node_group = { max_size = 2, desired_size = 2, min_size = 2 }
`},
		"not a GPU type": {name: "pf-type", want: regexp.MustCompile(`"m5.large" has no GPU; use a GPU instance type`),
			body: `  gpu_node_group = { instance_type = "m5.large" }`},
		"quota": {name: "pf-quota", want: regexp.MustCompile(`(?s)8 x g5.xlarge needs 32 vCPUs.*L-DB2E81BA.*is 16.*lower max_size to 4`),
			body: ``},
		"version": {name: "pf-version", want: regexp.MustCompile(`EKS does not offer Kubernetes 1.20; use one of 1.31`),
			body: `  kubernetes_version = "1.20"
  gpu_node_group = { max_size = 2, desired_size = 2, min_size = 2 }`},
	}
	for label, tc := range cases {
		t.Run(label, func(t *testing.T) {
			cfg := clusterConfig(standIn, tc.name, tc.body)
			if tc.name == "pf-zone" {
				cfg = strings.Replace(cfg, `["us-west-2a", "us-west-2b"]`, `["us-west-2a", "us-west-2d"]`, 1)
			}
			resource.Test(t, resource.TestCase{
				PreCheck:                 func() { testAccPreCheck(t) },
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps:                    []resource.TestStep{{Config: cfg, PlanOnly: true, ExpectError: tc.want}},
			})
		})
	}
}

// TestAccInferenceClusterWaits: through Terraform, a cluster stuck in
// CREATING ends the apply at the `timeouts` deadline, a node group in
// CREATE_FAILED surfaces its health issue codes, and once AWS recovers the
// next apply, after `terraform untaint`, adopts both without deleting anything.
func TestAccInferenceClusterWaits(t *testing.T) {
	standIn, c := standInSetup(t)
	const name = "acc-waits"
	withTimeout := clusterConfig(standIn, name, `
  timeouts {
    create = "3s"
  }`)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             checkNothingOwned(t, c, name),
		Steps: []resource.TestStep{
			{
				PreConfig:   func() { standIn.ClusterStatus(name, "CREATING", -1) },
				Config:      withTimeout,
				ExpectError: regexp.MustCompile(`(?s)timed out after [0-9.]+m?s waiting for EKS cluster\s+acc-waits\s+to\s+become\s+ACTIVE.*status\s+CREATING`),
			},
			{
				PreConfig: func() {
					untaint(t, name)
					standIn.ClusterStatus(name, "CREATING", 2)
					standIn.NodegroupStatus(name, "gpu", "CREATE_FAILED", 1, testenv.HealthIssue{Code: "Ec2SubnetInvalidConfiguration",
						Message: "One or more Amazon EC2 Subnets for the node group do not automatically assign public IP addresses"})
				},
				Config:      withTimeout,
				ExpectError: regexp.MustCompile(`(?s)EKS node group gpu is\s+CREATE_FAILED.*Ec2SubnetInvalidConfiguration`),
			},
			{
				PreConfig: func() { untaint(t, name); standIn.ResetCalls() },
				Config:    withTimeout,
				Check: func(*terraform.State) error {
					for _, call := range standIn.Calls() {
						if strings.HasPrefix(call, "Delete") {
							return fmt.Errorf("the recovering apply called %s", call)
						}
					}
					return nil
				},
			},
		},
	})
}

// TestAccInferenceClusterUpdateInPlace: created through an assumed role, whose
// IAM role (not the session) gets the admin access entry; version upgrade (control plane, then
// node groups), endpoint access, labels and tags change without replacement,
// and the tags reach every part in EC2, IAM and EKS (a tag equal to a default
// tag stays the resource's own, without a perpetual diff); a downgrade fails at
// plan time, and a disk size change plans a replacement. Every request names the provider and its version in the
// user agent.
func TestAccInferenceClusterUpdateInPlace(t *testing.T) {
	standIn, c := standInSetup(t)
	const name = "acc-update"
	res := "llmd_inference_cluster.test"
	roleARN := createRole(t, &testenv.Moto{URL: standIn.URL}, "/platform/", "llmd-deployer")
	// The provider acts through an assumed role: the admin access entry must
	// name the IAM role (with its path), never the session.
	assumed := func(cfg string) string {
		return strings.Replace(cfg, "  default_tags {", `  assume_role {
    role_arn     = "`+roleARN+`"
    session_name = "ci"
  }
  default_tags {`, 1)
	}
	before := assumed(clusterConfig(standIn, name, `
  gpu_node_group = { desired_size = 2, min_size = 2, max_size = 2 }`))
	after := assumed(strings.Replace(clusterConfig(standIn, name, `
  kubernetes_version = "1.34"
  endpoint_access = { public_cidrs = ["203.0.113.0/24"] }
  gpu_node_group = {
    desired_size = 2
    min_size     = 2
    max_size     = 2
    labels       = { "llmd.dev/pool" = "gpu", "llmd.dev/model" = "qwen-7b" }
  }`), `env = "acc"`, `env = "prod", costcenter = "ml", team = "inference"`, 1))
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             checkNothingOwned(t, c, name),
		Steps: []resource.TestStep{
			{
				Config: before,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("admin_principal_arn"), knownvalue.StringExact(roleARN)),
				},
				Check: func(*terraform.State) error {
					if ua := standIn.LastUserAgent(); !strings.Contains(ua, " terraform-provider-llmd/test ") {
						return fmt.Errorf("user agent %q does not name the provider and its version", ua)
					}
					// The assumed role's (never the session's), and EKS's own for the node role.
					if entries := standIn.AccessEntries(name); len(entries) != 2 || !slices.Contains(entries, roleARN) ||
						slices.ContainsFunc(entries, func(p string) bool { return strings.Contains(p, ":sts:") }) {
						return fmt.Errorf("access entries %v, want the assumed role %s and the node role", entries, roleARN)
					}
					return nil
				},
			},
			{
				// Imported as another identity (the account's default one, not the
				// deployer role): the admin entry is found by its tag, so the state
				// matches and nothing is replaced.
				Config:       clusterConfig(standIn, name, "\n  gpu_node_group = { desired_size = 2, min_size = 2, max_size = 2 }"),
				ResourceName: res, ImportState: true, ImportStateId: name, ImportStateVerify: true,
				ImportStateVerifyIdentifierAttribute: "name", ImportStateVerifyIgnore: []string{"timeouts", "model_storage.deletion_protection"},
			},
			{
				Config:           after,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate)}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("kubernetes_version"), knownvalue.StringExact("1.34")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("endpoint_access").AtMapKey("public_cidrs"), knownvalue.SetExact([]knownvalue.Check{knownvalue.StringExact("203.0.113.0/24")})),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("gpu_node_group").AtMapKey("labels").AtMapKey("llmd.dev/model"), knownvalue.StringExact("qwen-7b")),
				},
				Check: func(*terraform.State) error {
					ctx := context.Background()
					for _, ng := range []string{"gpu", "system"} {
						out, err := c.EKS.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: awsString(name), NodegroupName: awsString(ng)})
						if err != nil {
							return err
						}
						if v := awssdk.ToString(out.Nodegroup.Version); v != "1.34" {
							return fmt.Errorf("node group %s still on %s after the upgrade", ng, v)
						}
					}
					parts, err := c.FindOwnedParts(ctx, name)
					if err != nil {
						return err
					}
					for _, p := range parts {
						if p.Tags["env"] != "prod" || p.Tags["costcenter"] != "ml" || p.Tags["team"] != "inference" {
							return fmt.Errorf("%s %s has tags %v after the update", p.Kind, p.ID, p.Tags)
						}
					}
					return nil
				},
			},
			{
				// Another compute mode is an update of this cluster, never its
				// replacement: the control plane, the network and the file system stay.
				Config: strings.Replace(after, `  endpoint_access =`, `  compute = { mode = "karpenter" }
  endpoint_access =`, 1),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(res, tfjsonpath.New("compute").AtMapKey("mode"), knownvalue.StringExact("karpenter")),
					plancheck.ExpectUnknownValue(res, tfjsonpath.New("compute").AtMapKey("status")),
				}},
			},
			{
				// So is EKS Auto Mode, whose nodes carry the NVIDIA device plugin.
				Config: strings.Replace(after, `  endpoint_access =`, `  compute = { mode = "auto_mode" }
  endpoint_access =`, 1),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(res, tfjsonpath.New("compute").AtMapKey("mode"), knownvalue.StringExact("auto_mode")),
					plancheck.ExpectKnownValue(res, tfjsonpath.New("addons").AtMapKey("nvidia_device_plugin").AtMapKey("enabled"), knownvalue.Bool(false)),
				}},
			},
			{
				Config:      strings.Replace(after, `kubernetes_version = "1.34"`, `kubernetes_version = "1.32"`, 1),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)EKS upgrades in place one minor version at a time and never downgrades:\s+from\s+1.34 the next version is 1.35`),
			},
			{
				// What EKS cannot change on a node group replaces that node group
				// alone: the cluster resource updates in place.
				Config:             strings.Replace(after, `max_size     = 2`, "max_size     = 2\n    disk_size    = 300", 1),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPreRefresh: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate)}},
			},
		},
	})
}

// TestAccInferenceClusterExistingNetwork: given a VPC and subnets, the cluster
// uses them, reads the zones and CIDR back, imports cleanly, keeps its
// Kubernetes version when the attribute leaves the configuration, and destroy
// leaves the network that was not its own. Admin access is EKS's creator
// bootstrap here, so no access entry is made.
func TestAccInferenceClusterExistingNetwork(t *testing.T) {
	standIn, c := standInSetup(t)
	ctx := context.Background()
	vpc, err := c.EC2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: awsString("10.20.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	var subnets []string
	for i, az := range []string{"us-west-2b", "us-west-2c"} {
		sn, err := c.EC2.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: vpc.Vpc.VpcId, CidrBlock: awsString(fmt.Sprintf("10.20.%d.0/20", 16*i)), AvailabilityZone: awsString(az)})
		if err != nil {
			t.Fatal(err)
		}
		subnets = append(subnets, *sn.Subnet.SubnetId)
	}
	const name = "acc-existing"
	res := "llmd_inference_cluster.test"
	cfg := strings.Replace(clusterConfig(standIn, name, `  gpu_node_group = { desired_size = 2, min_size = 2, max_size = 2 }
  admin_access   = "bootstrap_creator"
  kubernetes_version = "1.32"`),
		`vpc_cidr           = "10.0.0.0/16"
    availability_zones = ["us-west-2a", "us-west-2b"]`,
		fmt.Sprintf(`vpc_id     = %q
    subnet_ids = [%q, %q]`, *vpc.Vpc.VpcId, subnets[0], subnets[1]), 1)
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: resource.ComposeTestCheckFunc(checkNothingOwned(t, c, name), func(*terraform.State) error {
			out, err := c.EC2.DescribeVpcs(ctx, &ec2.DescribeVpcsInput{VpcIds: []string{*vpc.Vpc.VpcId}})
			if err != nil || len(out.Vpcs) != 1 {
				return fmt.Errorf("the given VPC is gone after destroy (%v): it was not the cluster's to delete", err)
			}
			return nil
		}),
		Steps: []resource.TestStep{
			{
				Config: cfg,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("networking").AtMapKey("vpc_cidr"), knownvalue.StringExact("10.20.0.0/16")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("networking").AtMapKey("availability_zones"), knownvalue.SetExact([]knownvalue.Check{
						knownvalue.StringExact("us-west-2b"), knownvalue.StringExact("us-west-2c")})),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("networking").AtMapKey("public_subnet_ids"), knownvalue.SetSizeExact(0)),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("admin_principal_arn"), knownvalue.StringExact("")),
				},
				Check: func(*terraform.State) error {
					// With bootstrap_creator the provider makes no entry: the two
					// there are EKS's own, the creator's and the node role's.
					var types []string
					for _, p := range standIn.AccessEntries(name) {
						types = append(types, standIn.AccessEntryType(name, p))
					}
					if slices.Sort(types); strings.Join(types, ",") != "EC2_LINUX,STANDARD" {
						return fmt.Errorf("access entries of types %v with bootstrap_creator, want EKS's own two", types)
					}
					parts, err := c.FindOwnedParts(ctx, name)
					if err != nil {
						return err
					}
					for _, p := range parts {
						// The file system's security group is the cluster's own, in the given VPC.
						if strings.HasPrefix(p.Kind, "ec2 ") && p.Tags["llmd.dev/part"] != "model-storage" {
							return fmt.Errorf("created %s %s in a network it was given", p.Kind, p.ID)
						}
					}
					return nil
				},
			},
			{ResourceName: res, ImportState: true, ImportStateId: name, ImportStateVerify: true,
				ImportStateVerifyIdentifierAttribute: "name", ImportStateVerifyIgnore: []string{"timeouts", "model_storage.deletion_protection"}},
			{
				// kubernetes_version removed from the configuration: the cluster
				// keeps 1.32, whatever the provider's default for new clusters.
				Config:   strings.Replace(cfg, `kubernetes_version = "1.32"`, "", 1),
				PlanOnly: true,
			},
		},
	})
}

// TestAccInferenceClusterConfigErrors: configuration mistakes fail at plan
// time naming the field and the fix, before any AWS call.
func TestAccInferenceClusterConfigErrors(t *testing.T) {
	standIn, _ := standInSetup(t)
	cases := map[string]struct {
		body     string
		old, new string // a replacement in the rest of the configuration
		want     *regexp.Regexp
	}{
		"sizes":        {body: `  gpu_node_group = { desired_size = 9 }`, want: regexp.MustCompile(`(?s)gpu_node_group needs min_size <= desired_size <=\s+max_size, got 8 <= 9 <= 8`)},
		"reserved tag": {old: `env = "acc"`, new: `"llmd.dev/owner" = "x"`, want: regexp.MustCompile(`(?s)tag keys under llmd.dev/ are the provider's bookkeeping`)},
		"taint effect": {body: `  gpu_node_group = { taints = [{ key = "k", effect = "NoSchedule" }] }`, want: regexp.MustCompile(`(?s)effect.*NO_SCHEDULE`)},
		"version":      {body: `  kubernetes_version = "v1.33"`, want: regexp.MustCompile(`(?s)kubernetes_version.*"1.33"`)},
		"scratch throughput": {body: `  model_storage = { per_unit_storage_throughput = 250 }`,
			want: regexp.MustCompile(`(?s)model_storage.per_unit_storage_throughput: SCRATCH_2 has a fixed throughput`)},
		"persistent without throughput": {body: `  model_storage = { deployment_type = "PERSISTENT_2" }`,
			want: regexp.MustCompile(`(?s)PERSISTENT_2 needs one of 125,\s+250,\s+500,\s+1000`)},
		"capacity": {body: `  model_storage = { storage_capacity_gib = 3600 }`,
			want: regexp.MustCompile(`(?s)model_storage.storage_capacity_gib: SCRATCH_2 takes 1200, 2400 or a multiple\s+of\s+2400\s+GiB, got 3600`)},
		"lustre version": {body: `  model_storage = { file_system_type_version = "2.10" }`,
			want: regexp.MustCompile(`(?s)file_system_type_version: "2.10" is not supported`)},
		"s3 uri": {body: `  model_storage = { s3_import = { uri = "my-bucket/models" } }`,
			want: regexp.MustCompile(`(?s)s3_import.uri: "my-bucket/models" is not an S3 URI`)},
		"subnets without vpc": {old: `vpc_cidr           = "10.0.0.0/16"`, new: `subnet_ids = ["subnet-1", "subnet-2"]`,
			want: regexp.MustCompile(`(?s)networking\.vpc_id is required with networking\.subnet_ids`)},
		"vpc without subnets": {old: `vpc_cidr           = "10.0.0.0/16"`, new: `vpc_id = "vpc-1"`,
			want: regexp.MustCompile(`(?s)networking\.subnet_ids is required with networking\.vpc_id`)},
	}
	for label, tc := range cases {
		t.Run(label, func(t *testing.T) {
			cfg := clusterConfig(standIn, "acc-bad", tc.body)
			if tc.old != "" {
				cfg = strings.Replace(cfg, tc.old, tc.new, 1)
			}
			resource.Test(t, resource.TestCase{
				PreCheck:                 func() { testAccPreCheck(t) },
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps:                    []resource.TestStep{{Config: cfg, PlanOnly: true, ExpectError: tc.want}},
			})
		})
	}
}
