package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
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
func standInSetup(t *testing.T) (*testenv.AWSStandIn, *awsinfra.Clients) {
	t.Helper()
	moto := testenv.StartMoto(t)
	standIn := testenv.StartAWSStandIn(t, moto)
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": testenv.AccessKey, "AWS_SECRET_ACCESS_KEY": testenv.SecretKey,
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
		awsinfra.PollIntervalEnv: "10ms"} {
		t.Setenv(k, v)
	}
	return standIn, motoClients(t, moto)
}

func clusterConfig(standIn *testenv.AWSStandIn, name, body string) string {
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
		parts, err := c.FindOwnedParts(context.Background(), name)
		if err != nil {
			return err
		}
		if len(parts) > 0 {
			return fmt.Errorf("destroy left %d parts tagged %s=%s: %s", len(parts), awsinfra.OwnerTag, name, partIDs(parts))
		}
		return nil
	}
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
						"ec2 nat-gateway": 1, "iam role": 2, "eks cluster": 1, "eks nodegroup": 2}
					if fmt.Sprint(kinds) != fmt.Sprint(want) {
						return fmt.Errorf("owned parts %v, want %v", kinds, want)
					}
					if entries := standIn.AccessEntries(name); len(entries) != 1 {
						return fmt.Errorf("access entries %v, want the caller's one", entries)
					}
					return nil
				},
			},
			{
				ResourceName: res, ImportState: true, ImportStateId: name, ImportStateVerify: true,
				ImportStateVerifyIdentifierAttribute: "name",
				ImportStateVerifyIgnore:              []string{"timeouts"},
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

// TestAccInferenceClusterResumesAfterFault fails the first apply at each
// create step in turn; the second apply must converge with zero deletes and
// keep the cluster the first apply created.
func TestAccInferenceClusterResumesAfterFault(t *testing.T) {
	steps := []string{"CreateVpc", "CreateSubnet", "CreateNatGateway", "CreateRole", "AttachRolePolicy", "CreateCluster", "CreateAccessEntry", "AssociateAccessPolicy", "CreateNodegroup"}
	for k, op := range steps {
		t.Run(fmt.Sprintf("%d-%s", k+1, op), func(t *testing.T) {
			standIn, c := standInSetup(t)
			name := "acc-fault-" + strings.ToLower(op)
			if len(name) > 38 {
				name = name[:38]
			}
			var firstCreated string
			resource.Test(t, resource.TestCase{
				PreCheck:                 func() { testAccPreCheck(t) },
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				CheckDestroy:             checkNothingOwned(t, c, name),
				Steps: []resource.TestStep{
					{
						PreConfig:   func() { standIn.Fail(op) },
						Config:      clusterConfig(standIn, name, ""),
						ExpectError: regexp.MustCompile(`InjectedFault`),
					},
					{
						PreConfig: func() {
							standIn.ClearFaults()
							standIn.ResetCalls()
							if cl, err := c.EKS.DescribeCluster(context.Background(), &eks.DescribeClusterInput{Name: awsString(name)}); err == nil {
								firstCreated = cl.Cluster.CreatedAt.String()
							}
						},
						Config: clusterConfig(standIn, name, ""),
						Check: func(*terraform.State) error {
							for _, call := range standIn.Calls() {
								if strings.HasPrefix(call, "Delete") || strings.HasPrefix(call, "Release") || strings.HasPrefix(call, "Detach") {
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
							parts, err := c.FindOwnedParts(context.Background(), name)
							if err != nil {
								return err
							}
							// vpc, 4 subnets, igw, 2 route tables, eip, nat, 2 roles, cluster, 2 node groups
							if len(parts) != 15 {
								return fmt.Errorf("%d owned parts after resuming, want 15 (no duplicates): %s", len(parts), partIDs(parts))
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
// next apply adopts both without deleting anything.
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
					standIn.ClusterStatus(name, "CREATING", 2)
					standIn.NodegroupStatus(name, "gpu", "CREATE_FAILED", 1, testenv.HealthIssue{Code: "Ec2SubnetInvalidConfiguration",
						Message: "One or more Amazon EC2 Subnets for the node group do not automatically assign public IP addresses"})
				},
				Config:      withTimeout,
				ExpectError: regexp.MustCompile(`(?s)EKS node group gpu is\s+CREATE_FAILED.*Ec2SubnetInvalidConfiguration`),
			},
			{
				PreConfig: standIn.ResetCalls,
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
