// Package servingcert makes the TLS certificate a router listener serves
// when it is given none: a self-signed ECDSA P-256 certificate for the
// pod's host name, made at start. Its clients skip verification or pin it,
// as Kubernetes' aggregation layer does for an APIService with
// insecureSkipTLSVerify and gateways do for an endpoint picker.
package servingcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"os"
	"time"
)

// SelfSigned makes a certificate named commonName for localhost and the
// host name, valid for a year.
func SelfSigned(commonName string) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generating the %s TLS key: %w", commonName, err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generating the %s certificate serial: %w", commonName, err)
	}
	host, _ := os.Hostname()
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: commonName},
		DNSNames: []string{"localhost", host}, NotBefore: now.Add(-time.Minute), NotAfter: now.AddDate(1, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("self-signing the %s certificate: %w", commonName, err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
