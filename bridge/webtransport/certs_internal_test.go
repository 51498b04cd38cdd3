package webtransport

import (
	"crypto/x509"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/internal/devcert"
)

// TestDevCertRotation: the development certificates are ECDSA, valid for
// at most 14 days, and rotate every third of that; the hashes a page
// fetched at any time include the certificate served for at least a third
// of the validity after, and the certificate served is valid whenever it
// is served.
func TestDevCertRotation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, err := newDevCerts([]string{"localhost"}, 0)
		require.NoError(t, err)
		period := defaultDevValidity / 3
		step := time.Hour
		fetched := map[time.Time][][32]byte{} // hashes by when a page fetched them
		rotations := 0
		var last [32]byte
		for now := time.Now(); time.Since(now) < 4*defaultDevValidity; time.Sleep(step) {
			serving, next, err := d.current(time.Now())
			require.NoError(t, err)
			c := serving.X509
			assert.Equal(t, x509.ECDSA, c.PublicKeyAlgorithm)
			assert.False(t, c.IsCA)
			assert.LessOrEqual(t, c.NotAfter.Sub(c.NotBefore), devcert.MaxPinnedValidity)
			assert.True(t, time.Now().After(c.NotBefore) && time.Now().Before(c.NotAfter), "served outside its validity")
			assert.NotEqual(t, serving.SHA256, next.SHA256)
			if serving.SHA256 != last {
				rotations++
				last = serving.SHA256
			}
			h, err := d.hashes()
			require.NoError(t, err)
			fetched[time.Now()] = h
			// Every list fetched in the last period holds the served
			// certificate's hash.
			for at, hs := range fetched {
				if time.Since(at) <= period {
					assert.Contains(t, hs, serving.SHA256, "a list fetched %v ago misses the served certificate", time.Since(at))
				}
			}
		}
		assert.Equal(t, 12, rotations, "the first certificate, then one a period: 11 rotations in 12 periods")
		_, err = newDevCerts([]string{"localhost"}, devcert.MaxPinnedValidity+time.Second)
		assert.Error(t, err, "a validity over 14 days")
	})
}
