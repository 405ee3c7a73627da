package testenv

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
)

func motoConfig(t *testing.T, endpoint string) aws.Config {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(context.Background(), config.WithRegion(Region), config.WithBaseEndpoint(endpoint),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, "")))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// assumedRole creates an assumable IAM role in moto and returns its ARN and a
// configuration holding credentials of a session in it.
func assumedRole(t *testing.T, m *Moto, path, name string) (string, aws.Config) {
	t.Helper()
	ctx := context.Background()
	cfg := motoConfig(t, m.URL)
	role, err := iam.NewFromConfig(cfg).CreateRole(ctx, &iam.CreateRoleInput{Path: aws.String(path), RoleName: aws.String(name),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:root"},"Action":"sts:AssumeRole"}]}`)})
	if err != nil {
		t.Fatalf("creating role %s: %v", name, err)
	}
	out, err := sts.NewFromConfig(cfg).AssumeRole(ctx, &sts.AssumeRoleInput{RoleArn: role.Role.Arn, RoleSessionName: aws.String("tf")})
	if err != nil {
		t.Fatalf("assuming %s: %v", name, err)
	}
	c := out.Credentials
	cfg.Credentials = credentials.NewStaticCredentialsProvider(aws.ToString(c.AccessKeyId), aws.ToString(c.SecretAccessKey), aws.ToString(c.SessionToken))
	return aws.ToString(role.Role.Arn), cfg
}

func tokenClient(c *Cluster, token string) kubernetes.Interface {
	return kubernetes.NewForConfigOrDie(&rest.Config{Host: c.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: c.CAData}})
}

func mint(t *testing.T, cfg aws.Config, now func() time.Time) string {
	t.Helper()
	tok, _, err := kube.NewTokenSource(cfg, "prod", Region, now).Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestEKSTokenWebhook proves the control plane authenticates EKS tokens as EKS
// does: aws-iam-authenticator's verifier checks the token, moto answers the
// GetCallerIdentity it replays, and only mapped principals get in.
func TestEKSTokenWebhook(t *testing.T) {
	m := StartMoto(t)
	c := StartCluster(t)
	ctx := context.Background()
	adminARN, adminCfg := assumedRole(t, m, "/platform/", "deployer")
	_, strangerCfg := assumedRole(t, m, "/", "stranger")
	c.MapIAMPrincipal(t, adminARN, "system:masters")

	admin := tokenClient(c, mint(t, adminCfg, nil))
	if _, err := admin.CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("listing namespaces as the mapped admin: %v", err)
	}
	who, err := admin.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	u := who.Status.UserInfo
	if u.Username != "arn:aws:sts::123456789012:assumed-role/deployer/tf" || !slices.Contains(u.Groups, "system:masters") ||
		!slices.Equal(u.Extra["canonicalArn"], []string{"arn:aws:iam::123456789012:role/deployer"}) {
		t.Errorf("the admin is seen as %+v; want the session ARN as user name, in system:masters, canonical ARN without the role's path", u)
	}

	past := func(d time.Duration) func() time.Time { return func() time.Time { return time.Now().Add(-d) } }
	for _, tc := range []struct{ name, token, reason string }{
		{"unmapped principal", mint(t, strangerCfg, nil), "no access entry for arn:aws:iam::123456789012:role/stranger"},
		{"token past 15 minutes", mint(t, adminCfg, past(16*time.Minute)), "X-Amz-Date parameter is expired"},
		{"not GetCallerIdentity", "k8s-aws-v1." + base64.RawURLEncoding.EncodeToString([]byte("https://sts.us-west-2.amazonaws.com/?Action=ListRoles")), "unexpected action"},
		{"token for another host", "k8s-aws-v1." + base64.RawURLEncoding.EncodeToString([]byte("https://sts.example.com/?Action=GetCallerIdentity")), `unexpected hostname "sts.example.com"`},
		{"cluster header unsigned", unsignClusterHeader(t, mint(t, adminCfg, nil)), "did not sign the x-k8s-aws-id header"},
		{"moto's default identity", mint(t, motoConfig(t, m.URL), nil), "unrecognized resource user/moto"},
	} {
		_, err := tokenClient(c, tc.token).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if !apierrors.IsUnauthorized(err) {
			t.Errorf("%s: listing namespaces = %v, want 401 Unauthorized", tc.name, err)
		}
		if got := c.eks.review(tc.token); got.Authenticated || !strings.Contains(got.Error, tc.reason) {
			t.Errorf("%s: the webhook says %+v, want a refusal for %q", tc.name, got, tc.reason)
		}
	}
	// A token 14 minutes old is still good: EKS accepts 15.
	if _, err := tokenClient(c, mint(t, adminCfg, past(14*time.Minute))).CoreV1().Namespaces().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("a 14-minute-old token: %v", err)
	}
}

// unsignClusterHeader rewrites a token as if x-k8s-aws-id had not been signed.
func unsignClusterHeader(t *testing.T, tok string) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(tok, "k8s-aws-v1."))
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("X-Amz-SignedHeaders", "host")
	u.RawQuery = q.Encode()
	return "k8s-aws-v1." + base64.RawURLEncoding.EncodeToString([]byte(u.String()))
}

// TestSTSAnswererPassesOtherHostsThrough checks the test binary's HTTP
// transport still reaches everything but the STS hosts it answers.
func TestSTSAnswererPassesOtherHostsThrough(t *testing.T) {
	m := StartMoto(t)
	StartCluster(t)
	resp, err := http.Get(m.URL + "/moto-api/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET moto-api through the default transport: %s", resp.Status)
	}
	resp, err = http.Get("https://sts.us-west-2.amazonaws.com/?Action=GetCallerIdentity&X-Amz-Credential=AKIDEXAMPLE/20260101/us-west-2/sts/aws4_request")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// moto knows no such key: it answers its default identity, which the verifier then refuses.
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("presigned GetCallerIdentity: %s %s", resp.Status, resp.Header.Get("Content-Type"))
	}
}

// TestStandInPointsClustersAtControlPlane checks DescribeCluster answers with
// the local control plane's endpoint and CA for the clusters pointed at it.
func TestStandInPointsClustersAtControlPlane(t *testing.T) {
	m := StartMoto(t)
	c := StartCluster(t)
	s := StartAWSStandIn(t, m)
	ctx := context.Background()
	client := eks.NewFromConfig(motoConfig(t, s.URL))
	s.PointClusterAt("pointed", c) // before the cluster exists, as a provider test does
	for _, name := range []string{"pointed", "other"} {
		_, err := client.CreateCluster(ctx, &eks.CreateClusterInput{Name: aws.String(name), RoleArn: aws.String("arn:aws:iam::123456789012:role/eks"),
			ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: []string{"subnet-1", "subnet-2"}}})
		if err != nil {
			t.Fatalf("creating %s: %v", name, err)
		}
	}
	describe := func(name string) *ekstypes.Cluster {
		out, err := client.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		return out.Cluster
	}
	wantCA := base64.StdEncoding.EncodeToString(c.CAData)
	if got := describe("pointed"); aws.ToString(got.Endpoint) != c.Host || aws.ToString(got.CertificateAuthority.Data) != wantCA {
		t.Errorf("pointed cluster: endpoint %s, want %s (and the control plane's CA)", aws.ToString(got.Endpoint), c.Host)
	}
	if got := describe("other"); aws.ToString(got.Endpoint) == c.Host {
		t.Errorf("a cluster not pointed anywhere answers with the control plane's endpoint")
	}
	s.PointAllClustersAt(c)
	if got := describe("other"); aws.ToString(got.Endpoint) != c.Host || aws.ToString(got.CertificateAuthority.Data) != wantCA {
		t.Errorf("after PointAllClustersAt: endpoint %s, want %s", aws.ToString(got.Endpoint), c.Host)
	}
}
