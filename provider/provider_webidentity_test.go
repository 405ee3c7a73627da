package provider

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// TestAccProviderWebIdentity: the provider takes its credentials from an
// OIDC token through moto's STS AssumeRoleWithWebIdentity, given in the
// provider block (token file, inline token) or the way HCP Terraform's
// dynamic credentials arrive: a generated shared config file naming the
// role and the token file, passed in shared_config_files. Every call then
// runs as the assumed role, shown by the caller identity it reads. The
// static keys of the environment are cleared for the shared-config step, so
// only the file can give credentials.
func TestAccProviderWebIdentity(t *testing.T) {
	moto := motoSetup(t)
	roleARN := createRole(t, moto, "/", "llmd-hcp")
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	const token = "eyJhbGciOiJSUzI1NiJ9.stand-in-oidc-token.sig"
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The shape of HCP Terraform's generated file: a default profile with the
	// run role and the workload identity token file.
	sharedConfig := filepath.Join(dir, "config")
	if err := os.WriteFile(sharedConfig, []byte("[default]\nrole_arn = "+roleARN+"\nweb_identity_token_file = "+tokenFile+"\nrole_session_name = tfc-run\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	identity := func(session string) []statecheck.StateCheck {
		return []statecheck.StateCheck{
			statecheck.ExpectKnownValue("data.llmd_caller_identity.me", tfjsonpath.New("arn"),
				knownvalue.StringExact("arn:aws:sts::123456789012:assumed-role/llmd-hcp/"+session)),
			statecheck.ExpectKnownValue("data.llmd_caller_identity.me", tfjsonpath.New("principal_arn"), knownvalue.StringExact(roleARN)),
		}
	}
	const data = "\ndata \"llmd_caller_identity\" \"me\" {}\n"
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
		Steps: []resource.TestStep{
			{
				Config: providerConfig(moto, `
  assume_role_with_web_identity {
    role_arn                = "`+roleARN+`"
    session_name            = "ci-file"
    web_identity_token_file = "`+tokenFile+`"
    duration                = "1h"
  }`) + data,
				ConfigStateChecks: identity("ci-file"),
			},
			{
				Config: providerConfig(moto, `
  assume_role_with_web_identity {
    role_arn           = "`+roleARN+`"
    session_name       = "ci-inline"
    web_identity_token = "`+token+`"
  }`) + data,
				ConfigStateChecks: identity("ci-inline"),
			},
			{
				PreConfig: func() {
					t.Setenv("AWS_ACCESS_KEY_ID", "")
					t.Setenv("AWS_SECRET_ACCESS_KEY", "")
					// The SDK assumes a shared-config profile's role with an STS
					// client of its own, which endpoints.sts does not reach; the
					// SDK's service endpoint variable does.
					t.Setenv("AWS_ENDPOINT_URL_STS", moto.URL)
				},
				Config:            providerConfig(moto, `  shared_config_files = ["`+sharedConfig+`"]`) + data,
				ConfigStateChecks: identity("tfc-run"),
			},
		},
	})
}

// TestAccProviderWebIdentityErrors: bad web identity settings fail at plan
// time naming the field and the fix.
func TestAccProviderWebIdentityErrors(t *testing.T) {
	moto := testenv.StartMoto(t)
	const token = "secret-oidc-token-value"
	cases := map[string]struct {
		block string
		want  *regexp.Regexp
	}{
		"no token": {`
  assume_role_with_web_identity {
    role_arn = "arn:aws:iam::123456789012:role/x"
  }`, regexp.MustCompile(`set exactly one of\s+web_identity_token and\s+web_identity_token_file`)},
		"two tokens": {`
  assume_role_with_web_identity {
    role_arn                = "arn:aws:iam::123456789012:role/x"
    web_identity_token      = "` + token + `"
    web_identity_token_file = "/nonexistent"
  }`, regexp.MustCompile(`set exactly one of\s+web_identity_token and\s+web_identity_token_file`)},
		"no role": {`
  assume_role_with_web_identity {
    web_identity_token = "` + token + `"
  }`, regexp.MustCompile(`assume_role_with_web_identity\.role_arn: required`)},
		"duration": {`
  assume_role_with_web_identity {
    role_arn           = "arn:aws:iam::123456789012:role/x"
    web_identity_token = "` + token + `"
    duration           = "13h"
  }`, regexp.MustCompile(`assume_role_with_web_identity\.duration: "13h" must be a Go duration\s+between\s+15m and 12h`)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				PreCheck:                 func() { testAccPreCheck(t) },
				ProtoV6ProviderFactories: testAccProtoV6ProviderFactories,
				Steps: []resource.TestStep{{
					Config:      providerConfig(moto, tc.block) + "\ndata \"llmd_caller_identity\" \"me\" {}\n",
					ExpectError: tc.want,
				}},
			})
		})
	}
}
