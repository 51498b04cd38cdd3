// Package devcert makes self-signed TLS certificates, for tests and for the
// examples' development mode. Never use one in production: clients trust it
// only because they are told to.
package devcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
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
	// SHA256 is the SHA-256 hash of the certificate (DER), by which a
	// browser pins it (WebTransport's serverCertificateHashes).
	SHA256 [32]byte
}

// New makes an ECDSA P-256 certificate valid for a day for the given host
// names and IP addresses (at least one).
func New(hosts ...string) (*Cert, error) {
	return Make(Options{Validity: 24 * time.Hour, CA: true}, hosts...)
}

// MaxPinnedValidity is the longest validity a certificate may have that a
// browser accepts by its hash (WebTransport's serverCertificateHashes):
// 14 days from NotBefore to NotAfter.
const MaxPinnedValidity = 14 * 24 * time.Hour

// Options are what Make varies.
type Options struct {
	// NotBefore is when the certificate becomes valid; zero means an
	// hour ago (for clocks behind).
	NotBefore time.Time
	// Validity is how long it is valid from NotBefore.
	Validity time.Duration
	// CA makes it a CA certificate, so that a client can trust it as its
	// one root; a certificate pinned by its hash is a plain leaf.
	CA bool
}

// Make makes an ECDSA P-256 certificate with o for the given host names
// and IP addresses (at least one).
func Make(o Options, hosts ...string) (*Cert, error) {
	if len(hosts) == 0 {
		return nil, errors.New("devcert: no host")
	}
	if o.Validity <= 0 {
		return nil, errors.New("devcert: no validity")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	if o.NotBefore.IsZero() {
		o.NotBefore = time.Now().Add(-time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: hosts[0], Organization: []string{"netcode development"}},
		NotBefore:             o.NotBefore,
		NotAfter:              o.NotBefore.Add(o.Validity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  o.CA,
	}
	if o.CA {
		tmpl.KeyUsage |= x509.KeyUsageCertSign
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
	c.SHA256 = sha256.Sum256(der)
	return c, nil
}

// ClientConfig returns a TLS client configuration that trusts only c.
func (c *Cert) ClientConfig() *tls.Config {
	return &tls.Config{RootCAs: c.Pool, MinVersion: tls.VersionTLS12}
}
