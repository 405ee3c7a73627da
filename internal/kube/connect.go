// How the provider reaches a cluster: an EKS cluster made in the same apply
// (endpoint, CA and a token minted from the provider's AWS credentials), or a
// cluster made elsewhere (host, CA and token, or an explicit kubeconfig file).
// Nothing is ever read from ~/.kube, $KUBECONFIG or the in-cluster service
// account: a client that silently reached another cluster, or localhost, is
// the worst failure a deploy tool can have.

package kube

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Target says how to reach one cluster. Exactly one form is set:
//
//   - EKS: ClusterName, Endpoint, CACertificate (base64 PEM, as EKS returns
//     it) and Region; the bearer token is minted from AWS credentials.
//   - Direct: Host, Token and optionally CACertificate (base64 PEM or PEM;
//     empty trusts the system roots), or Kubeconfig (an explicit path) with an
//     optional Context (empty: the file's current-context).
type Target struct {
	// ClusterName is the EKS cluster's name, signed into every token.
	ClusterName string
	// Endpoint is the EKS API server URL.
	Endpoint string
	// CACertificate is the PEM CA bundle of the API server, base64-encoded for
	// EKS; a direct target also takes plain PEM.
	CACertificate string
	// Region is the EKS cluster's AWS region.
	Region string

	// Host is the API server URL of a cluster made elsewhere.
	Host string
	// Token is a bearer token for Host.
	Token string
	// Kubeconfig is the path of a kubeconfig file; "~/" is the home directory.
	Kubeconfig string
	// Context names the kubeconfig context to use.
	Context string
}

func (t Target) isEKS() bool {
	return t.ClusterName != "" || t.Endpoint != "" || t.Region != ""
}

func (t Target) isDirect() bool {
	return t.Host != "" || t.Token != "" || t.Kubeconfig != "" || t.Context != ""
}

var regionPattern = regexp.MustCompile(`^[a-z]{2}(-[a-z]+)+-[0-9]+$`)

// Validate checks the target without touching the network, naming the
// Terraform attribute at fault and the fix.
func (t Target) Validate() error {
	switch {
	case t.isEKS() && t.isDirect():
		return errors.New("cluster and kubernetes are both set: give cluster = llmd_inference_cluster.<name>.kubernetes for a cluster made in this configuration, or a kubernetes block for one made elsewhere, not both")
	case t.isEKS():
		return t.validateEKS()
	case t.isDirect():
		return t.validateDirect()
	}
	return errors.New("cluster is not set: give cluster = llmd_inference_cluster.<name>.kubernetes, or a kubernetes block (host, cluster_ca_certificate and token, or config_path and config_context)")
}

func (t Target) validateEKS() error {
	if t.ClusterName == "" {
		return errors.New("cluster.name is empty: set it to the EKS cluster's name (llmd_inference_cluster.<name>.kubernetes carries it); tokens are signed for that name")
	}
	if err := checkServerURL("cluster.endpoint", t.Endpoint); err != nil {
		return err
	}
	if t.CACertificate == "" {
		return errors.New("cluster.cluster_ca_certificate is empty: set it to the cluster's certificateAuthority.data (llmd_inference_cluster.<name>.kubernetes carries it)")
	}
	if _, err := decodeCA("cluster.cluster_ca_certificate", t.CACertificate, false); err != nil {
		return err
	}
	if t.Region == "" {
		return errors.New("cluster.region is empty: set it to the EKS cluster's region, e.g. us-west-2 (llmd_inference_cluster.<name>.kubernetes carries it)")
	}
	if !regionPattern.MatchString(t.Region) {
		return fmt.Errorf("cluster.region %q is not an AWS region name: give e.g. us-west-2", t.Region)
	}
	return nil
}

func (t Target) validateDirect() error {
	if t.Kubeconfig != "" || t.Context != "" {
		switch {
		case t.Host != "":
			return errors.New("kubernetes.host conflicts with kubernetes.config_path: give either host, cluster_ca_certificate and token, or config_path and config_context")
		case t.Token != "":
			return errors.New("kubernetes.token conflicts with kubernetes.config_path: the kubeconfig's user supplies the credentials; remove token or config_path")
		case t.CACertificate != "":
			return errors.New("kubernetes.cluster_ca_certificate conflicts with kubernetes.config_path: the kubeconfig's cluster supplies the CA; remove one of them")
		case t.Kubeconfig == "":
			return errors.New("kubernetes.config_path is empty: config_context names a context in a kubeconfig file, so give the file's path too (nothing is read from ~/.kube or $KUBECONFIG)")
		}
		return nil
	}
	if err := checkServerURL("kubernetes.host", t.Host); err != nil {
		return err
	}
	if t.Token == "" {
		return errors.New("kubernetes.token is empty: give a bearer token for kubernetes.host, or use config_path and config_context instead")
	}
	if t.CACertificate != "" {
		if _, err := decodeCA("kubernetes.cluster_ca_certificate", t.CACertificate, true); err != nil {
			return err
		}
	}
	return nil
}

// checkServerURL refuses what would make client-go guess: an empty URL (it
// would dial localhost) or plain http (the token would travel in clear).
func checkServerURL(attr, raw string) error {
	if raw == "" {
		return fmt.Errorf("%s is empty: give the API server's https URL (nothing falls back to localhost, ~/.kube or the in-cluster service account)", attr)
	}
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("%s %q is not an https URL: give the API server's address, e.g. https://ABCDEF.gr7.us-west-2.eks.amazonaws.com", attr, raw)
	}
	return nil
}

// decodeCA returns PEM from base64-encoded PEM (as EKS returns it) or, when
// plainOK, from PEM itself, checking that it holds a certificate.
func decodeCA(attr, value string, plainOK bool) ([]byte, error) {
	data := []byte(value)
	if !plainOK || !strings.Contains(value, "-----BEGIN") {
		var err error
		data, err = base64.StdEncoding.DecodeString(strings.TrimSpace(value))
		if err != nil {
			return nil, fmt.Errorf("%s is not base64-encoded PEM (%v): give the cluster's certificateAuthority.data as EKS returns it", attr, err)
		}
	}
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s holds no PEM certificate: give the CA bundle that signed the API server's certificate", attr)
	}
	return data, nil
}

// RESTConfig builds the client configuration for a target. For an EKS target
// the bearer token comes from a TokenSource over creds (the provider's own
// AWS configuration, assume_role included) and is set on each request by the
// transport, so it is re-minted before it expires and never sits in the
// returned configuration; one token is minted here so that bad credentials
// fail now, with the cluster named.
func RESTConfig(ctx context.Context, t Target, creds aws.Config) (*rest.Config, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	switch {
	case t.isEKS():
		ca, _ := decodeCA("cluster.cluster_ca_certificate", t.CACertificate, false)
		source := NewTokenSource(creds, t.ClusterName, t.Region, nil)
		if _, _, err := source.Token(ctx); err != nil {
			return nil, err
		}
		return &rest.Config{
			Host:            t.Endpoint,
			TLSClientConfig: rest.TLSClientConfig{CAData: ca},
			WrapTransport:   func(rt http.RoundTripper) http.RoundTripper { return &bearerRoundTripper{source: source, next: rt} },
		}, nil
	case t.Kubeconfig != "":
		return kubeconfigRESTConfig(t.Kubeconfig, t.Context)
	}
	cfg := &rest.Config{Host: t.Host, BearerToken: t.Token}
	if t.CACertificate != "" {
		cfg.CAData, _ = decodeCA("kubernetes.cluster_ca_certificate", t.CACertificate, true)
	}
	return cfg, nil
}

// kubeconfigRESTConfig reads exactly one kubeconfig file: no $KUBECONFIG, no
// ~/.kube/config, no in-cluster fallback, no defaults for a missing server.
func kubeconfigRESTConfig(path, contextName string) (*rest.Config, error) {
	if tail, ok := strings.CutPrefix(path, "~/"); ok {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("kubernetes.config_path %q: finding the home directory: %w", path, err)
		}
		path = filepath.Join(home, tail)
	}
	raw, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("kubernetes.config_path: reading kubeconfig %s: %w", path, err)
	}
	if err := clientcmd.ResolveLocalPaths(raw); err != nil {
		return nil, fmt.Errorf("kubernetes.config_path: resolving the file paths in kubeconfig %s: %w", path, err)
	}
	contexts := make([]string, 0, len(raw.Contexts))
	for name := range raw.Contexts {
		contexts = append(contexts, name)
	}
	slices.Sort(contexts)
	if contextName == "" {
		contextName = raw.CurrentContext
		if contextName == "" {
			return nil, fmt.Errorf("kubernetes.config_context is empty and kubeconfig %s has no current-context: set config_context to one of %q", path, contexts)
		}
	}
	kctx, ok := raw.Contexts[contextName]
	if !ok {
		return nil, fmt.Errorf("kubernetes.config_context: context %q is not in kubeconfig %s; it has %q", contextName, path, contexts)
	}
	cluster, ok := raw.Clusters[kctx.Cluster]
	switch {
	case !ok:
		return nil, fmt.Errorf("kubernetes.config_path: context %q of kubeconfig %s names cluster %q, which the file does not define", contextName, path, kctx.Cluster)
	case cluster.InsecureSkipTLSVerify:
		// The credentials would go to whoever answers at that address.
		return nil, fmt.Errorf("kubernetes.config_path: cluster %q of kubeconfig %s sets insecure-skip-tls-verify; give its certificate-authority-data instead", kctx.Cluster, path)
	}
	if err := checkServerURL(fmt.Sprintf("kubernetes.config_path: the server of cluster %q in %s", kctx.Cluster, path), cluster.Server); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, contextName, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubernetes.config_path: context %q of kubeconfig %s: %w", contextName, path, err)
	}
	return cfg, nil
}

// bearerRoundTripper sets the Authorization header of each request from the
// token source, on a copy of the request, so the token is never in the
// rest.Config and client-go's debug logging (which wraps outside
// WrapTransport) never sees it.
type bearerRoundTripper struct {
	source *TokenSource
	next   http.RoundTripper
}

func (b *bearerRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	token, _, err := b.source.Token(req.Context())
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	out := req.Clone(req.Context())
	out.Header.Set("Authorization", "Bearer "+token)
	return b.next.RoundTrip(out)
}

// WrappedRoundTripper lets client-go reach the transport underneath (to cancel
// requests, for instance).
func (b *bearerRoundTripper) WrappedRoundTripper() http.RoundTripper { return b.next }
