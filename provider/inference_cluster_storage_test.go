package provider

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/fsx"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/llmd-dev/terraform-provider-llmd/internal/addons"
	"github.com/llmd-dev/terraform-provider-llmd/internal/awsinfra"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
	"github.com/llmd-dev/terraform-provider-llmd/internal/workloads"
)

// TestAccInferenceClusterModelStorage, through the terraform CLI:
//   - create: the file system (with its S3 association) and the control
//     plane are made side by side (the stand-in holds the file system in
//     CREATING until the control plane is ACTIVE), and model_storage exports
//     the file system's id, DNS name and mount name; the GPU nodes carry
//     nvidia.com/gpu.present and report their version; every add-on is
//     ACTIVE at the stand-in's default version;
//   - a GPU instance type change updates the resource in place and replaces
//     the GPU node group alone: the cluster keeps its ARN and creation time,
//     the file system its id;
//   - with deletion_protection on, a plan replacing the file system and a
//     destroy both fail naming model_storage.deletion_protection;
//   - an access entry for a CI role and a pinned add-on version apply in place;
//   - drift: an add-on deleted and one degraded behind Terraform's back, and
//     a GPU node group left behind the control plane, show in the plan and
//     the apply repairs them; so does a deleted file system.
func TestAccInferenceClusterModelStorage(t *testing.T) {
	standIn, c := standInSetup(t)
	const name = "acc-fsx"
	res := "llmd_inference_cluster.test"
	ctx := context.Background()
	storage := func(protect bool, extra string) string {
		return fmt.Sprintf(`
  gpu_node_group = { desired_size = 2, min_size = 2, max_size = 2%s }
  model_storage = {
    s3_import           = { uri = "s3://llmd-weights/qwen/" }
    deletion_protection = %t
  }
`, extra, protect)
	}
	protected := clusterConfig(standIn, name, storage(true, ""))
	bigger := clusterConfig(standIn, name, storage(true, `, instance_type = "g5.2xlarge"`))
	var arn, created, fsID string
	keptIdentity := func(*terraform.State) error {
		cl, err := c.EKS.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: awsString(name)})
		if err != nil {
			return err
		}
		fs, err := c.FSx.DescribeFileSystems(ctx, &fsx.DescribeFileSystemsInput{})
		if err != nil {
			return err
		}
		if len(fs.FileSystems) != 1 {
			return fmt.Errorf("%d file systems, want the one", len(fs.FileSystems))
		}
		got := [3]string{awssdk.ToString(cl.Cluster.Arn), cl.Cluster.CreatedAt.String(), awssdk.ToString(fs.FileSystems[0].FileSystemId)}
		if arn == "" {
			arn, created, fsID = got[0], got[1], got[2]
			return nil
		}
		if got != [3]string{arn, created, fsID} {
			return fmt.Errorf("cluster ARN, creation time and file system went from %v to %v", [3]string{arn, created, fsID}, got)
		}
		return nil
	}
	withAccess := clusterConfig(standIn, name, storage(false, `, instance_type = "g5.2xlarge"`)+`
  access_entries = {
    "arn:aws:iam::123456789012:role/ci-plan" = { policy_arn = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy", namespaces = ["llmd"] }
  }
  addons = { coredns = { version = "v1.11.3-eksbuild.1" }, `+inClusterOff+` }
`)
	var began time.Time
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             checkNothingOwned(t, c, name),
		Steps: []resource.TestStep{
			{
				PreConfig: func() {
					standIn.ClusterStatus(name, "CREATING", 5)
					standIn.FileSystemAvailableAfter("cluster " + name + " ACTIVE")
					began = time.Now()
				},
				Config: protected,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("model_storage").AtMapKey("file_system_id"), knownvalue.StringRegexp(regexp.MustCompile(`^fs-`))),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("model_storage").AtMapKey("dns_name"), knownvalue.StringRegexp(regexp.MustCompile(`^fs-.*\.fsx\.us-west-2\.amazonaws\.com$`))),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("model_storage").AtMapKey("mount_name"), knownvalue.StringRegexp(regexp.MustCompile(`^[0-9a-f]{8}$`))),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("model_storage").AtMapKey("association_id"), knownvalue.StringRegexp(regexp.MustCompile(`^dra-`))),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("model_storage").AtMapKey("availability_zone"), knownvalue.StringExact("us-west-2a")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("model_storage").AtMapKey("security_group_id"), knownvalue.StringRegexp(regexp.MustCompile(`^sg-`))),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("kubernetes_version"), knownvalue.StringExact("1.33")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("gpu_node_group").AtMapKey("version"), knownvalue.StringExact("1.33")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("gpu_node_group").AtMapKey("labels").AtMapKey("nvidia.com/gpu.present"), knownvalue.StringExact("true")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("addons").AtMapKey("coredns").AtMapKey("version"), knownvalue.StringExact("v1.11.4-eksbuild.2")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("addons").AtMapKey("kube_proxy").AtMapKey("version"), knownvalue.StringExact("v1.33.0-eksbuild.1")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("addons").AtMapKey("fsx_csi_driver").AtMapKey("status"), knownvalue.StringExact("ACTIVE")),
				},
				Check: resource.ComposeTestCheckFunc(keptIdentity, func(*terraform.State) error {
					t.Logf("create apply took %s", time.Since(began).Round(time.Millisecond))
					fsCreated, ok1 := standIn.EventTime("CreateFileSystem " + fsID)
					fsReady, ok2 := standIn.EventTime(fsID + " AVAILABLE")
					clCreated, ok3 := standIn.EventTime("CreateCluster " + name)
					clReady, ok4 := standIn.EventTime("cluster " + name + " ACTIVE")
					if !ok1 || !ok2 || !ok3 || !ok4 || !fsCreated.Before(clReady) || !clCreated.Before(fsReady) {
						return fmt.Errorf("file system and control plane did not overlap: %v", standIn.Timeline())
					}
					dras := standIn.Associations(fsID)
					if len(dras) != 1 || dras[0]["Lifecycle"] != "AVAILABLE" || dras[0]["DataRepositoryPath"] != "s3://llmd-weights/qwen/" {
						return fmt.Errorf("associations %v", dras)
					}
					return nil
				}),
			},
			{
				Config: bigger,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(res, tfjsonpath.New("model_storage").AtMapKey("file_system_id"), knownvalue.NotNull()),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("gpu_node_group").AtMapKey("instance_type"), knownvalue.StringExact("g5.2xlarge")),
				},
				Check: resource.ComposeTestCheckFunc(keptIdentity, func(*terraform.State) error {
					out, err := c.EKS.DescribeNodegroup(ctx, &eks.DescribeNodegroupInput{ClusterName: awsString(name), NodegroupName: awsString("gpu")})
					if err != nil {
						return err
					}
					if got := out.Nodegroup.InstanceTypes; len(got) != 1 || got[0] != "g5.2xlarge" {
						return fmt.Errorf("GPU node group runs %v after the change", got)
					}
					return nil
				}),
			},
			{
				Config: strings.Replace(bigger, `s3_import`, `deployment_type = "PERSISTENT_2"
    per_unit_storage_throughput = 250
    s3_import`, 1),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)model_storage is protected from deletion.*needs\s+a\s+new\s+file\s+system.*model_storage.deletion_protection\s+is\s+true`),
			},
			{
				Config:      bigger,
				Destroy:     true,
				ExpectError: regexp.MustCompile(`(?s)destroying\s+the\s+cluster\s+deletes\s+it.*model_storage.deletion_protection\s+is\s+true`),
			},
			{
				Config: withAccess,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate)}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("addons").AtMapKey("coredns").AtMapKey("version"), knownvalue.StringExact("v1.11.3-eksbuild.1")),
				},
				Check: resource.ComposeTestCheckFunc(keptIdentity, func(*terraform.State) error {
					if v := standIn.Addon(name, "coredns")["addonVersion"]; v != "v1.11.3-eksbuild.1" {
						return fmt.Errorf("coredns at %v in EKS, pinned v1.11.3-eksbuild.1", v)
					}
					pols, err := c.EKS.ListAssociatedAccessPolicies(ctx, &eks.ListAssociatedAccessPoliciesInput{ClusterName: awsString(name),
						PrincipalArn: awsString("arn:aws:iam::123456789012:role/ci-plan")})
					if err != nil {
						return err
					}
					if len(pols.AssociatedAccessPolicies) != 1 || !strings.HasSuffix(awssdk.ToString(pols.AssociatedAccessPolicies[0].PolicyArn), "/AmazonEKSViewPolicy") ||
						fmt.Sprint(pols.AssociatedAccessPolicies[0].AccessScope.Namespaces) != "[llmd]" {
						return fmt.Errorf("the CI role's policies: %+v", pols.AssociatedAccessPolicies)
					}
					return nil
				}),
			},
			{
				// Drift behind Terraform's back.
				PreConfig: func() {
					if _, err := c.EKS.DeleteAddon(ctx, &eks.DeleteAddonInput{ClusterName: awsString(name), AddonName: awsString("kube-proxy")}); err != nil {
						t.Fatalf("deleting kube-proxy: %v", err)
					}
					standIn.AddonStatus(name, "vpc-cni", "DEGRADED")
					// A node group upgrade that stopped half way leaves it a version behind.
					if _, err := c.EKS.UpdateNodegroupVersion(ctx, &eks.UpdateNodegroupVersionInput{ClusterName: awsString(name), NodegroupName: awsString("gpu"),
						Version: awsString("1.32")}); err != nil {
						t.Fatalf("setting the node group back: %v", err)
					}
				},
				Config:             withAccess,
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPostRefresh: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(res, tfjsonpath.New("gpu_node_group").AtMapKey("version"), knownvalue.StringExact("1.33")),
					plancheck.ExpectUnknownValue(res, tfjsonpath.New("addons").AtMapKey("kube_proxy").AtMapKey("status")),
					plancheck.ExpectUnknownValue(res, tfjsonpath.New("addons").AtMapKey("vpc_cni").AtMapKey("status")),
				}},
			},
			{
				Config: withAccess,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("gpu_node_group").AtMapKey("version"), knownvalue.StringExact("1.33")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("addons").AtMapKey("kube_proxy").AtMapKey("status"), knownvalue.StringExact("ACTIVE")),
					statecheck.ExpectKnownValue(res, tfjsonpath.New("addons").AtMapKey("vpc_cni").AtMapKey("status"), knownvalue.StringExact("ACTIVE")),
				},
				Check: resource.ComposeTestCheckFunc(keptIdentity, func(*terraform.State) error {
					for _, a := range awsinfra.KnownAddons {
						if st := standIn.Addon(name, a.Name)["status"]; st != "ACTIVE" {
							return fmt.Errorf("add-on %s is %v after the repair", a.Name, st)
						}
					}
					return nil
				}),
			},
			{
				// The file system deleted behind Terraform's back (protection is
				// Terraform's, not AWS's) is planned and created again.
				PreConfig: func() {
					if _, err := c.FSx.DeleteFileSystem(ctx, &fsx.DeleteFileSystemInput{FileSystemId: awsString(fsID)}); err != nil {
						t.Fatalf("deleting the file system: %v", err)
					}
				},
				Config: withAccess,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
					plancheck.ExpectUnknownValue(res, tfjsonpath.New("model_storage").AtMapKey("file_system_id")),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, tfjsonpath.New("model_storage").AtMapKey("file_system_id"), knownvalue.StringRegexp(regexp.MustCompile(`^fs-`))),
				},
				Check: func(*terraform.State) error {
					if dras := standIn.Associations(fsID); len(dras) != 0 {
						return fmt.Errorf("the deleted file system still has associations %v", dras)
					}
					out, err := c.FSx.DescribeFileSystems(ctx, &fsx.DescribeFileSystemsInput{})
					if err != nil || len(out.FileSystems) != 1 || awssdk.ToString(out.FileSystems[0].FileSystemId) == fsID {
						return fmt.Errorf("file systems after the repair: %v (%v), want one new one", out, err)
					}
					return nil
				},
			},
		},
	})
}

// TestAccInferenceClusterTwoRegions: clusters of one name in two regions
// (IAM is global) get roles of their own; destroying the us-east-1 one
// removes its roles and leaves every part of the us-west-2 one. The
// us-east-1 cluster is a test case of its own, run while the us-west-2 one
// exists: provider aliases in one configuration share the in-process
// provider server, which holds one configuration.
func TestAccInferenceClusterTwoRegions(t *testing.T) {
	standIn, west := standInSetup(t)
	const name = "acc-twin"
	body := "\n  gpu_node_group = { desired_size = 2, min_size = 2, max_size = 2 }"
	westCfg := clusterConfig(standIn, name, body)
	eastCfg := strings.NewReplacer(`region      = "`+testenv.Region+`"`, `region      = "us-east-1"`,
		`["us-west-2a", "us-west-2b"]`, `["us-east-1a", "us-east-1b"]`).Replace(westCfg)
	roles := func(region string, want bool) error {
		for _, r := range awsinfra.RoleNames(name, region) {
			_, err := west.IAM.GetRole(context.Background(), &iam.GetRoleInput{RoleName: awsString(r)})
			if exists := err == nil; exists != want {
				return fmt.Errorf("IAM role %s exists=%v (%v), want %v", r, exists, err, want)
			}
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             checkNothingOwned(t, west, name),
		Steps: []resource.TestStep{{
			Config: westCfg,
			Check: func(*terraform.State) error {
				resource.Test(t, resource.TestCase{
					PreCheck:                 func() { testAccPreCheck(t) },
					ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
					Steps: []resource.TestStep{{
						Config: eastCfg,
						ConfigStateChecks: []statecheck.StateCheck{statecheck.ExpectKnownValue("llmd_inference_cluster.test", tfjsonpath.New("arn"),
							knownvalue.StringExact("arn:aws:eks:us-east-1:123456789012:cluster/"+name))},
						Check: func(*terraform.State) error {
							if err := roles("us-west-2", true); err != nil {
								return err
							}
							return roles("us-east-1", true)
						},
					}},
				})
				if err := roles("us-east-1", false); err != nil {
					return fmt.Errorf("after the us-east-1 destroy: %w", err)
				}
				if err := roles("us-west-2", true); err != nil {
					return fmt.Errorf("after the us-east-1 destroy: %w", err)
				}
				if err := expectOwnedParts(west, name, 18); err != nil {
					return fmt.Errorf("the us-west-2 cluster after the us-east-1 destroy: %w", err)
				}
				return nil
			},
		}},
	})
}

// TestAccInferenceClusterDefaultsPlan: with model_storage and addons unset,
// the plan holds the product's defaults: a protected SCRATCH_2 file system
// of 1200 GiB whose AWS values are known after apply, every add-on enabled
// with EKS's conflict policy OVERWRITE, the in-cluster add-ons on with their
// pinned device plugin image and chart version, the GPU nodes colocated and
// labelled for the device plugin, Kubernetes 1.33.
func TestAccInferenceClusterDefaultsPlan(t *testing.T) {
	standIn, _ := standInSetup(t)
	res := "llmd_inference_cluster.test"
	ms := tfjsonpath.New("model_storage")
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{{
			// The comment keeps clusterConfig from adding an unprotected model_storage.
			Config:             clusterConfig(standIn, "acc-defaults", "  # model_storage: the defaults\n  # in-cluster add-ons on\n  gpu_node_group = { desired_size = 2, min_size = 2, max_size = 2 }"),
			PlanOnly:           true,
			ExpectNonEmptyPlan: true,
			ConfigPlanChecks: resource.ConfigPlanChecks{PostApplyPreRefresh: []plancheck.PlanCheck{
				plancheck.ExpectResourceAction(res, plancheck.ResourceActionCreate),
				plancheck.ExpectKnownValue(res, ms.AtMapKey("enabled"), knownvalue.Bool(true)),
				plancheck.ExpectKnownValue(res, ms.AtMapKey("deletion_protection"), knownvalue.Bool(true)),
				plancheck.ExpectKnownValue(res, ms.AtMapKey("deployment_type"), knownvalue.StringExact("SCRATCH_2")),
				plancheck.ExpectKnownValue(res, ms.AtMapKey("storage_capacity_gib"), knownvalue.Int64Exact(1200)),
				plancheck.ExpectKnownValue(res, ms.AtMapKey("file_system_type_version"), knownvalue.StringExact("2.15")),
				plancheck.ExpectUnknownValue(res, ms.AtMapKey("file_system_id")),
				plancheck.ExpectUnknownValue(res, ms.AtMapKey("mount_name")),
				plancheck.ExpectKnownValue(res, tfjsonpath.New("addons").AtMapKey("fsx_csi_driver").AtMapKey("enabled"), knownvalue.Bool(true)),
				plancheck.ExpectKnownValue(res, tfjsonpath.New("addons").AtMapKey("vpc_cni").AtMapKey("resolve_conflicts"), knownvalue.StringExact("OVERWRITE")),
				plancheck.ExpectKnownValue(res, tfjsonpath.New("addons").AtMapKey("nvidia_device_plugin").AtMapKey("enabled"), knownvalue.Bool(true)),
				plancheck.ExpectKnownValue(res, tfjsonpath.New("addons").AtMapKey("nvidia_device_plugin").AtMapKey("image"), knownvalue.StringExact(workloads.DefaultDevicePluginImage)),
				plancheck.ExpectUnknownValue(res, tfjsonpath.New("addons").AtMapKey("nvidia_device_plugin").AtMapKey("status")),
				plancheck.ExpectKnownValue(res, tfjsonpath.New("addons").AtMapKey("monitoring").AtMapKey("enabled"), knownvalue.Bool(true)),
				plancheck.ExpectKnownValue(res, tfjsonpath.New("addons").AtMapKey("monitoring").AtMapKey("chart_version"), knownvalue.StringExact(addons.DefaultChartVersion)),
				plancheck.ExpectKnownValue(res, tfjsonpath.New("addons").AtMapKey("monitoring").AtMapKey("chart_repository"), knownvalue.StringExact(addons.DefaultRepository)),
				plancheck.ExpectKnownValue(res, tfjsonpath.New("addons").AtMapKey("monitoring").AtMapKey("namespace"), knownvalue.StringExact("monitoring")),
				plancheck.ExpectUnknownValue(res, tfjsonpath.New("addons").AtMapKey("monitoring").AtMapKey("revision")),
				plancheck.ExpectUnknownValue(res, tfjsonpath.New("in_cluster_inventory")),
				plancheck.ExpectKnownValue(res, tfjsonpath.New("gpu_node_group").AtMapKey("colocate_with_storage"), knownvalue.Bool(true)),
				plancheck.ExpectKnownValue(res, tfjsonpath.New("gpu_node_group").AtMapKey("labels").AtMapKey("nvidia.com/gpu.present"), knownvalue.StringExact("true")),
				plancheck.ExpectKnownValue(res, tfjsonpath.New("gpu_node_group").AtMapKey("version"), knownvalue.StringExact("1.33")),
				plancheck.ExpectKnownValue(res, tfjsonpath.New("kubernetes_version"), knownvalue.StringExact("1.33")),
			}},
		}},
	})
}
