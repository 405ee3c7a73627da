package ekscredential

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	clientauthv1beta1 "k8s.io/client-go/pkg/apis/clientauthentication/v1beta1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/awsinfra"
)

// run runs the command with static credentials in the environment and
// settings as the ephemeral resource passes them.
func run(t *testing.T, s *awsinfra.Settings, args ...string) (clientauthv1beta1.ExecCredential, error) {
	t.Helper()
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	env := map[string]string{}
	if s != nil {
		raw, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		env[SettingsEnv] = string(raw)
	}
	var out, errs bytes.Buffer
	err := Run(context.Background(), args, func(k string) string { return env[k] }, &out, &errs)
	var cred clientauthv1beta1.ExecCredential
	if err == nil {
		if err := json.Unmarshal(out.Bytes(), &cred); err != nil {
			t.Fatalf("output %q: %v", out.String(), err)
		}
	}
	return cred, err
}

// TestRunPrintsExecCredential: client-go's v1beta1 ExecCredential, an EKS
// token for the named cluster in the settings' region, due for renewal
// ten minutes on (client-go runs the plugin again then).
func TestRunPrintsExecCredential(t *testing.T) {
	before := time.Now()
	cred, err := run(t, &awsinfra.Settings{Region: "eu-west-1"}, "--cluster", "prod")
	if err != nil {
		t.Fatal(err)
	}
	if cred.Kind != "ExecCredential" || cred.APIVersion != APIVersion || cred.Status == nil {
		t.Fatalf("credential %+v", cred)
	}
	tok, ok := strings.CutPrefix(cred.Status.Token, "k8s-aws-v1.")
	if !ok {
		t.Fatalf("token %q is not an EKS token", cred.Status.Token)
	}
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		t.Fatal(err)
	}
	if u.Host != "sts.eu-west-1.amazonaws.com" || !strings.Contains(u.Query().Get("X-Amz-SignedHeaders"), "x-k8s-aws-id") ||
		!strings.HasPrefix(u.Query().Get("X-Amz-Credential"), "AKIDEXAMPLE/") {
		t.Errorf("token URL %s", u.Redacted())
	}
	renew := cred.Status.ExpirationTimestamp.Time
	if renew.Before(before.Add(10*time.Minute-time.Second)) || renew.After(time.Now().Add(10*time.Minute+time.Second)) {
		t.Errorf("renewal at %s, want ten minutes after %s", renew, before)
	}
	// --region wins over the settings'.
	cred, err = run(t, &awsinfra.Settings{Region: "eu-west-1"}, "--cluster", "prod", "--region", "us-east-2")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ = base64.RawURLEncoding.DecodeString(strings.TrimPrefix(cred.Status.Token, "k8s-aws-v1."))
	if !strings.Contains(string(raw), "sts.us-east-2.amazonaws.com") {
		t.Errorf("token for --region us-east-2 is %s", raw)
	}
}

// TestRunRefuses names what is missing and never prints a credential.
func TestRunRefuses(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	for want, args := range map[string][]string{
		"--cluster":     {"--region", "eu-west-1"},
		"no AWS region": {"--cluster", "prod"},
		"not defined":   {"--cluster", "prod", "--token", "x"},
	} {
		if _, err := run(t, nil, args...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: error %v, want one naming %s", args, err, want)
		}
	}
	env := map[string]string{SettingsEnv: "{not json"}
	var out bytes.Buffer
	err := Run(context.Background(), []string{"--cluster", "prod"}, func(k string) string { return env[k] }, &out, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), SettingsEnv) || out.Len() != 0 {
		t.Errorf("bad settings: error %v, output %q", err, out.String())
	}
}
