package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"
	"github.com/hashicorp/terraform-plugin-testing/echoprovider"
	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfversion"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/llmd-dev/terraform-provider-llmd/internal/testenv"
)

// TestAccClusterCredentials: the ephemeral credentials of a cluster reach
// its real API server both ways the kubernetes and helm providers use them,
// the static token and the exec plugin (client-go running the provider's
// binary, which signs as the provider does: assuming the deployer role
// through the AWS stand-in), and only the echo resource, which the test
// adds to see them, holds them in state. Each run of the plugin mints a new
// token. A missing cluster is an error naming it.
func TestAccClusterCredentials(t *testing.T) {
	t.Setenv("TF_ACC_TERRAFORM_PATH", testenv.Terraform(t))
	g := newInClusterGround(t, "creds", 0, 0)
	const cluster = "acc-creds"
	if _, err := g.aws.EKS.CreateCluster(context.Background(), &eks.CreateClusterInput{Name: aws.String(cluster),
		RoleArn: aws.String(g.roleARN), ResourcesVpcConfig: &ekstypes.VpcConfigRequest{}}); err != nil {
		t.Fatal(err)
	}
	config := func(name string) string {
		return g.provider() + fmt.Sprintf(`
ephemeral "llmd_cluster_credentials" "c" {
  cluster_name = %q
}

provider "echo" {
  data = ephemeral.llmd_cluster_credentials.c
}

resource "echo" "c" {}
`, name)
	}
	factories := map[string]func() (tfprotov6.ProviderServer, error){"echo": echoprovider.NewProviderServer()}
	for k, v := range testAccProtoV6ProviderFactories {
		factories[k] = v
	}
	resource.Test(t, resource.TestCase{
		PreCheck:                 func() { testAccPreCheck(t) },
		ProtoV6ProviderFactories: factories,
		TerraformVersionChecks:   []tfversion.TerraformVersionCheck{tfversion.RequireAbove(tfversion.Version1_10_0)},
		Steps: []resource.TestStep{
			{
				Config:      config("nope"),
				ExpectError: regexp.MustCompile(`no EKS cluster "nope" in ` + testenv.Region),
			},
			{
				Config:            config(cluster),
				ConfigStateChecks: []statecheck.StateCheck{credentialsCheck{c: g.c}},
			},
		},
	})
}

// credentialsCheck reads the credentials the echo resource holds and uses them.
type credentialsCheck struct{ c *testenv.Cluster }

func (k credentialsCheck) CheckState(ctx context.Context, req statecheck.CheckStateRequest, resp *statecheck.CheckStateResponse) {
	fail := func(format string, args ...any) { resp.Error = fmt.Errorf(format, args...) }
	var data map[string]any
	for _, r := range req.State.Values.RootModule.Resources {
		if strings.HasPrefix(r.Address, "ephemeral.") {
			fail("state holds %s", r.Address)
			return
		}
		if r.Address == "echo.c" {
			data, _ = r.AttributeValues["data"].(map[string]any)
		}
	}
	if data == nil {
		fail("no echo.c data in state")
		return
	}
	host, _ := data["host"].(string)
	ca, _ := data["cluster_ca_certificate"].(string)
	token, _ := data["token"].(string)
	// The token is in state once: in the echo resource the test added to see it.
	raw, err := json.Marshal(req.State)
	if err != nil || token == "" || strings.Count(string(raw), token) != 1 {
		fail("the token is in state %d times, want once (echo.c's data): %v", strings.Count(string(raw), token), err)
		return
	}
	if host != k.c.Host || ca != string(k.c.CAData) || !strings.HasPrefix(token, "k8s-aws-v1.") {
		fail("host %q, CA %d bytes, token prefix %q: want the control plane's", host, len(ca), token[:min(len(token), 11)])
		return
	}
	expires, err := time.Parse(time.RFC3339, fmt.Sprint(data["expiration"]))
	if err != nil || time.Until(expires) < 13*time.Minute || time.Until(expires) > 15*time.Minute {
		fail("expiration %v (%v), want about fifteen minutes on", data["expiration"], err)
		return
	}
	// The static token.
	if err := listNamespaces(ctx, &rest.Config{Host: host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: []byte(ca)}}); err != nil {
		fail("with the token: %v", err)
		return
	}
	// The exec plugin, as the kubernetes provider's exec block runs it.
	plugin, _ := data["exec"].(map[string]any)
	execCfg := &clientcmdapi.ExecConfig{APIVersion: fmt.Sprint(plugin["api_version"]), Command: fmt.Sprint(plugin["command"]),
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
	for _, a := range plugin["args"].([]any) {
		execCfg.Args = append(execCfg.Args, fmt.Sprint(a))
	}
	for name, v := range plugin["env"].(map[string]any) {
		execCfg.Env = append(execCfg.Env, clientcmdapi.ExecEnvVar{Name: name, Value: fmt.Sprint(v)})
	}
	if err := listNamespaces(ctx, &rest.Config{Host: host, ExecProvider: execCfg, TLSClientConfig: rest.TLSClientConfig{CAData: []byte(ca)}}); err != nil {
		fail("with exec %s %v: %v", execCfg.Command, execCfg.Args, err)
		return
	}
	// Every run mints a token of its own (signed at its own second).
	var tokens []string
	for range 2 {
		cmd := exec.CommandContext(ctx, execCfg.Command, execCfg.Args...)
		cmd.Env = cmd.Environ()
		for _, e := range execCfg.Env {
			cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
		}
		out, err := cmd.Output()
		if err != nil {
			fail("running the plugin: %v", err)
			return
		}
		tokens = append(tokens, string(out))
		time.Sleep(1100 * time.Millisecond)
	}
	if tokens[0] == tokens[1] {
		fail("two runs of the plugin printed the same credential")
	}
}

// listNamespaces lists namespaces with cfg, and checks the API server saw
// the caller as the deployer role's session, the identity the provider
// signs with (SelfSubjectReview).
func listNamespaces(ctx context.Context, cfg *rest.Config) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if _, err = cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return err
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	if user := review.Status.UserInfo.Username; !strings.Contains(user, ":assumed-role/llmd-creds-deployer/tf") {
		return fmt.Errorf("the API server saw %q, want the deployer role's session", user)
	}
	return nil
}
