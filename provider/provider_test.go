package provider

import (
	"os"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/llmd-dev/terraform-provider-llmd/internal/ekscredential"
	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

func TestMain(m *testing.M) {
	// llmd_cluster_credentials' exec runs the provider's own binary
	// (os.Executable): in these tests, this test binary, which then answers
	// as the provider binary does.
	if len(os.Args) > 1 && os.Args[1] == ekscredential.Command {
		os.Exit(ekscredential.Main(os.Args[2:]))
	}
	os.Exit(testenv.Main(m))
}

// testAccProtoV6ProviderFactories serves the provider in process, so the real
// terraform CLI runs it without any registry.
var testAccProtoV6ProviderFactories = map[string]func() (tfprotov6.ProviderServer, error){
	"llmd": providerserver.NewProtocol6WithError(New("test")()),
}

// testAccPreCheck requires TF_ACC: acceptance tests drive the real terraform CLI.
func testAccPreCheck(t *testing.T) {
	if os.Getenv("TF_ACC") == "" && testenv.InCI() {
		t.Fatal("TF_ACC must be set in CI: acceptance tests may not be skipped")
	}
}

// providerConfig points every service endpoint at moto explicitly (rather than
// through AWS_ENDPOINT_URL) so the endpoints block itself is under test; extra
// is HCL added inside the provider block.
func providerConfig(moto *testenv.Moto, extra string) string {
	return `
provider "llmd" {
  region      = "` + testenv.Region + `"
  max_retries = 2
  retry_mode  = "standard"
  endpoints {
    ec2           = "` + moto.URL + `"
    eks           = "` + moto.URL + `"
    events        = "` + moto.URL + `"
    fsx           = "` + moto.URL + `"
    iam           = "` + moto.URL + `"
    s3            = "` + moto.URL + `"
    servicequotas = "` + moto.URL + `"
    sqs           = "` + moto.URL + `"
    sts           = "` + moto.URL + `"
  }
  default_tags {
    tags = { team = "inference" }
  }
` + extra + `
}
`
}

// TestAccProviderConfigurationCallerIdentity configures the provider against
// moto and reads who it acts as, first directly and then through an assumed
// role whose session ARN must resolve to the role's IAM ARN (with its path).
func TestAccProviderConfigurationCallerIdentity(t *testing.T) {
	moto := testenv.StartMoto(t)
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": testenv.AccessKey, "AWS_SECRET_ACCESS_KEY": testenv.SecretKey,
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/dev/null", "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"} {
		t.Setenv(k, v)
	}
	roleARN := createRole(t, moto, "/platform/", "llmd-deployer")
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: providerConfig(moto, "") + `data "llmd_caller_identity" "me" {}`,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.llmd_caller_identity.me", tfjsonpath.New("account_id"), knownvalue.StringExact("123456789012")),
					statecheck.ExpectKnownValue("data.llmd_caller_identity.me", tfjsonpath.New("arn"), knownvalue.StringRegexp(regexp.MustCompile(`^arn:aws:(iam|sts)::123456789012:`))),
				},
			},
			{
				Config: providerConfig(moto, `
  assume_role {
    role_arn     = "`+roleARN+`"
    session_name = "ci"
    duration     = "1h"
  }`) + `
data "llmd_caller_identity" "me" {}`,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.llmd_caller_identity.me", tfjsonpath.New("arn"), knownvalue.StringExact("arn:aws:sts::123456789012:assumed-role/llmd-deployer/ci")),
					statecheck.ExpectKnownValue("data.llmd_caller_identity.me", tfjsonpath.New("principal_arn"), knownvalue.StringExact(roleARN)),
				},
			},
		},
	})
}

// TestAccProviderConfigurationErrors checks that bad settings fail at plan
// time with a message naming the field and the fix.
func TestAccProviderConfigurationErrors(t *testing.T) {
	moto := testenv.StartMoto(t)
	cases := map[string]struct {
		config string
		want   *regexp.Regexp
	}{
		"retry mode": {
			config: `provider "llmd" {
  region     = "us-west-2"
  retry_mode = "eager"
}`,
			want: regexp.MustCompile(`(?s)retry_mode.*standard.*adaptive`),
		},
		"endpoint url": {
			config: `provider "llmd" {
  region = "us-west-2"
  endpoints {
    eks = "localhost:4566"
  }
}`,
			want: regexp.MustCompile(`endpoints\.eks: "localhost:4566" is not an absolute http\(s\) URL`),
		},
		"role duration": {
			config: providerConfig(moto, `
  assume_role {
    role_arn = "arn:aws:iam::123456789012:role/x"
    duration = "5m"
  }`),
			want: regexp.MustCompile(`assume_role\.duration: "5m" must be a Go duration between 15m and 12h`),
		},
		"role arn": {
			config: providerConfig(moto, `
  assume_role {
    session_name = "x"
  }`),
			want: regexp.MustCompile(`assume_role\.role_arn: required when assume_role is set`),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				PreCheck:                 func() { testAccPreCheck(t) },
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps: []resource.TestStep{{
					Config:      tc.config + "\n" + `data "llmd_caller_identity" "me" {}`,
					ExpectError: tc.want,
				}},
			})
		})
	}
}
