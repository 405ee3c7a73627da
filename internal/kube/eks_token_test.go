package kube

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// countingCreds hands out fixed credentials and counts how often a token was signed.
type countingCreds struct {
	creds aws.Credentials
	calls int
}

func (c *countingCreds) Retrieve(context.Context) (aws.Credentials, error) {
	c.calls++
	return c.creds, nil
}

var sessionCreds = aws.Credentials{AccessKeyID: "ASIAEXAMPLE", SecretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", SessionToken: "FwoGZXIvYXdzE+/session=token"}

func decodeToken(t *testing.T, tok string) *url.URL {
	t.Helper()
	enc, ok := strings.CutPrefix(tok, "k8s-aws-v1.")
	if !ok {
		t.Fatalf("token lacks the k8s-aws-v1. prefix: %.20s...", tok)
	}
	if strings.ContainsAny(enc, "=+/") {
		t.Fatal("token payload is not unpadded base64url")
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		t.Fatalf("decoding token: %v", err)
	}
	u, err := url.Parse(string(raw))
	if err != nil {
		t.Fatalf("parsing presigned URL: %v", err)
	}
	return u
}

func TestTokenSourceRemintsBeforeExpiryAndNotBefore(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)}
	creds := &countingCreds{creds: sessionCreds}
	src := NewTokenSource(aws.Config{Credentials: creds}, "prod", "us-west-2", clock.now)
	if creds.calls != 0 {
		t.Fatalf("NewTokenSource signed %d tokens; it must mint on first use only", creds.calls)
	}
	ctx := context.Background()
	first, exp, err := src.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := clock.t.Add(15 * time.Minute); !exp.Equal(want) {
		t.Errorf("expiry = %s, want X-Amz-Date + 15 min = %s", exp, want)
	}
	if d := decodeToken(t, first).Query().Get("X-Amz-Date"); d != "20260314T150926Z" {
		t.Errorf("X-Amz-Date = %s, want the clock's time 20260314T150926Z", d)
	}

	clock.advance(10*time.Minute - time.Second)
	again, exp2, err := src.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again != first || !exp2.Equal(exp) || creds.calls != 1 {
		t.Fatalf("at 9m59s the token was re-minted (%d signings); it has 5 minutes left and must be reused", creds.calls)
	}

	clock.advance(time.Second)
	renewed, exp3, err := src.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if renewed == first || creds.calls != 2 {
		t.Fatalf("at 10m the token was not re-minted (%d signings)", creds.calls)
	}
	if !exp3.Equal(clock.t.Add(15*time.Minute)) || !exp3.After(exp) {
		t.Errorf("renewed expiry = %s, want %s", exp3, clock.t.Add(15*time.Minute))
	}
	if d := decodeToken(t, renewed).Query().Get("X-Amz-Date"); d != "20260314T151926Z" {
		t.Errorf("renewed X-Amz-Date = %s, want 20260314T151926Z", d)
	}

	// A clock stepped back leaves a token dated in the future: mint afresh.
	clock.advance(-time.Hour)
	if _, _, err := src.Token(ctx); err != nil || creds.calls != 3 {
		t.Fatalf("after the clock stepped back: %d signings, err %v; want a new token", creds.calls, err)
	}
}

// TestTokenSourceMintsOnceForConcurrentRequests: requests racing on a fresh
// client share one token rather than each signing (and each assuming a role).
func TestTokenSourceMintsOnceForConcurrentRequests(t *testing.T) {
	creds := &countingCreds{creds: sessionCreds}
	src := NewTokenSource(aws.Config{Credentials: creds}, "prod", "us-west-2", nil)
	var wg sync.WaitGroup
	tokens := make([]string, 16)
	for i := range tokens {
		wg.Go(func() {
			tok, _, err := src.Token(context.Background())
			if err != nil {
				t.Error(err)
			}
			tokens[i] = tok
		})
	}
	wg.Wait()
	if creds.calls != 1 {
		t.Errorf("%d signings for 16 concurrent requests, want 1", creds.calls)
	}
	for _, tok := range tokens {
		if tok != tokens[0] {
			t.Fatal("concurrent requests got different tokens")
		}
	}
}

func TestTokenSourceHonoursExpiringCredentials(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)}
	c := sessionCreds
	c.CanExpire, c.Expires = true, clock.t.Add(3*time.Minute)
	creds := &countingCreds{creds: c}
	src := NewTokenSource(aws.Config{Credentials: creds}, "prod", "us-west-2", clock.now)
	_, exp, err := src.Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !exp.Equal(c.Expires) {
		t.Errorf("expiry = %s; a URL signed by session credentials dies with them at %s", exp, c.Expires)
	}
	clock.advance(3 * time.Minute)
	if _, _, err := src.Token(context.Background()); err != nil || creds.calls != 2 {
		t.Errorf("once the credentials expired: %d signings, err %v; want a new token", creds.calls, err)
	}
}

func TestTokenFormatIsWhatEKSVerifies(t *testing.T) {
	for _, tc := range []struct{ region, host string }{
		{"us-west-2", "sts.us-west-2.amazonaws.com"},
		{"eu-central-1", "sts.eu-central-1.amazonaws.com"},
		{"cn-north-1", "sts.cn-north-1.amazonaws.com.cn"},
	} {
		t.Run(tc.region, func(t *testing.T) {
			// Whatever endpoint the provider's own STS calls go to, the token names the regional STS host.
			cfg := aws.Config{Credentials: &countingCreds{creds: sessionCreds}, BaseEndpoint: aws.String("http://127.0.0.1:4566")}
			tok, _, err := NewTokenSource(cfg, "prod", tc.region, nil).Token(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(tok) > 4096 {
				t.Errorf("token is %d bytes; EKS refuses more than 4096", len(tok))
			}
			u := decodeToken(t, tok)
			if u.Scheme != "https" || u.Host != tc.host || u.Path != "/" {
				t.Errorf("presigned URL is %s://%s%s, want https://%s/", u.Scheme, u.Host, u.Path, tc.host)
			}
			q := u.Query()
			allowed := map[string]bool{"action": true, "version": true, "x-amz-algorithm": true, "x-amz-credential": true, "x-amz-date": true,
				"x-amz-expires": true, "x-amz-security-token": true, "x-amz-signature": true, "x-amz-signedheaders": true}
			for k, v := range q {
				if !allowed[strings.ToLower(k)] || len(v) != 1 {
					t.Errorf("query parameter %s=%v: EKS accepts only its whitelist, each once", k, v)
				}
			}
			want := map[string]string{
				"Action": "GetCallerIdentity", "Version": "2011-06-15", "X-Amz-Expires": "60",
				"X-Amz-Algorithm": "AWS4-HMAC-SHA256", "X-Amz-SignedHeaders": "host;x-k8s-aws-id",
				"X-Amz-Security-Token": sessionCreds.SessionToken,
			}
			for k, v := range want {
				if got := q.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if !regexp.MustCompile(`^ASIAEXAMPLE/\d{8}/` + tc.region + `/sts/aws4_request$`).MatchString(q.Get("X-Amz-Credential")) {
				t.Errorf("X-Amz-Credential = %q, want ASIAEXAMPLE/DATE/%s/sts/aws4_request", q.Get("X-Amz-Credential"), tc.region)
			}
		})
	}
}

// TestTokenSignsTheClusterName recomputes the SigV4 signature independently of
// the SDK: it matches only with x-k8s-aws-id set to the cluster's name, which
// is what STS checks when EKS replays the URL (moto checks no signature, so
// the test ground cannot).
func TestTokenSignsTheClusterName(t *testing.T) {
	tok, _, err := NewTokenSource(aws.Config{Credentials: &countingCreds{creds: sessionCreds}}, "prod-inference", "us-west-2", nil).Token(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	u := decodeToken(t, tok)
	got := u.Query().Get("X-Amz-Signature")
	if sig := sigV4Presigned(u, "prod-inference", sessionCreds.SecretAccessKey); sig != got {
		t.Fatalf("signature %s does not verify with x-k8s-aws-id: prod-inference (recomputed %s)", got, sig)
	}
	if sig := sigV4Presigned(u, "other-cluster", sessionCreds.SecretAccessKey); sig == got {
		t.Fatal("the signature also verifies for another cluster's name")
	}
}

// sigV4Presigned computes the signature of a presigned GET with an empty body
// and the signed headers host and x-k8s-aws-id, following the published SigV4
// algorithm.
func sigV4Presigned(u *url.URL, clusterID, secret string) string {
	q := u.Query()
	var keys []string
	for k := range q {
		if k != "X-Amz-Signature" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	enc := func(s string) string { return strings.ReplaceAll(url.QueryEscape(s), "+", "%20") }
	var pairs []string
	for _, k := range keys {
		pairs = append(pairs, enc(k)+"="+enc(q.Get(k)))
	}
	empty := sha256.Sum256(nil)
	canonical := strings.Join([]string{"GET", "/", strings.Join(pairs, "&"),
		"host:" + u.Host, "x-k8s-aws-id:" + clusterID, "", "host;x-k8s-aws-id", hex.EncodeToString(empty[:])}, "\n")
	cred := strings.SplitN(q.Get("X-Amz-Credential"), "/", 2) // AKID, date/region/service/aws4_request
	scope := strings.Split(cred[1], "/")
	sum := sha256.Sum256([]byte(canonical))
	toSign := strings.Join([]string{"AWS4-HMAC-SHA256", q.Get("X-Amz-Date"), cred[1], hex.EncodeToString(sum[:])}, "\n")
	mac := func(key []byte, data string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(data))
		return h.Sum(nil)
	}
	key := []byte("AWS4" + secret)
	for _, part := range scope {
		key = mac(key, part)
	}
	return hex.EncodeToString(mac(key, toSign))
}

func TestTokenErrorNamesClusterNotToken(t *testing.T) {
	failing := aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
		return aws.Credentials{}, errors.New("AssumeRole: AccessDenied")
	})
	_, _, err := NewTokenSource(aws.Config{Credentials: failing}, "prod", "us-west-2", nil).Token(context.Background())
	if err == nil || !strings.Contains(err.Error(), `cluster "prod"`) || !strings.Contains(err.Error(), "AccessDenied") {
		t.Fatalf("error = %v, want it to name the cluster and the cause", err)
	}
	_, _, err = NewTokenSource(aws.Config{}, "prod", "us-west-2", nil).Token(context.Background())
	if err == nil || !strings.Contains(err.Error(), "no AWS credentials") {
		t.Fatalf("without credentials: error = %v", err)
	}
}
