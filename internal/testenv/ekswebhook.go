// The EKS authenticator of the local control plane: a token webhook that
// verifies bearer tokens with aws-iam-authenticator's own verifier (the code
// EKS runs) and maps the caller to groups as EKS access entries do.

package testenv

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	authnv1 "k8s.io/api/authentication/v1"
	"sigs.k8s.io/aws-iam-authenticator/pkg/arn"
	"sigs.k8s.io/aws-iam-authenticator/pkg/token"
)

// verifierClusterName is the cluster name the control plane's token verifier
// is bound to. moto checks no SigV4 signature, so a token signed for any EKS
// cluster name verifies (one control plane stands in for every cluster a test
// points at it); the signed x-k8s-aws-id is asserted on the client side
// instead (internal/kube's TestTokenSignsTheClusterName).
const verifierClusterName = "llmd-testenv"

// eksAuthn is the token webhook of one control plane.
type eksAuthn struct {
	verifier token.Verifier
	log      *log.Logger

	mu         sync.Mutex
	principals map[string][]string // principal ARN without path -> groups
}

// startEKSWebhook serves TokenReviews over HTTPS with the control plane's
// serving certificate and writes the kubeconfig kube-apiserver reads it from.
func startEKSWebhook(dir string, keys *pki) (kubeconfig string, a *eksAuthn, err error) {
	installSTSAnswerer()
	logs, err := runLogDir()
	if err != nil {
		return "", nil, err
	}
	logFile, err := os.Create(filepath.Join(logs, "eks-token-webhook.log"))
	if err != nil {
		return "", nil, err
	}
	a = &eksAuthn{
		verifier:   token.NewVerifier(verifierClusterName, "aws", Region),
		log:        log.New(logFile, "", log.LstdFlags|log.Lmicroseconds),
		principals: map[string][]string{},
	}
	cert, err := tls.LoadX509KeyPair(keys.ServingCert, keys.ServingKey)
	if err != nil {
		return "", nil, fmt.Errorf("loading the webhook's serving certificate: %w", err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(a.serve))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	onStop(func(bool) { srv.Close(); logFile.Close() })
	kubeconfig = filepath.Join(dir, "eks-token-webhook.kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: eks-token-webhook
  cluster:
    server: %s/tokenreview
    certificate-authority-data: %s
users:
- name: kube-apiserver
  user: {}
contexts:
- name: webhook
  context: {cluster: eks-token-webhook, user: kube-apiserver}
current-context: webhook
`, srv.URL, base64Std(keys.CAData))
	return kubeconfig, a, os.WriteFile(kubeconfig, []byte(cfg), 0o600)
}

// MapIAMPrincipal lets an IAM role or user in with the given Kubernetes
// groups until the test ends, as an EKS access entry does (system:masters for
// a cluster admin). principalARN is the IAM ARN, path included, as access
// entries take it; the assumed-role session ARN is refused, as EKS refuses it.
// Tokens from principals without a mapping get 401 Unauthorized, as on EKS;
// so do tokens signed with moto's default static identity (user/moto under
// sts, which EKS's verifier cannot place): act through an assumed role.
func (c *Cluster) MapIAMPrincipal(t testing.TB, principalARN string, groups ...string) {
	t.Helper()
	kind, _, err := arn.Canonicalize(principalARN)
	if err != nil || (kind != arn.ROLE && kind != arn.USER) {
		t.Fatalf("testenv: MapIAMPrincipal(%q): give an IAM role or user ARN (arn:aws:iam::ACCOUNT:role/PATH/NAME), not a session ARN", principalARN)
	}
	key := withoutPath(principalARN)
	c.eks.mu.Lock()
	c.eks.principals[key] = append([]string(nil), groups...)
	c.eks.mu.Unlock()
	t.Cleanup(func() {
		c.eks.mu.Lock()
		delete(c.eks.principals, key)
		c.eks.mu.Unlock()
	})
}

// withoutPath drops the path of an IAM role or user ARN: the verifier's
// canonical ARN of an assumed role has none, and a role's name is unique
// in its account whatever its path.
func withoutPath(principalARN string) string {
	head, resource, ok := strings.Cut(principalARN, ":role/")
	kind := "role/"
	if !ok {
		head, resource, ok = strings.Cut(principalARN, ":user/")
		kind = "user/"
	}
	if !ok {
		return principalARN
	}
	return head + ":" + kind + resource[strings.LastIndex(resource, "/")+1:]
}

func (a *eksAuthn) serve(w http.ResponseWriter, r *http.Request) {
	var review authnv1.TokenReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
		http.Error(w, "decoding TokenReview: "+err.Error(), http.StatusBadRequest)
		return
	}
	review.Status = a.review(review.Spec.Token)
	review.Spec = authnv1.TokenReviewSpec{}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review)
}

func (a *eksAuthn) review(tok string) authnv1.TokenReviewStatus {
	id, err := a.verifier.Verify(tok)
	if err != nil {
		// Verify quotes the decoded URL when it fails to parse it: keep that out of logs.
		msg := longQuoted.ReplaceAllString(err.Error(), `"<redacted>"`)
		a.log.Printf("refused: %s", msg)
		return authnv1.TokenReviewStatus{Error: msg}
	}
	a.mu.Lock()
	groups, ok := a.principals[withoutPath(id.CanonicalARN)]
	a.mu.Unlock()
	if !ok {
		a.log.Printf("refused %s: no access entry for %s", id.ARN, id.CanonicalARN)
		return authnv1.TokenReviewStatus{Error: "no access entry for " + id.CanonicalARN}
	}
	a.log.Printf("accepted %s as %v", id.ARN, groups)
	extra := map[string]authnv1.ExtraValue{
		"arn": {id.ARN}, "canonicalArn": {id.CanonicalARN}, "sessionName": {id.SessionName},
		"accessKeyId": {id.AccessKeyID}, "principalId": {id.UserID},
	}
	return authnv1.TokenReviewStatus{
		Authenticated: true,
		// EKS names an access entry's user after the caller: the session ARN for a role.
		User: authnv1.UserInfo{Username: id.ARN, UID: "aws-iam-authenticator:" + id.AccountID + ":" + id.UserID, Groups: groups, Extra: extra},
	}
}

var longQuoted = regexp.MustCompile(`"[^"]{64,}"`)

var stsHostPattern = regexp.MustCompile(`^sts(\.[a-z0-9-]+)?\.amazonaws\.com(\.cn)?$`)

var installSTSAnswererOnce sync.Once

// installSTSAnswerer makes the test binary's http.DefaultTransport (which the
// verifier's GET uses) answer presigned GetCallerIdentity URLs for STS hosts
// from moto, and pass every other request through unchanged. moto itself
// cannot take the GET: it routes a bare GET to S3 and answers STS in XML only.
func installSTSAnswerer() {
	installSTSAnswererOnce.Do(func() {
		http.DefaultTransport = &stsAnswerer{next: http.DefaultTransport}
	})
}

type stsAnswerer struct{ next http.RoundTripper }

func (a *stsAnswerer) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet || !stsHostPattern.MatchString(r.URL.Hostname()) {
		return a.next.RoundTrip(r)
	}
	rec := httptest.NewRecorder()
	a.answer(r.Context(), rec, r)
	resp := rec.Result()
	resp.Request = r
	return resp, nil
}

// answer calls moto's GetCallerIdentity with the presigned URL's access key
// and session token (moto identifies the caller by the key and checks no
// signature, so the secret is not needed) and answers in the JSON shape STS
// gives for Accept: application/json.
func (a *stsAnswerer) answer(ctx context.Context, w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	scope := strings.Split(q.Get("X-Amz-Credential"), "/") // AKID/DATE/REGION/sts/aws4_request
	if q.Get("Action") != "GetCallerIdentity" || len(scope) != 5 {
		writeSTSJSONError(w, http.StatusBadRequest, "InvalidAction", "stand-in answers only presigned GetCallerIdentity")
		return
	}
	moto, err := runningMoto()
	if err != nil {
		writeSTSJSONError(w, http.StatusServiceUnavailable, "ServiceUnavailable", "stand-in: moto_server unavailable: "+err.Error())
		return
	}
	client := sts.New(sts.Options{
		Region:       scope[2],
		BaseEndpoint: aws.String(moto.URL),
		Credentials:  credentials.NewStaticCredentialsProvider(scope[0], "unused-by-moto", q.Get("X-Amz-Security-Token")),
	})
	out, err := client.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
	if err != nil {
		writeSTSJSONError(w, http.StatusForbidden, "InvalidClientTokenId", err.Error())
		return
	}
	var resp struct {
		GetCallerIdentityResponse struct {
			GetCallerIdentityResult struct{ Account, Arn, UserId string }
			ResponseMetadata        struct{ RequestId string }
		}
	}
	res := &resp.GetCallerIdentityResponse
	res.GetCallerIdentityResult.Account = aws.ToString(out.Account)
	res.GetCallerIdentityResult.Arn = aws.ToString(out.Arn)
	res.GetCallerIdentityResult.UserId = aws.ToString(out.UserId)
	res.ResponseMetadata.RequestId = "stand-in"
	writeJSON(w, resp)
}

func writeSTSJSONError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"Error": map[string]string{"Code": code, "Message": msg, "Type": "Sender"}})
}

// runningMoto is the test binary's moto_server, started if no test has yet;
// unlike StartMoto it never resets it.
func runningMoto() (*Moto, error) {
	motoOnce.Do(func() { motoInst, motoErr = startMoto() })
	return motoInst, motoErr
}
