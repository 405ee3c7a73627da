// EKS bearer tokens: a presigned STS GetCallerIdentity URL that the cluster's
// authenticator replays to STS to learn who is calling (PROTOCOLS.md section 7).

package kube

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

const (
	eksTokenPrefix = "k8s-aws-v1."
	// clusterIDHeader is signed into the URL so that a token minted for one
	// cluster is refused by every other: STS checks the signature over the
	// value the cluster's authenticator sends, its own name.
	clusterIDHeader = "x-k8s-aws-id"
	// eksTokenValidity is how long EKS accepts a token after its X-Amz-Date,
	// whatever X-Amz-Expires says.
	eksTokenValidity = 15 * time.Minute
	// eksTokenRefreshAge leaves five minutes of the validity for clock skew
	// between this machine and AWS and for a request in flight.
	eksTokenRefreshAge = 10 * time.Minute
	// emptyPayloadSHA256 is the SigV4 payload hash of a GET without a body.
	emptyPayloadSHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
)

// TokenSource mints EKS bearer tokens for one cluster from AWS credentials and
// keeps the latest, minting again once it is ten minutes old (EKS accepts a
// token for fifteen) or its credentials expire. It is safe for concurrent use.
type TokenSource struct {
	creds   aws.CredentialsProvider
	cluster string
	region  string
	now     func() time.Time
	signer  *v4.Signer

	mu       sync.Mutex
	token    string
	signedAt time.Time
	renewAt  time.Time
	expires  time.Time
}

// NewTokenSource returns a source of tokens for the EKS cluster clusterName in
// region, signed with cfg's credentials (assume_role included, as the caller
// configured them). now is the clock tokens are dated and aged by; nil means
// time.Now. Nothing is minted until the first Token call.
func NewTokenSource(cfg aws.Config, clusterName, region string, now func() time.Time) *TokenSource {
	if now == nil {
		now = time.Now
	}
	return &TokenSource{creds: cfg.Credentials, cluster: clusterName, region: region, now: now, signer: v4.NewSigner()}
}

// Token returns a valid token and the time EKS stops accepting it. Errors name
// the cluster and never carry the token.
func (s *TokenSource) Token(ctx context.Context) (string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// Round(0) drops the monotonic reading: after a suspend the monotonic clock
	// lags the wall clock that AWS judges X-Amz-Date by.
	now := s.now().Round(0)
	if s.token != "" && now.Before(s.renewAt) && !now.Before(s.signedAt) {
		return s.token, s.expires, nil
	}
	if err := s.mint(ctx, now); err != nil {
		return "", time.Time{}, fmt.Errorf("minting an EKS token for cluster %q: %w", s.cluster, err)
	}
	return s.token, s.expires, nil
}

// RenewAt is when the latest token should be replaced (ten minutes after
// it was signed, or sooner when its credentials expire); zero before the
// first Token call.
func (s *TokenSource) RenewAt() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.renewAt
}

func (s *TokenSource) mint(ctx context.Context, now time.Time) error {
	if s.creds == nil {
		return errors.New("no AWS credentials configured")
	}
	creds, err := s.creds.Retrieve(ctx)
	if err != nil {
		return fmt.Errorf("retrieving AWS credentials: %w", err)
	}
	u := url.URL{Scheme: "https", Host: stsHost(s.region), Path: "/",
		// X-Amz-Expires is signed in, but STS ignores it; verifiers insist on a value <= 900.
		RawQuery: "Action=GetCallerIdentity&Version=2011-06-15&X-Amz-Expires=60"}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	req.Header.Set(clusterIDHeader, s.cluster)
	signed, _, err := s.signer.PresignHTTP(ctx, creds, req, emptyPayloadSHA256, "sts", s.region, now)
	if err != nil {
		return fmt.Errorf("presigning sts:GetCallerIdentity: %w", err)
	}
	s.token = eksTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(signed))
	s.signedAt = now
	s.renewAt = now.Add(eksTokenRefreshAge)
	s.expires = now.Add(eksTokenValidity)
	// A presigned URL dies with the session credentials that signed it.
	if creds.CanExpire && creds.Expires.Before(s.expires) {
		s.expires = creds.Expires
		if creds.Expires.Before(s.renewAt) {
			s.renewAt = creds.Expires
		}
	}
	return nil
}

// stsHost is the regional STS endpoint EKS accepts tokens for. It is never the
// provider's STS endpoint override: the cluster replays the URL to real STS.
func stsHost(region string) string {
	if strings.HasPrefix(region, "cn-") {
		return "sts." + region + ".amazonaws.com.cn"
	}
	return "sts." + region + ".amazonaws.com"
}
