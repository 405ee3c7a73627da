package autoscale

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The ConfigMap in which the API server publishes how it authenticates
// itself to aggregated API servers (kube-apiserver's
// ClusterAuthenticationTrustController).
const (
	authConfigNamespace = "kube-system"
	authConfigName      = "extension-apiserver-authentication"
)

// Caller is who the front proxy says sent a request.
type Caller struct {
	User   string
	Groups []string
	Extra  map[string][]string
}

// FrontProxy authenticates requests the API server's aggregation layer
// proxies: a client certificate chaining to the requestheader client CA,
// with a common name the API server allows, and the caller in the headers
// it names. Anything else is refused.
type FrontProxy struct {
	mu            sync.RWMutex
	roots         *x509.CertPool
	allowedNames  []string
	userHeaders   []string
	groupHeaders  []string
	extraPrefixes []string
}

// NewFrontProxy reads the API server's requestheader settings from data
// (the extension-apiserver-authentication ConfigMap's data).
func NewFrontProxy(data map[string]string) (*FrontProxy, error) {
	f := &FrontProxy{}
	return f, f.load(data)
}

func (f *FrontProxy) load(data map[string]string) error {
	ca := data["requestheader-client-ca-file"]
	if ca == "" {
		return errors.New("the API server publishes no requestheader-client-ca-file: its aggregation layer is off (kube-apiserver --requestheader-client-ca-file)")
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(ca)) {
		return errors.New("requestheader-client-ca-file holds no PEM certificate")
	}
	var lists [4][]string
	for i, key := range []string{"requestheader-allowed-names", "requestheader-username-headers",
		"requestheader-group-headers", "requestheader-extra-headers-prefix"} {
		if v := data[key]; v != "" {
			if err := json.Unmarshal([]byte(v), &lists[i]); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
		}
	}
	if len(lists[1]) == 0 {
		return errors.New("the API server names no requestheader-username-headers")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.roots, f.allowedNames, f.userHeaders, f.groupHeaders, f.extraPrefixes = roots, lists[0], lists[1], lists[2], lists[3]
	return nil
}

// Authenticate returns the caller of r, or why r is not the front proxy's.
func (f *FrontProxy) Authenticate(r *http.Request) (Caller, error) {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return Caller{}, errors.New("no client certificate: only the API server's aggregation layer may call")
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	leaf := r.TLS.PeerCertificates[0]
	inter := x509.NewCertPool()
	for _, c := range r.TLS.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: f.roots, Intermediates: inter,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		return Caller{}, fmt.Errorf("client certificate %q: %w", leaf.Subject.CommonName, err)
	}
	if len(f.allowedNames) > 0 && !slices.Contains(f.allowedNames, leaf.Subject.CommonName) {
		return Caller{}, fmt.Errorf("client certificate %q is not one the API server proxies with (%s)",
			leaf.Subject.CommonName, strings.Join(f.allowedNames, ", "))
	}
	var c Caller
	for _, h := range f.userHeaders {
		if c.User = r.Header.Get(h); c.User != "" {
			break
		}
	}
	if c.User == "" {
		return Caller{}, errors.New("the front proxy named no user")
	}
	for _, h := range f.groupHeaders {
		c.Groups = append(c.Groups, r.Header.Values(h)...)
	}
	for name, values := range r.Header {
		for _, prefix := range f.extraPrefixes {
			if len(name) > len(prefix) && strings.EqualFold(name[:len(prefix)], prefix) {
				key, err := url.PathUnescape(strings.ToLower(name[len(prefix):]))
				if err != nil {
					key = strings.ToLower(name[len(prefix):])
				}
				if c.Extra == nil {
					c.Extra = map[string][]string{}
				}
				c.Extra[key] = append(c.Extra[key], values...)
			}
		}
	}
	return c, nil
}

// WatchFrontProxy reads the API server's requestheader settings and reads
// them again every refresh until ctx ends, so a rotated front-proxy CA is
// taken without a restart. The router's service account needs the
// extension-apiserver-authentication-reader Role in kube-system.
func WatchFrontProxy(ctx context.Context, cs kubernetes.Interface, refresh time.Duration, warn func(error)) (*FrontProxy, error) {
	read := func() (map[string]string, error) {
		cm, err := cs.CoreV1().ConfigMaps(authConfigNamespace).Get(ctx, authConfigName, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("reading %s/%s: %w", authConfigNamespace, authConfigName, err)
		}
		return cm.Data, nil
	}
	data, err := read()
	if err != nil {
		return nil, err
	}
	f, err := NewFrontProxy(data)
	if err != nil {
		return nil, err
	}
	go func() {
		t := time.NewTicker(refresh)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			data, err := read()
			if err == nil {
				err = f.load(data)
			}
			if err != nil && ctx.Err() == nil {
				warn(fmt.Errorf("keeping the front proxy's last settings: %w", err))
			}
		}
	}()
	return f, nil
}

// Reviewer asks the API server whether a caller may read a metric
// (SubjectAccessReview; the router's service account needs
// system:auth-delegator), remembering each answer for ttl: the HPA asks
// every sync period.
type Reviewer struct {
	cs  kubernetes.Interface
	ttl time.Duration

	mu    sync.Mutex
	cache map[string]review
}

type review struct {
	allowed bool
	reason  string
	at      time.Time
}

// NewReviewer returns a Reviewer asking through cs.
func NewReviewer(cs kubernetes.Interface, ttl time.Duration) *Reviewer {
	return &Reviewer{cs: cs, ttl: ttl, cache: make(map[string]review)}
}

// maxReviews bounds the cache: callers are the HPA controller and a few
// people, so a full cache is emptied rather than managed.
const maxReviews = 1024

// Allowed says whether c may get metric in namespace, and if not why.
func (v *Reviewer) Allowed(ctx context.Context, c Caller, namespace, metric string) (bool, string, error) {
	key := strings.Join([]string{c.User, strings.Join(c.Groups, ","), fmt.Sprint(c.Extra), namespace, metric}, "\x00")
	v.mu.Lock()
	if r, ok := v.cache[key]; ok && time.Since(r.at) < v.ttl {
		v.mu.Unlock()
		return r.allowed, r.reason, nil
	}
	v.mu.Unlock()
	extra := map[string]authorizationv1.ExtraValue{}
	for k, vs := range c.Extra {
		extra[k] = vs
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: c.User, Groups: c.Groups, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "get",
			Group: Group, Version: Version, Resource: metric},
	}}
	got, err := v.cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("asking the API server whether %q may read %s: %w", c.User, metric, err)
	}
	r := review{allowed: got.Status.Allowed, reason: got.Status.Reason, at: time.Now()}
	v.mu.Lock()
	if len(v.cache) >= maxReviews {
		clear(v.cache)
	}
	v.cache[key] = r
	v.mu.Unlock()
	return r.allowed, r.reason, nil
}
