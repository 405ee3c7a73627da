package autoscale

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"
)

// testCA issues client certificates, as the API server's front-proxy CA.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t *testing.T, name string) *testCA {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key}
}

func (ca *testCA) pem() string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}))
}

func (ca *testCA) client(t *testing.T, cn string, usage x509.ExtKeyUsage) *x509.Certificate {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{usage}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return cert
}

// authConfig is the extension-apiserver-authentication ConfigMap's data as
// kube-apiserver publishes it with kubeadm's flags.
func authConfig(ca *testCA) map[string]string {
	return map[string]string{
		"requestheader-client-ca-file":       ca.pem(),
		"requestheader-allowed-names":        `["front-proxy-client"]`,
		"requestheader-username-headers":     `["X-Remote-User"]`,
		"requestheader-group-headers":        `["X-Remote-Group"]`,
		"requestheader-extra-headers-prefix": `["X-Remote-Extra-"]`,
	}
}

func request(certs []*x509.Certificate, header map[string][]string) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "https://router/apis/external.metrics.k8s.io/v1beta1", nil)
	if certs != nil {
		r.TLS = &tls.ConnectionState{PeerCertificates: certs}
	}
	for k, vs := range header {
		for _, v := range vs {
			r.Header.Add(k, v)
		}
	}
	return r
}

func TestFrontProxyAuthenticatesOnlyTheAggregator(t *testing.T) {
	front, other := newTestCA(t, "front-proxy-ca"), newTestCA(t, "cluster-ca")
	fp, err := NewFrontProxy(authConfig(front))
	if err != nil {
		t.Fatal(err)
	}
	proxy := front.client(t, "front-proxy-client", x509.ExtKeyUsageClientAuth)
	caller := map[string][]string{"X-Remote-User": {"system:serviceaccount:kube-system:horizontal-pod-autoscaler"},
		"X-Remote-Group": {"system:serviceaccounts", "system:authenticated"}, "X-Remote-Extra-Authentication.kubernetes.io%2fpod-name": {"kcm-0"}}

	c, err := fp.Authenticate(request([]*x509.Certificate{proxy}, caller))
	if err != nil {
		t.Fatal(err)
	}
	if c.User != "system:serviceaccount:kube-system:horizontal-pod-autoscaler" || len(c.Groups) != 2 ||
		strings.Join(c.Extra["authentication.kubernetes.io/pod-name"], ",") != "kcm-0" {
		t.Errorf("caller %+v", c)
	}

	for _, tc := range []struct {
		name  string
		certs []*x509.Certificate
		hdr   map[string][]string
		want  string
	}{
		{"no certificate", nil, caller, "no client certificate"},
		{"another CA's certificate", []*x509.Certificate{other.client(t, "front-proxy-client", x509.ExtKeyUsageClientAuth)}, caller, "unknown authority"},
		{"a name the API server does not proxy with", []*x509.Certificate{front.client(t, "someone", x509.ExtKeyUsageClientAuth)}, caller, "not one the API server proxies with"},
		{"a server certificate", []*x509.Certificate{front.client(t, "front-proxy-client", x509.ExtKeyUsageServerAuth)}, caller, "usage"},
		{"no user", []*x509.Certificate{proxy}, map[string][]string{"X-Remote-Group": {"system:masters"}}, "named no user"},
	} {
		if _, err := fp.Authenticate(request(tc.certs, tc.hdr)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

func TestFrontProxyNeedsTheAggregationLayer(t *testing.T) {
	cfg := authConfig(newTestCA(t, "front"))
	delete(cfg, "requestheader-client-ca-file")
	if _, err := NewFrontProxy(cfg); err == nil || !strings.Contains(err.Error(), "aggregation layer is off") {
		t.Errorf("no requestheader CA: %v", err)
	}
}
