package provider

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"

	"github.com/llmd-dev/terraform-provider-llmd/internal/awsinfra"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// motoClients are awsinfra clients pointed at moto, for arranging and checking
// the world behind Terraform's back.
func motoClients(t *testing.T, moto *testenv.Moto) *awsinfra.Clients {
	t.Helper()
	endpoints := map[string]string{}
	for _, svc := range awsinfra.Services {
		endpoints[svc] = moto.URL
	}
	s := awsinfra.Settings{Region: testenv.Region, Endpoints: endpoints}
	cfg, err := awsinfra.LoadConfig(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	return awsinfra.NewClients(cfg, s)
}

// createRole makes an IAM role that anyone in the account may assume and returns its ARN.
func createRole(t *testing.T, moto *testenv.Moto, path, name string) string {
	t.Helper()
	out, err := motoClients(t, moto).IAM.CreateRole(context.Background(), &iam.CreateRoleInput{
		Path:                     aws.String(path),
		RoleName:                 aws.String(name),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:root"},"Action":"sts:AssumeRole"}]}`),
	})
	if err != nil {
		t.Fatalf("creating role %s: %v", name, err)
	}
	return aws.ToString(out.Role.Arn)
}
