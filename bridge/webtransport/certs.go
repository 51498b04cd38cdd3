package webtransport

import (
	"crypto/tls"
	"errors"
	"sync"
	"time"

	"github.com/gonetcode/netcode/internal/devcert"
)

// devCerts is a Server's development certificates: self-signed ECDSA
// P-256 ones, each valid for validity (at most 14 days, so that browsers
// accept them by their hash), rotated every validity/3 without a goroutine
// or a timer: the TLS handshake and Hashes, which read them, rotate them
// when the time has come.
//
// At any time there are two: the one served, and the next one, made a
// period before it is served. Hashes gives both, so that a page that
// fetched them at any time reaches the server for at least a period after,
// across a rotation; a certificate is served from one period after it was
// made to two, and expires at three (less the hour of NotBefore's margin).
//
// Lock order: mu is a leaf.
type devCerts struct {
	hosts    []string
	validity time.Duration
	period   time.Duration

	mu       sync.Mutex
	serving  *devcert.Cert
	next     *devcert.Cert
	switchAt time.Time // when next is served
}

// defaultDevValidity is Config.DevValidity's default: a day short of
// the 14 browsers accept, for clocks that disagree.
const defaultDevValidity = devcert.MaxPinnedValidity - 24*time.Hour

func newDevCerts(hosts []string, validity time.Duration) (*devCerts, error) {
	if validity <= 0 {
		validity = defaultDevValidity
	}
	if validity > devcert.MaxPinnedValidity {
		return nil, errors.New("netcode/bridge: development certificates are valid for 14 days at most (browsers refuse longer ones by hash)")
	}
	if validity < 3*time.Hour {
		return nil, errors.New("netcode/bridge: development certificates must be valid for 3 hours at least")
	}
	d := &devCerts{hosts: hosts, validity: validity, period: validity / 3}
	now := time.Now()
	var err error
	if d.serving, err = d.make(now); err != nil {
		return nil, err
	}
	if d.next, err = d.make(now); err != nil {
		return nil, err
	}
	d.switchAt = now.Add(d.period)
	return d, nil
}

// make makes a certificate at now, valid from an hour before (clocks
// behind) for validity in all.
func (d *devCerts) make(now time.Time) (*devcert.Cert, error) {
	return devcert.Make(devcert.Options{NotBefore: now.Add(-time.Hour), Validity: d.validity}, d.hosts...)
}

// current rotates if the time has come and returns the two certificates.
func (d *devCerts) current(now time.Time) (serving, next *devcert.Cert, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for !now.Before(d.switchAt) {
		c, err := d.make(now)
		if err != nil {
			return nil, nil, err
		}
		d.serving, d.next = d.next, c
		d.switchAt = d.switchAt.Add(d.period)
		if now.Sub(d.switchAt) > d.period {
			d.switchAt = now.Add(d.period) // asleep for long: start afresh
		}
	}
	return d.serving, d.next, nil
}

// getCertificate is the tls.Config's GetCertificate: the certificate served.
func (d *devCerts) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c, _, err := d.current(time.Now())
	if err != nil {
		return nil, err
	}
	return &c.TLS, nil
}

// hashes returns the SHA-256 hashes of the certificate served and of the
// next one.
func (d *devCerts) hashes() ([][32]byte, error) {
	c, n, err := d.current(time.Now())
	if err != nil {
		return nil, err
	}
	return [][32]byte{c.SHA256, n.SHA256}, nil
}
