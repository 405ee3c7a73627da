package kube

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	authnv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/llmd-dev/terraform-provider-llmd/internal/awsinfra"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// eksGround is moto behind the AWS stand-in, the local control plane verifying
// EKS tokens, and an EKS cluster whose DescribeCluster points at it.
type eksGround struct {
	standIn *testenv.AWSStandIn
	cluster *testenv.Cluster
	target  Target
}

func newEKSGround(t *testing.T, name string) *eksGround {
	t.Helper()
	moto := testenv.StartMoto(t)
	moto.SetEnv(t)
	g := &eksGround{standIn: testenv.StartAWSStandIn(t, moto), cluster: testenv.StartCluster(t)}
	g.standIn.PointClusterAt(name, g.cluster)
	clients := awsinfra.NewClients(g.providerConfig(t, ""), g.settings(""))
	ctx := context.Background()
	_, err := clients.EKS.CreateCluster(ctx, &eks.CreateClusterInput{Name: aws.String(name), RoleArn: aws.String("arn:aws:iam::123456789012:role/eks"),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: []string{"subnet-1", "subnet-2"}}})
	if err != nil {
		t.Fatalf("creating EKS cluster %s: %v", name, err)
	}
	// The target is built from DescribeCluster, as the provider's cluster resource exports it.
	out, err := clients.EKS.DescribeCluster(ctx, &eks.DescribeClusterInput{Name: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	g.target = Target{ClusterName: name, Endpoint: aws.ToString(out.Cluster.Endpoint),
		CACertificate: aws.ToString(out.Cluster.CertificateAuthority.Data), Region: testenv.Region}
	return g
}

func (g *eksGround) settings(roleARN string) awsinfra.Settings {
	s := awsinfra.Settings{Region: testenv.Region, Endpoints: map[string]string{}}
	for _, svc := range awsinfra.Services {
		s.Endpoints[svc] = g.standIn.URL
	}
	if roleARN != "" {
		s.AssumeRole = &awsinfra.AssumeRole{RoleARN: roleARN, SessionName: "tf"}
	}
	return s
}

// providerConfig is the AWS configuration the provider would build, acting
// through roleARN when it is set.
func (g *eksGround) providerConfig(t *testing.T, roleARN string) aws.Config {
	t.Helper()
	cfg, err := awsinfra.LoadConfig(context.Background(), g.settings(roleARN))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func (g *eksGround) createRole(t *testing.T, path, name string) string {
	t.Helper()
	out, err := awsinfra.NewClients(g.providerConfig(t, ""), g.settings("")).IAM.CreateRole(context.Background(), &iam.CreateRoleInput{
		Path: aws.String(path), RoleName: aws.String(name),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:root"},"Action":"sts:AssumeRole"}]}`),
	})
	if err != nil {
		t.Fatalf("creating role %s: %v", name, err)
	}
	return aws.ToString(out.Role.Arn)
}

// TestEKSTargetReachesClusterAsMappedAdmin runs the product's token path end to
// end: the provider's AWS configuration with assume_role, a target taken from
// DescribeCluster, a token verified by aws-iam-authenticator behind the local
// kube-apiserver, and RBAC as the access entry's group.
func TestEKSTargetReachesClusterAsMappedAdmin(t *testing.T) {
	g := newEKSGround(t, "prod-inference")
	ctx := context.Background()
	if g.target.Endpoint != g.cluster.Host {
		t.Fatalf("DescribeCluster endpoint %s, want the local control plane %s", g.target.Endpoint, g.cluster.Host)
	}
	adminARN := g.createRole(t, "/platform/", "llmd-deployer")
	g.cluster.MapIAMPrincipal(t, adminARN, "system:masters")
	strangerARN := g.createRole(t, "/", "someone-else")

	cfg, err := RESTConfig(ctx, g.target, g.providerConfig(t, adminARN))
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(cfg)
	nss, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("listing namespaces as the mapped admin: %v", err)
	}
	if len(nss.Items) == 0 {
		t.Error("no namespaces listed")
	}
	who, err := client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u := who.Status.UserInfo; u.Username != "arn:aws:sts::123456789012:assumed-role/llmd-deployer/tf" {
		t.Errorf("the cluster sees %q; want the provider's assumed-role session", u.Username)
	}

	cfg, err = RESTConfig(ctx, g.target, g.providerConfig(t, strangerARN))
	if err != nil {
		t.Fatal(err)
	}
	_, err = kubernetes.NewForConfigOrDie(cfg).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if !apierrors.IsUnauthorized(err) {
		t.Fatalf("an unmapped principal listed namespaces: %v; want 401 Unauthorized", err)
	}
	if strings.Contains(err.Error(), "k8s-aws-v1.") {
		t.Errorf("the error carries the token: %v", err)
	}
}

// TestTransportRemintsAgainstCluster shows the transport asks its source on
// every request: a token too old for EKS is refused by the cluster, and once
// the source's clock says it is due, the same client carries a fresh one.
func TestTransportRemintsAgainstCluster(t *testing.T) {
	g := newEKSGround(t, "remint")
	adminARN := g.createRole(t, "/", "remint-admin")
	g.cluster.MapIAMPrincipal(t, adminARN, "system:masters")
	ctx := context.Background()
	// The clock starts 16 minutes behind: the first token is dated past EKS's 15.
	clock := &fakeClock{t: time.Now().Add(-16 * time.Minute)}
	source := NewTokenSource(g.providerConfig(t, adminARN), g.target.ClusterName, g.target.Region, clock.now)
	ca, err := decodeCA("cluster.cluster_ca_certificate", g.target.CACertificate, false)
	if err != nil {
		t.Fatal(err)
	}
	client := kubernetes.NewForConfigOrDie(&rest.Config{Host: g.target.Endpoint, TLSClientConfig: rest.TLSClientConfig{CAData: ca},
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper { return &bearerRoundTripper{source: source, next: rt} }})
	list := func() error {
		_, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		return err
	}
	if err := list(); !apierrors.IsUnauthorized(err) {
		t.Fatalf("with a 16-minute-old token: %v, want 401 Unauthorized", err)
	}
	stale, _, _ := source.Token(ctx)
	clock.advance(10 * time.Minute) // due for re-minting; dated 6 minutes ago, which EKS accepts
	if err := list(); err != nil {
		t.Fatalf("after re-minting: %v", err)
	}
	if fresh, _, _ := source.Token(ctx); fresh == stale {
		t.Fatal("the source did not re-mint")
	}
}
