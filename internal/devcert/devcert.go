// Package devcert makes self-signed TLS certificates, for tests and for the
// examples' development mode. Never use one in production: clients trust it
// only because they are told to.
package devcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"time"
)

// Cert is a self-signed certificate and its key.
type Cert struct {
	// TLS is the certificate for a tls.Config.
	TLS tls.Certificate
	// CertPEM and KeyPEM are the certificate and its private key in PEM, as
	// files for -tls-cert and -tls-key.
	CertPEM, KeyPEM []byte
	// Pool holds the certificate as the one root a client should trust.
	Pool *x509.CertPool
	// X509 is the parsed certificate.
	X509 *x509.Certificate
}

// New makes an ECDSA P-256 certificate valid for a day for the given host
// names and IP addresses (at least one).
func New(hosts ...string) (*Cert, error) {
	if len(hosts) == 0 {
		return nil, errors.New("devcert: no host")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: hosts[0], Organization: []string{"netcode development"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	parsed, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	c := &Cert{
		TLS:     tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: parsed},
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		Pool:    x509.NewCertPool(),
		X509:    parsed,
	}
	c.Pool.AddCert(parsed)
	return c, nil
}

// ClientConfig returns a TLS client configuration that trusts only c.
func (c *Cert) ClientConfig() *tls.Config {
	return &tls.Config{RootCAs: c.Pool, MinVersion: tls.VersionTLS12}
}
