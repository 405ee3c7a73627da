package kube

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/pem"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// testCA is a syntactically valid certificate for Validate; no TLS uses it.
var testCA = func() string {
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
}()

var testCAB64 = base64.StdEncoding.EncodeToString([]byte(testCA))

func eksTarget() Target {
	return Target{ClusterName: "prod", Endpoint: "https://ABC.gr7.us-west-2.eks.amazonaws.com", CACertificate: testCAB64, Region: "us-west-2"}
}

func TestValidateNamesTheAttribute(t *testing.T) {
	with := func(f func(*Target)) Target { tg := eksTarget(); f(&tg); return tg }
	for _, tc := range []struct {
		name   string
		target Target
		want   string
	}{
		{"nothing", Target{}, "cluster is not set"},
		{"both forms", with(func(t *Target) { t.Host = "https://x" }), "cluster and kubernetes are both set"},
		{"eks name", with(func(t *Target) { t.ClusterName = "" }), "cluster.name is empty"},
		{"eks endpoint empty", with(func(t *Target) { t.Endpoint = "" }), "cluster.endpoint is empty"},
		{"eks endpoint http", with(func(t *Target) { t.Endpoint = "http://ABC.eks.amazonaws.com" }), "cluster.endpoint \"http://ABC.eks.amazonaws.com\" is not an https URL"},
		{"eks endpoint bare", with(func(t *Target) { t.Endpoint = "ABC.eks.amazonaws.com" }), "cluster.endpoint \"ABC.eks.amazonaws.com\" is not an https URL"},
		{"eks ca empty", with(func(t *Target) { t.CACertificate = "" }), "cluster.cluster_ca_certificate is empty"},
		{"eks ca plain PEM", with(func(t *Target) { t.CACertificate = testCA }), "cluster.cluster_ca_certificate is not base64-encoded PEM"},
		{"eks ca not a cert", with(func(t *Target) { t.CACertificate = base64.StdEncoding.EncodeToString([]byte("hello")) }), "cluster.cluster_ca_certificate holds no PEM certificate"},
		{"eks region empty", with(func(t *Target) { t.Region = "" }), "cluster.region is empty"},
		{"eks region bad", with(func(t *Target) { t.Region = "Oregon" }), "cluster.region \"Oregon\" is not an AWS region name"},
		{"direct host empty", Target{Token: "t"}, "kubernetes.host is empty"},
		{"direct host http", Target{Host: "http://10.0.0.1", Token: "t"}, "kubernetes.host \"http://10.0.0.1\" is not an https URL"},
		{"direct token", Target{Host: "https://10.0.0.1"}, "kubernetes.token is empty"},
		{"direct ca", Target{Host: "https://10.0.0.1", Token: "t", CACertificate: "garbage"}, "kubernetes.cluster_ca_certificate is not base64-encoded PEM"},
		{"kubeconfig and host", Target{Kubeconfig: "/k", Host: "https://x"}, "kubernetes.host conflicts with kubernetes.config_path"},
		{"kubeconfig and token", Target{Kubeconfig: "/k", Token: "t"}, "kubernetes.token conflicts with kubernetes.config_path"},
		{"kubeconfig and ca", Target{Kubeconfig: "/k", CACertificate: testCA}, "kubernetes.cluster_ca_certificate conflicts with kubernetes.config_path"},
		{"context alone", Target{Context: "prod"}, "kubernetes.config_path is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.target.Validate()
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v, want an error starting %q", err, tc.want)
			}
		})
	}
	for _, ok := range []Target{
		eksTarget(),
		{Host: "https://10.0.0.1:6443", Token: "t", CACertificate: testCA},
		{Host: "https://10.0.0.1:6443", Token: "t", CACertificate: testCAB64},
		{Host: "https://api.example.com", Token: "t"},
		{Kubeconfig: "/k"},
		{Kubeconfig: "/k", Context: "prod"},
	} {
		if err := ok.Validate(); err != nil {
			t.Errorf("Validate(%+v) = %v, want nil", ok, err)
		}
	}
}

const twoContexts = `apiVersion: v1
kind: Config
clusters:
- name: a
  cluster: {server: "https://a.example:6443", certificate-authority: ca.crt}
- name: b
  cluster: {server: "https://b.example"}
- name: noserver
  cluster: {}
- name: insecure
  cluster: {server: "https://c.example", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: from-file}
contexts:
- {name: ctx-a, context: {cluster: a, user: u}}
- {name: ctx-b, context: {cluster: b, user: u}}
- {name: ctx-noserver, context: {cluster: noserver, user: u}}
- {name: ctx-insecure, context: {cluster: insecure, user: u}}
current-context: ctx-a
`

func writeFile(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestKubeconfigPathAndContext(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, filepath.Join(dir, "config"), twoContexts)
	writeFile(t, filepath.Join(dir, "ca.crt"), testCA)
	ctx := context.Background()

	cfg, err := RESTConfig(ctx, Target{Kubeconfig: path}, aws.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://a.example:6443" || cfg.BearerToken != "from-file" || cfg.CAFile != filepath.Join(dir, "ca.crt") {
		t.Errorf("current context: host %q, CA file %q (relative paths resolve against the kubeconfig's directory)", cfg.Host, cfg.CAFile)
	}
	if cfg, err = RESTConfig(ctx, Target{Kubeconfig: path, Context: "ctx-b"}, aws.Config{}); err != nil || cfg.Host != "https://b.example" {
		t.Errorf("context ctx-b: %v, %v", cfg, err)
	}

	for _, tc := range []struct {
		target Target
		want   []string
	}{
		{Target{Kubeconfig: path, Context: "missing"}, []string{`kubernetes.config_context: context "missing" is not in kubeconfig ` + path, `["ctx-a" "ctx-b" "ctx-insecure" "ctx-noserver"]`}},
		{Target{Kubeconfig: path, Context: "ctx-noserver"}, []string{`kubernetes.config_path: the server of cluster "noserver"`, "is empty"}},
		{Target{Kubeconfig: path, Context: "ctx-insecure"}, []string{`cluster "insecure"`, "insecure-skip-tls-verify"}},
		{Target{Kubeconfig: filepath.Join(dir, "absent")}, []string{"kubernetes.config_path: reading kubeconfig " + filepath.Join(dir, "absent")}},
		{Target{Kubeconfig: writeFile(t, filepath.Join(dir, "nocurrent"), strings.Replace(twoContexts, "current-context: ctx-a", "", 1))},
			[]string{"kubernetes.config_context is empty", "has no current-context", `"ctx-b"`}},
	} {
		_, err := RESTConfig(ctx, tc.target, aws.Config{})
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("RESTConfig(%+v) = %v, want it to mention %s", tc.target, err, w)
			}
		}
	}
}

// TestNoFallback sets up everything client-go's default loading would pick
// up: a ~/.kube/config, $KUBECONFIG and the in-cluster environment. None of it
// may be used.
func TestNoFallback(t *testing.T) {
	home := t.TempDir()
	homeConfig := writeFile(t, filepath.Join(home, ".kube", "config"), strings.ReplaceAll(twoContexts, "a.example", "home.example"))
	writeFile(t, filepath.Join(home, ".kube", "ca.crt"), testCA)
	t.Setenv("HOME", home)
	t.Setenv("KUBECONFIG", homeConfig)
	t.Setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "443")
	t.Setenv("KUBERNETES_MASTER", "http://localhost:8080")
	ctx := context.Background()

	for _, tg := range []Target{{}, {Context: "ctx-a"}} {
		if cfg, err := RESTConfig(ctx, tg, aws.Config{}); err == nil {
			t.Errorf("RESTConfig(%+v) fell back to %s", tg, cfg.Host)
		}
	}
	otherDir := t.TempDir()
	other := writeFile(t, filepath.Join(otherDir, "kubeconfig"), twoContexts)
	writeFile(t, filepath.Join(otherDir, "ca.crt"), testCA)
	if cfg, err := RESTConfig(ctx, Target{Kubeconfig: other}, aws.Config{}); err != nil || cfg.Host != "https://a.example:6443" {
		t.Errorf("explicit kubeconfig: %v, %v; want the file's own server, not ~/.kube or $KUBECONFIG", cfg, err)
	}
	// "~/" is an explicit path the user wrote; it is expanded, not a default.
	if cfg, err := RESTConfig(ctx, Target{Kubeconfig: "~/.kube/config"}, aws.Config{}); err != nil || cfg.Host != "https://home.example:6443" {
		t.Errorf("config_path ~/.kube/config: %v, %v", cfg, err)
	}
	direct, err := RESTConfig(ctx, Target{Host: "https://10.1.2.3:6443", Token: "t"}, aws.Config{})
	if err != nil || direct.Host != "https://10.1.2.3:6443" {
		t.Errorf("direct target: %v, %v", direct, err)
	}
	eks, err := RESTConfig(ctx, eksTarget(), aws.Config{Credentials: &countingCreds{creds: sessionCreds}})
	if err != nil || eks.Host != eksTarget().Endpoint {
		t.Errorf("EKS target: %v, %v", eks, err)
	}
}

func TestRESTConfigFailsEarlyOnBadCredentials(t *testing.T) {
	_, err := RESTConfig(context.Background(), eksTarget(), aws.Config{})
	if err == nil || !strings.Contains(err.Error(), `minting an EKS token for cluster "prod"`) {
		t.Fatalf("RESTConfig without credentials = %v, want a minting error naming the cluster", err)
	}
}

// klogBuffer turns client-go's debug logging to its most verbose level (9:
// headers and curl commands) into a buffer for the rest of the test.
func klogBuffer(t *testing.T) *syncBuffer {
	t.Helper()
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	buf := &syncBuffer{}
	for k, v := range map[string]string{"v": "9", "logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL"} {
		if err := fs.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	klog.SetOutput(buf)
	t.Cleanup(func() {
		klog.Flush()
		_ = fs.Set("v", "0")
		_ = fs.Set("logtostderr", "true")
		klog.SetOutput(os.Stderr)
	})
	return buf
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestTokenSetPerRequestAndNeverLogged runs client-go against a TLS server (an
// in-process fake apiserver answering /version: the point is the client side)
// with debug logging at its most verbose, for an EKS target and a direct one.
func TestTokenSetPerRequestAndNeverLogged(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"major":"1","minor":"32","gitVersion":"v1.32.13"}`)
	}))
	defer srv.Close()
	ca := base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	logs := klogBuffer(t)
	ctx := context.Background()

	eks := Target{ClusterName: "prod", Endpoint: srv.URL, CACertificate: ca, Region: "us-west-2"}
	direct := Target{Host: srv.URL, CACertificate: ca, Token: "static-secret-token-value"}
	for _, tg := range []Target{eks, direct} {
		cfg, err := RESTConfig(ctx, tg, aws.Config{Credentials: &countingCreds{creds: sessionCreds}})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(fmt.Sprintf("%v %+v %#v", cfg, cfg, cfg), "static-secret") {
			t.Error("the rest.Config prints the token")
		}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := client.Discovery().ServerVersion(); err != nil {
				t.Fatalf("GET /version: %v", err)
			}
		}
	}
	klog.Flush()
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 4 {
		t.Fatalf("server saw %d requests, want 4", len(seen))
	}
	eksToken, ok := strings.CutPrefix(seen[0], "Bearer ")
	if !ok || decodeToken(t, eksToken).Host != "sts.us-west-2.amazonaws.com" || seen[1] != seen[0] {
		t.Errorf("EKS requests carried %.30q and %.30q; want the same minted token on both", seen[0], seen[1])
	}
	if seen[2] != "Bearer static-secret-token-value" {
		t.Errorf("direct request carried %.30q", seen[2])
	}
	out := logs.String()
	if !strings.Contains(out, `url="`+srv.URL+`/version"`) || !strings.Contains(out, "Authorization: Bearer <masked>") {
		t.Fatalf("client-go logged no request at -v=9, so this test proves nothing; log:\n%s", out)
	}
	for _, secret := range []string{eksToken, eksToken[:40], "static-secret-token-value", sessionCreds.SessionToken, sessionCreds.SecretAccessKey} {
		if strings.Contains(out, secret) {
			t.Errorf("client-go's debug log contains a secret (%.15s...)", secret)
		}
	}
}
