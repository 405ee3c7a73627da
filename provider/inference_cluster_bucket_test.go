package provider

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/llmd-dev/terraform-provider-llmd/internal/awsinfra"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// TestAccInferenceClusterModelBucket, through the terraform CLI, on a
// cluster without FSx:
//   - create: the cluster creates its private bucket (tags, public access
//     block, ownership, encryption, TLS-only policy, as S3 reports them) and
//     an S3 gateway endpoint on the private route table; model_bucket
//     exports bucket, arn, region and the endpoint, and the plan after the
//     apply is empty;
//   - a no-op plan reads the bucket with one S3 call and the endpoint with
//     one EC2 call per refresh, and lists no objects;
//   - with objects in the bucket and force_destroy false, a destroy, a plan
//     removing model_bucket and one giving a name instead all fail at plan
//     time naming model_bucket.force_destroy and the count, leaving the state
//     as it was;
//   - force_destroy = true applies in place; then giving the name of a bucket
//     the test made deletes the created bucket with its objects and adopts
//     the given one, the endpoint kept;
//   - the destroy removes every part, endpoint included, and leaves the
//     given bucket and its object as they were.
func TestAccInferenceClusterModelBucket(t *testing.T) {
	began := time.Now()
	standIn, c := standInSetup(t)
	const name, given = "acc-bucket", "acc-given-weights"
	ctx := context.Background()
	res := "llmd_inference_cluster.test"
	mb := tfjsonpath.New("model_bucket")
	created := awsinfra.ModelBucketName("123456789012", name, testenv.Region)
	config := func(bucket string) string {
		return clusterConfig(standIn, name, `
  gpu_node_group = { desired_size = 1, min_size = 1, max_size = 1 }
  model_storage  = { enabled = false }
  addons         = { `+inClusterOff+`, fsx_csi_driver = { enabled = false } }
`+bucket)
	}
	keep := config(`  model_bucket = {}`)
	force := config(`  model_bucket = { force_destroy = true }`)
	byName := config(`  model_bucket = { name = "` + given + `", force_destroy = true }`)
	if _, err := c.S3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: awsString(given),
		CreateBucketConfiguration: &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(testenv.Region)}}); err != nil {
		t.Fatal(err)
	}
	put := func(bucket string, keys ...string) {
		for _, k := range keys {
			if _, err := c.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: awsString(bucket), Key: awsString(k), Body: strings.NewReader("weights")}); err != nil {
				t.Fatalf("writing s3://%s/%s: %v", bucket, k, err)
			}
		}
	}
	put(given, "qwen/0123abc/model.safetensors")
	var endpointID string
	refusal := func(what string) *regexp.Regexp {
		return regexp.MustCompile(`(?s)S3 bucket ` + created + ` holds 2 object versions.*` + what + `.*model_bucket.force_destroy\s+is\s+false`)
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		CheckDestroy: resource.ComposeTestCheckFunc(checkNothingOwned(t, c, name), func(*terraform.State) error {
			objects, err := c.S3.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: awsString(given)})
			if err != nil || len(objects.Contents) != 1 {
				return fmt.Errorf("the given bucket after the destroy: %+v (%v), want it with its one object", objects, err)
			}
			if _, err := c.S3.GetBucketPolicy(ctx, &s3.GetBucketPolicyInput{Bucket: awsString(given)}); err == nil {
				return fmt.Errorf("the given bucket got a policy")
			}
			t.Logf("TestAccInferenceClusterModelBucket took %s", time.Since(began).Round(time.Millisecond))
			return nil
		}),
		Steps: []resource.TestStep{
			{
				Config: keep,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, mb.AtMapKey("bucket"), knownvalue.StringExact(created)),
					statecheck.ExpectKnownValue(res, mb.AtMapKey("arn"), knownvalue.StringExact("arn:aws:s3:::"+created)),
					statecheck.ExpectKnownValue(res, mb.AtMapKey("region"), knownvalue.StringExact(testenv.Region)),
					statecheck.ExpectKnownValue(res, mb.AtMapKey("force_destroy"), knownvalue.Bool(false)),
					statecheck.ExpectKnownValue(res, mb.AtMapKey("name"), knownvalue.Null()),
					statecheck.ExpectKnownValue(res, mb.AtMapKey("gateway_endpoint_id"), knownvalue.StringRegexp(regexp.MustCompile(`^vpce-`))),
				},
				Check: func(*terraform.State) error {
					if err := testenv.CheckPrivateBucket(ctx, c.S3, created); err != nil {
						return err
					}
					parts, err := c.FindOwnedParts(ctx, name)
					if err != nil {
						return err
					}
					kinds := map[string]int{}
					for _, p := range parts {
						kinds[p.Kind]++
						if p.Kind == "s3 bucket" || p.Kind == "ec2 vpc-endpoint" {
							if p.Tags["team"] != "inference" || p.Tags["env"] != "acc" || p.Tags[awsinfra.OwnerTag] != name {
								return fmt.Errorf("%s %s is tagged %v", p.Kind, p.ID, p.Tags)
							}
							if p.Kind == "ec2 vpc-endpoint" {
								endpointID = p.ID
							}
						}
					}
					want := map[string]int{"ec2 vpc": 1, "ec2 subnet": 4, "ec2 internet-gateway": 1, "ec2 route-table": 2, "ec2 elastic-ip": 1,
						"ec2 nat-gateway": 1, "ec2 vpc-endpoint": 1, "s3 bucket": 1, "iam role": 2, "eks cluster": 1, "eks nodegroup": 2}
					if fmt.Sprint(kinds) != fmt.Sprint(want) {
						return fmt.Errorf("owned parts %v, want %v", kinds, want)
					}
					return checkGatewayEndpoint(ctx, c, name, endpointID)
				},
			},
			{
				// A no-op plan: the refresh reads the bucket and the endpoint, no objects.
				PreConfig: func() { standIn.ResetCalls() },
				Config:    keep,
				PlanOnly:  true,
			},
			{
				PreConfig: func() {
					calls := standIn.Calls()
					s3Calls := slices.DeleteFunc(slices.Clone(calls), func(op string) bool { return !isS3Op(op) })
					refreshes := countOp(calls, "DescribeVpcEndpoints")
					t.Logf("a no-op plan made %d AWS calls (%d refreshes): %v; the model bucket's: %v and DescribeVpcEndpoints", len(calls), refreshes, calls, s3Calls)
					if refreshes == 0 || len(s3Calls) != refreshes || countOp(s3Calls, "GetBucketTagging") != refreshes {
						t.Fatalf("a no-op plan's S3 calls %v, want one GetBucketTagging per refresh (%d)", s3Calls, refreshes)
					}
					put(created, "qwen/0123abc/model.safetensors", "qwen/0123abc/config.json")
				},
				Config:      keep,
				Destroy:     true,
				ExpectError: refusal("destroying the cluster deletes it"),
			},
			{
				Config:      config(""),
				PlanOnly:    true,
				ExpectError: refusal("removing model_bucket deletes it"),
			},
			{
				Config:      config(`  model_bucket = { name = "` + given + `" }`),
				PlanOnly:    true,
				ExpectError: refusal("giving model_bucket.name instead deletes it"),
			},
			{
				Config: force,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(res, mb.AtMapKey("bucket"), knownvalue.StringExact(created)),
					plancheck.ExpectKnownValue(res, mb.AtMapKey("gateway_endpoint_id"), knownvalue.NotNull()),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, mb.AtMapKey("force_destroy"), knownvalue.Bool(true)),
				},
			},
			{
				Config: byName,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
					plancheck.ExpectResourceAction(res, plancheck.ResourceActionUpdate),
					plancheck.ExpectKnownValue(res, mb.AtMapKey("bucket"), knownvalue.StringExact(given)),
				}},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(res, mb.AtMapKey("bucket"), knownvalue.StringExact(given)),
					statecheck.ExpectKnownValue(res, mb.AtMapKey("arn"), knownvalue.StringExact("arn:aws:s3:::"+given)),
					statecheck.ExpectKnownValue(res, mb.AtMapKey("name"), knownvalue.StringExact(given)),
				},
				Check: func(s *terraform.State) error {
					if got := s.RootModule().Resources[res].Primary.Attributes["model_bucket.gateway_endpoint_id"]; got != endpointID {
						return fmt.Errorf("gateway endpoint %s after the switch, want %s kept", got, endpointID)
					}
					if _, err := c.S3.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: awsString(created)}); err == nil {
						return fmt.Errorf("the created bucket %s is still there", created)
					}
					return expectOwnedParts(c, name, 16)
				},
			},
		},
	})
}

// checkGatewayEndpoint: the cluster's S3 gateway endpoint serves its
// private route table, which routes S3's prefix list through it.
func checkGatewayEndpoint(ctx context.Context, c *awsinfra.Clients, name, id string) error {
	rts, err := c.EC2.DescribeRouteTables(ctx, &ec2.DescribeRouteTablesInput{Filters: []ec2types.Filter{
		{Name: awsString("tag:" + awsinfra.OwnerTag), Values: []string{name}}, {Name: awsString("tag:llmd.dev/part"), Values: []string{"private-rt"}}}})
	if err != nil || len(rts.RouteTables) != 1 {
		return fmt.Errorf("the private route table: %+v (%v)", rts, err)
	}
	private := rts.RouteTables[0]
	eps, err := c.EC2.DescribeVpcEndpoints(ctx, &ec2.DescribeVpcEndpointsInput{VpcEndpointIds: []string{id}})
	if err != nil || len(eps.VpcEndpoints) != 1 {
		return fmt.Errorf("endpoint %s: %v", id, err)
	}
	ep := eps.VpcEndpoints[0]
	if ep.VpcEndpointType != ec2types.VpcEndpointTypeGateway || awssdk.ToString(ep.ServiceName) != "com.amazonaws."+testenv.Region+".s3" ||
		!slices.Equal(ep.RouteTableIds, []string{awssdk.ToString(private.RouteTableId)}) {
		return fmt.Errorf("endpoint %s is a %s endpoint of %s on %v, want a Gateway of S3 on the private route table %s", id, ep.VpcEndpointType,
			awssdk.ToString(ep.ServiceName), ep.RouteTableIds, awssdk.ToString(private.RouteTableId))
	}
	for _, r := range private.Routes {
		if awssdk.ToString(r.GatewayId) == id && strings.HasPrefix(awssdk.ToString(r.DestinationPrefixListId), "pl-") {
			return nil
		}
	}
	return fmt.Errorf("the private route table %s has no route through %s: %+v", awssdk.ToString(private.RouteTableId), id, private.Routes)
}

// isS3Op reports whether a call the stand-in recorded is one of S3's.
func isS3Op(op string) bool {
	for _, p := range []string{"Bucket", "Object", "PublicAccessBlock"} {
		if strings.Contains(op, p) {
			return true
		}
	}
	return false
}

func countOp(calls []string, op string) int {
	n := 0
	for _, c := range calls {
		if c == op {
			n++
		}
	}
	return n
}
