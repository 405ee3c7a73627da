package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the control plane's key material, written to dir: a CA, an apiserver
// serving certificate for 127.0.0.1, the service-account signing key, and the
// aggregation layer's front proxy: a CA of its own (as kubeadm makes one,
// apart from the cluster CA) and the client certificate the API server
// presents to aggregated API servers (CN front-proxy-client).
type pki struct {
	CACert, ServingCert, ServingKey, SAKey, SAPub string
	FrontProxyCA, ProxyClientCert, ProxyClientKey string
	CAData                                        []byte
}

// FrontProxyClientName is the aggregation layer's client certificate's
// common name, the one --requestheader-allowed-names allows.
const FrontProxyClientName = "front-proxy-client"

// authority is a CA that issues the test ground's certificates.
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newAuthority(name string, now time.Time) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate %s: %w", name, err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &authority{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// issue signs a new key's certificate from tmpl (serial and validity are
// filled in) and returns both in PEM.
func (a *authority) issue(tmpl *x509.Certificate, serial int64) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl.SerialNumber = big.NewInt(serial)
	tmpl.NotBefore, tmpl.NotAfter = a.cert.NotBefore, a.cert.NotAfter
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return nil, nil, fmt.Errorf("issuing %s: %w", tmpl.Subject.CommonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

func writePKI(dir string) (*pki, error) {
	now := time.Now()
	ca, err := newAuthority("llmd-testenv-ca", now)
	if err != nil {
		return nil, err
	}
	srvCert, srvKey, err := ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
	}, 2)
	if err != nil {
		return nil, err
	}
	front, err := newAuthority("llmd-testenv-front-proxy-ca", now)
	if err != nil {
		return nil, err
	}
	proxyCert, proxyKey, err := front.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: FrontProxyClientName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, 2)
	if err != nil {
		return nil, err
	}
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	p := &pki{
		CACert:          filepath.Join(dir, "ca.crt"),
		ServingCert:     filepath.Join(dir, "apiserver.crt"),
		ServingKey:      filepath.Join(dir, "apiserver.key"),
		SAKey:           filepath.Join(dir, "sa.key"),
		SAPub:           filepath.Join(dir, "sa.pub"),
		FrontProxyCA:    filepath.Join(dir, "front-proxy-ca.crt"),
		ProxyClientCert: filepath.Join(dir, "front-proxy-client.crt"),
		ProxyClientKey:  filepath.Join(dir, "front-proxy-client.key"),
		CAData:          ca.pem,
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{
		p.CACert:          p.CAData,
		p.ServingCert:     srvCert,
		p.ServingKey:      srvKey,
		p.SAKey:           pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(saKey)}),
		p.SAPub:           pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPubDER}),
		p.FrontProxyCA:    front.pem,
		p.ProxyClientCert: proxyCert,
		p.ProxyClientKey:  proxyKey,
	}
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}
