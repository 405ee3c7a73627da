package servingcert

import (
	"crypto/x509"
	"testing"
	"time"
)

func TestSelfSignedServesItsName(t *testing.T) {
	c, err := SelfSigned("llmd-router test")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if leaf.Subject.CommonName != "llmd-router test" {
		t.Errorf("common name %q", leaf.Subject.CommonName)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "localhost", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("a client pinning the certificate cannot verify it for localhost: %v", err)
	}
	if leaf.NotAfter.Before(time.Now().AddDate(0, 11, 0)) {
		t.Errorf("valid until %s, want about a year", leaf.NotAfter)
	}
}
