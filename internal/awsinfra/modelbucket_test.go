package awsinfra

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

var bucketNameRule = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$`)

// TestModelBucketName: S3's naming rules hold for every cluster name the
// resource accepts (up to 38 characters, upper case and a trailing hyphen
// included) in the longest region names; the name is deterministic and
// differs by account, cluster and region.
func TestModelBucketName(t *testing.T) {
	long := "A" + strings.Repeat("b-", 18) + "c"
	for _, tc := range []struct{ cluster, region string }{
		{"demo", "us-west-2"}, {"Demo", "us-west-2"}, {"ends-", "eu-west-1"}, {long, "ap-southeast-5"}, {long, "us-gov-west-1"},
		{long[:37] + "-", "ap-northeast-3"}, {"x", "us-east-1"},
	} {
		name := ModelBucketName("123456789012", tc.cluster, tc.region)
		if !bucketNameRule.MatchString(name) || strings.Contains(name, "--") || !strings.HasPrefix(name, "llmd-") || !strings.Contains(name, "-"+tc.region+"-") {
			t.Errorf("ModelBucketName(%q, %q) = %q (%d characters): breaks S3's rules or loses the region", tc.cluster, tc.region, name, len(name))
		}
		if again := ModelBucketName("123456789012", tc.cluster, tc.region); again != name {
			t.Errorf("not deterministic: %q then %q", name, again)
		}
	}
	base := ModelBucketName("123456789012", "demo", "us-west-2")
	if base != "llmd-demo-us-west-2-"+base[len(base)-8:] {
		t.Errorf("ModelBucketName = %q, want llmd-<cluster>-<region>-<8 hex>", base)
	}
	for _, other := range []string{ModelBucketName("210987654321", "demo", "us-west-2"), ModelBucketName("123456789012", "Demo", "us-west-2"),
		ModelBucketName("123456789012", "demo", "us-east-1")} {
		if other == base {
			t.Errorf("%q is the name of another account, cluster or region too", base)
		}
	}
	if a, b := ModelBucketName("1", long, "ap-southeast-5"), ModelBucketName("1", long[:35]+"zz-", "ap-southeast-5"); a == b {
		t.Errorf("two long cluster names cut to one prefix share bucket %q", a)
	}
}

// TestModelBucketCreatedPrivateAndOwned: the created bucket carries the
// owner tags from its CreateBucket call, is private (public access block,
// BucketOwnerEnforced, SSE-S3, TLS only), is adopted by a second ensure;
// holding an object it refuses a delete without force naming
// model_bucket.force_destroy and the count, and a forced delete empties it.
func TestModelBucketCreatedPrivateAndOwned(t *testing.T) {
	c, standIn := standInClients(t)
	ctx := deadline(t)
	spec := testSpec("mb")
	spec.ModelBucket = &ModelBucketSpec{}
	if err := c.ensureModelBucket(ctx, spec); err != nil {
		t.Fatalf("creating: %v", err)
	}
	name := ModelBucketName("123456789012", "mb", testenv.Region)
	tags, owned, exists, err := c.findCreatedBucket(ctx, "mb", name)
	if err != nil || !owned || !exists || tags["env"] != "test" || tags["team"] != "inference" || tags[partTag] != "model-bucket" {
		t.Fatalf("bucket %s: tags %v owned %v exists %v (%v)", name, tags, owned, exists, err)
	}
	if err := testenv.CheckPrivateBucket(ctx, c.S3, name); err != nil {
		t.Fatal(err)
	}
	standIn.ResetCalls()
	if err := c.ensureModelBucket(ctx, spec); err != nil || countCalls(standIn.Calls(), "CreateBucket") != 0 {
		t.Fatalf("adopting: %v (calls %v)", err, standIn.Calls())
	}
	standIn.ResetCalls()
	if got, err := c.FindModelBucket(ctx, "mb", name, true, ""); err != nil || got.Name != name || !got.Created || got.ARN != "arn:aws:s3:::"+name || got.Region != testenv.Region {
		t.Fatalf("read back %+v (%v)", got, err)
	}
	if calls := standIn.Calls(); len(calls) != 1 || calls[0] != "GetBucketTagging" {
		t.Fatalf("a refresh of a created bucket made %v, want GetBucketTagging alone", calls)
	}
	for _, key := range []string{"qwen/abc/model.safetensors", "qwen/abc/config.json"} {
		if _, err := c.S3.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(name), Key: aws.String(key), Body: strings.NewReader("w")}); err != nil {
			t.Fatal(err)
		}
	}
	err = c.deleteCreatedBucket(ctx, "mb", false)
	if err == nil || !strings.Contains(err.Error(), "model_bucket.force_destroy") || !strings.Contains(err.Error(), "holds 2 object versions") {
		t.Fatalf("deleting a bucket holding objects without force: %v", err)
	}
	if err := c.deleteCreatedBucket(ctx, "mb", true); err != nil {
		t.Fatalf("deleting with force: %v", err)
	}
	if _, _, exists, err := c.findCreatedBucket(ctx, "mb", name); exists || err != nil {
		t.Fatalf("bucket left after the forced delete (%v)", err)
	}
}

// TestModelBucketRefusals: a derived name another account took, a bucket
// of that name in this account without the owner tag, and a given bucket
// that is missing or in another region (S3 answers 301 there) each fail
// naming what to do.
func TestModelBucketRefusals(t *testing.T) {
	c, _ := standInClients(t)
	ctx := deadline(t)
	other := otherAccountS3(t, c, "111111111111", testenv.Region)
	spec := testSpec("taken")
	spec.ModelBucket = &ModelBucketSpec{}
	taken := ModelBucketName("123456789012", "taken", testenv.Region)
	if _, err := other.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(taken),
		CreateBucketConfiguration: &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(testenv.Region)}}); err != nil {
		t.Fatal(err)
	}
	if err := c.ensureModelBucket(ctx, spec); err == nil || !strings.Contains(err.Error(), "taken by another AWS account") ||
		!strings.Contains(err.Error(), "model_bucket.name") {
		t.Fatalf("a name another account holds: %v", err)
	}
	spec.Name = "untagged"
	untagged := ModelBucketName("123456789012", "untagged", testenv.Region)
	if _, err := c.S3.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(untagged),
		CreateBucketConfiguration: &s3types.CreateBucketConfiguration{LocationConstraint: s3types.BucketLocationConstraint(testenv.Region)}}); err != nil {
		t.Fatal(err)
	}
	if err := c.ensureModelBucket(ctx, spec); err == nil || !strings.Contains(err.Error(), "not owned by cluster untagged") {
		t.Fatalf("a bucket of the name without the owner tag: %v", err)
	}
	if err := c.DeleteCluster(ctx, "untagged"); err != nil {
		t.Fatalf("destroying a cluster whose bucket name someone else's bucket holds: %v", err)
	}
	if _, _, exists, _ := c.findCreatedBucket(ctx, "untagged", untagged); !exists {
		t.Fatal("the delete removed a bucket without the owner tag")
	}
	spec.ModelBucket = &ModelBucketSpec{Name: "no-such-weights"}
	if err := c.ensureModelBucket(ctx, spec); err == nil || !strings.Contains(err.Error(), "model_bucket.name: S3 bucket no-such-weights does not exist") {
		t.Fatalf("a missing given bucket: %v", err)
	}
	eu := otherAccountS3(t, c, "", "eu-west-1")
	if _, err := eu.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("weights-in-ireland"),
		CreateBucketConfiguration: &s3types.CreateBucketConfiguration{LocationConstraint: "eu-west-1"}}); err != nil {
		t.Fatal(err)
	}
	spec.ModelBucket.Name = "weights-in-ireland"
	if err := c.ensureModelBucket(ctx, spec); err == nil || !strings.Contains(err.Error(), "is in eu-west-1, not the provider's region us-west-2") {
		t.Fatalf("a given bucket in another region: %v", err)
	}
}

// otherAccountS3 is an S3 client at the stand-in in region, acting for
// another account (a role assumed in it; moto keeps an account's buckets
// apart but their names global) or, with account "", for this one.
func otherAccountS3(t *testing.T, c *Clients, account, region string) *s3.Client {
	t.Helper()
	creds := aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(testenv.AccessKey, testenv.SecretKey, ""))
	if account != "" {
		out, err := c.STS.AssumeRole(context.Background(), &sts.AssumeRoleInput{RoleArn: aws.String("arn:aws:iam::" + account + ":role/other"),
			RoleSessionName: aws.String("other")})
		if err != nil {
			t.Fatal(err)
		}
		k := out.Credentials
		creds = aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(aws.ToString(k.AccessKeyId), aws.ToString(k.SecretAccessKey), aws.ToString(k.SessionToken)))
	}
	return s3.New(s3.Options{Region: region, Credentials: creds, BaseEndpoint: c.Settings.endpoint("s3")})
}

// TestGatewayEndpointBesideExisting: in a VPC of the user's, a route table
// an S3 gateway endpoint serves already is left to it (EC2 refuses a second
// route to S3's prefix list there, as the stand-in does), the other route
// table gets the cluster's own endpoint (pending at first, then
// available), which a second ensure adopts and the delete removes (waiting
// through deleting) while the user's stays.
func TestGatewayEndpointBesideExisting(t *testing.T) {
	c, standIn := standInClients(t)
	ctx := deadline(t)
	vpc, err := c.EC2.CreateVpc(ctx, &ec2.CreateVpcInput{CidrBlock: aws.String("10.1.0.0/16")})
	if err != nil {
		t.Fatal(err)
	}
	vpcID := aws.ToString(vpc.Vpc.VpcId)
	var subnets, tables []string
	for i, az := range []string{"us-west-2a", "us-west-2b"} {
		sn, err := c.EC2.CreateSubnet(ctx, &ec2.CreateSubnetInput{VpcId: aws.String(vpcID), CidrBlock: aws.String([]string{"10.1.0.0/20", "10.1.16.0/20"}[i]),
			AvailabilityZone: aws.String(az)})
		if err != nil {
			t.Fatal(err)
		}
		rt, err := c.EC2.CreateRouteTable(ctx, &ec2.CreateRouteTableInput{VpcId: aws.String(vpcID)})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.EC2.AssociateRouteTable(ctx, &ec2.AssociateRouteTableInput{RouteTableId: rt.RouteTable.RouteTableId, SubnetId: sn.Subnet.SubnetId}); err != nil {
			t.Fatal(err)
		}
		subnets, tables = append(subnets, aws.ToString(sn.Subnet.SubnetId)), append(tables, aws.ToString(rt.RouteTable.RouteTableId))
	}
	theirs, err := c.EC2.CreateVpcEndpoint(ctx, &ec2.CreateVpcEndpointInput{VpcId: aws.String(vpcID), ServiceName: aws.String(s3Service(testenv.Region)),
		VpcEndpointType: ec2types.VpcEndpointTypeGateway, RouteTableIds: tables[:1]})
	if err != nil {
		t.Fatal(err)
	}
	theirID := aws.ToString(theirs.VpcEndpoint.VpcEndpointId)
	if _, err := c.EC2.CreateVpcEndpoint(ctx, &ec2.CreateVpcEndpointInput{VpcId: aws.String(vpcID), ServiceName: aws.String(s3Service(testenv.Region)),
		VpcEndpointType: ec2types.VpcEndpointTypeGateway, RouteTableIds: tables[:1]}); !isCode(err, "RouteAlreadyExists") {
		t.Fatalf("a second S3 endpoint on one route table: %v, want RouteAlreadyExists", err)
	}
	spec := testSpec("byo")
	spec.ModelBucket = &ModelBucketSpec{Name: "byo-weights"}
	if err := c.ensureGatewayEndpoint(ctx, spec, vpcID, subnets[:1]); err != nil {
		t.Fatalf("a route table already served: %v", err)
	}
	if id, err := c.findGatewayEndpointID(ctx, "byo", vpcID); err != nil || id != theirID {
		t.Fatalf("endpoint %q (%v), want the one already there, %s", id, err, theirID)
	}
	if err := c.ensureGatewayEndpoint(ctx, spec, vpcID, subnets); err != nil {
		t.Fatalf("one table served, one not: %v", err)
	}
	ours, err := c.findGatewayEndpointID(ctx, "byo", vpcID)
	if err != nil || ours == theirID || ours == "" {
		t.Fatalf("endpoint %q (%v), want the cluster's own", ours, err)
	}
	got, err := c.EC2.DescribeVpcEndpoints(ctx, &ec2.DescribeVpcEndpointsInput{VpcEndpointIds: []string{ours}})
	if err != nil || len(got.VpcEndpoints) != 1 || strings.Join(got.VpcEndpoints[0].RouteTableIds, ",") != tables[1] ||
		fromEC2Tags(got.VpcEndpoints[0].Tags)[OwnerTag] != "byo" || !strings.EqualFold(string(got.VpcEndpoints[0].State), "available") {
		t.Fatalf("the cluster's endpoint %+v (%v), want it available on %s alone, tagged", got, err, tables[1])
	}
	standIn.ResetCalls()
	if err := c.ensureGatewayEndpoint(ctx, spec, vpcID, subnets); err != nil || countCalls(standIn.Calls(), "CreateVpcEndpoint")+countCalls(standIn.Calls(), "ModifyVpcEndpoint") != 0 {
		t.Fatalf("adopting: %v (calls %v)", err, standIn.Calls())
	}
	standIn.ResetCalls()
	if err := c.deleteGatewayEndpoint(ctx, "byo"); err != nil {
		t.Fatal(err)
	}
	if n := countCalls(standIn.Calls(), "DescribeVpcEndpoints"); n < 3 {
		t.Fatalf("the delete described the endpoint %d times, want it waited through deleting", n)
	}
	if id, err := c.findGatewayEndpointID(ctx, "byo", vpcID); err != nil || id != theirID {
		t.Fatalf("after the delete: endpoint %q (%v), want the user's %s left", id, err, theirID)
	}
}
