package provider

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/llmd-dev/terraform-provider-llmd/internal/awsinfra"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// TestAccInferenceClusterFSxCSIIdentity: the FSx CSI driver's controller
// gets a role of its own, trusted by EKS Pod Identity and holding the FSx
// policy, bound to its service account through the stand-in's Pod Identity
// API; the driver without the pod identity agent is refused at plan time;
// turning the driver off removes the association and the role, and destroy
// leaves neither.
func TestAccInferenceClusterFSxCSIIdentity(t *testing.T) {
	standIn, aws := standInSetup(t)
	const name = "acc-podid"
	roleName := name + "-" + testenv.Region + "-fsx-csi"
	driverOff := clusterConfig(standIn, name, "  addons = { "+inClusterOff+", fsx_csi_driver = { enabled = false } }")
	noIdentity := func(*terraform.State) error {
		if got := standIn.PodIdentityAssociations(name); len(got) != 0 {
			return fmt.Errorf("Pod Identity associations left: %v", got)
		}
		if _, err := aws.IAM.GetRole(context.Background(), &iam.GetRoleInput{RoleName: awssdk.String(roleName)}); err == nil {
			return fmt.Errorf("IAM role %s left", roleName)
		}
		return nil
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy:             resource.ComposeTestCheckFunc(checkNothingOwned(t, aws, name), noIdentity),
		Steps: []resource.TestStep{
			{
				Config:      clusterConfig(standIn, name, "  addons = { "+inClusterOff+", pod_identity_agent = { enabled = false } }"),
				PlanOnly:    true,
				ExpectError: regexp.MustCompile(`(?s)addons\.pod_identity_agent\.enabled.*=.*true`),
			},
			{
				Config: clusterConfig(standIn, name, ""),
				Check:  checkFSxCSIIdentity(aws, standIn, name, roleName),
			},
			{
				Config: driverOff,
				Check:  noIdentity,
			},
		},
	})
}

// checkFSxCSIIdentity checks the association and the role behind it.
func checkFSxCSIIdentity(c *awsinfra.Clients, standIn *testenv.AWSStandIn, cluster, roleName string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		assocs := standIn.PodIdentityAssociations(cluster)
		roleARN := assocs["kube-system/fsx-csi-controller-sa"]
		if len(assocs) != 1 || !strings.HasSuffix(roleARN, ":role/"+roleName) {
			return fmt.Errorf("Pod Identity associations %v, want kube-system/fsx-csi-controller-sa bound to role %s", assocs, roleName)
		}
		got, err := c.IAM.GetRole(context.Background(), &iam.GetRoleInput{RoleName: awssdk.String(roleName)})
		if err != nil {
			return fmt.Errorf("reading the FSx CSI driver's role: %w", err)
		}
		trust, err := url.QueryUnescape(awssdk.ToString(got.Role.AssumeRolePolicyDocument))
		if err != nil {
			return err
		}
		for _, want := range []string{`"Service":"pods.eks.amazonaws.com"`, `"sts:AssumeRole"`, `"sts:TagSession"`} {
			if !strings.Contains(strings.ReplaceAll(trust, " ", ""), want) {
				return fmt.Errorf("trust policy of %s lacks %s: %s", roleName, want, trust)
			}
		}
		attached, err := c.IAM.ListAttachedRolePolicies(context.Background(), &iam.ListAttachedRolePoliciesInput{RoleName: awssdk.String(roleName)})
		if err != nil {
			return err
		}
		if len(attached.AttachedPolicies) != 1 || awssdk.ToString(attached.AttachedPolicies[0].PolicyArn) != "arn:aws:iam::aws:policy/AmazonFSxFullAccess" {
			return fmt.Errorf("policies of %s: %v, want AmazonFSxFullAccess alone", roleName, attached.AttachedPolicies)
		}
		return nil
	}
}
