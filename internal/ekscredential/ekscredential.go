// Package ekscredential is the provider binary's eks-token command: a
// client-go exec credential plugin (client.authentication.k8s.io/v1beta1)
// that prints an EKS token for one cluster, signed with the credentials the
// provider itself uses (its settings arrive in SettingsEnv: profile,
// assume_role, web identity, endpoints), so the kubernetes and helm
// providers get a fresh token whenever the one they hold is due for renewal,
// for as long as those credentials can be had.
package ekscredential

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientauthv1beta1 "k8s.io/client-go/pkg/apis/clientauthentication/v1beta1"

	"github.com/llmd-dev/terraform-provider-llmd/internal/awsinfra"
	"github.com/llmd-dev/terraform-provider-llmd/internal/kube"
)

// Command is the provider binary's first argument that runs Run.
const Command = "eks-token"

// SettingsEnv carries the provider's AWS settings (awsinfra.Settings as
// JSON) to the command; without it the AWS SDK's default chain signs.
const SettingsEnv = "LLMD_AWS_SETTINGS"

// APIVersion is the exec credential API the command speaks.
const APIVersion = "client.authentication.k8s.io/v1beta1"

// Run parses args (--cluster NAME [--region REGION]), mints a token and
// writes the ExecCredential to stdout. getenv reads the environment.
func Run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet(Command, flag.ContinueOnError)
	fs.SetOutput(stderr)
	cluster := fs.String("cluster", "", "the EKS cluster's name (signed into the token)")
	region := fs.String("region", "", "the cluster's AWS region (default: the provider's)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *cluster == "" {
		return errors.New("--cluster: give the EKS cluster's name")
	}
	var s awsinfra.Settings
	if raw := getenv(SettingsEnv); raw != "" {
		if err := json.Unmarshal([]byte(raw), &s); err != nil {
			return fmt.Errorf("%s is not the provider's settings (pass exec.env from llmd_cluster_credentials as it is): %v", SettingsEnv, err)
		}
	}
	if *region != "" {
		s.Region = *region
	}
	cfg, err := awsinfra.LoadConfig(ctx, s)
	if err != nil {
		return err
	}
	src := kube.NewTokenSource(cfg, *cluster, cfg.Region, nil)
	token, _, err := src.Token(ctx)
	if err != nil {
		return err
	}
	return json.NewEncoder(stdout).Encode(Credential(token, src.RenewAt()))
}

// Credential is the ExecCredential carrying token until renewAt: client-go
// runs the plugin again once that time has passed.
func Credential(token string, renewAt time.Time) clientauthv1beta1.ExecCredential {
	return clientauthv1beta1.ExecCredential{
		TypeMeta: metav1.TypeMeta{Kind: "ExecCredential", APIVersion: APIVersion},
		Status:   &clientauthv1beta1.ExecCredentialStatus{Token: token, ExpirationTimestamp: &metav1.Time{Time: renewAt}},
	}
}

// Main runs the command as a process (args after the command's name),
// errors to stderr, and returns the exit code.
func Main(args []string) int {
	if err := Run(context.Background(), args, os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "terraform-provider-llmd %s: %v\n", Command, err)
		return 1
	}
	return 0
}
