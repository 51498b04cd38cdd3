package devcert_test

import (
	"crypto/tls"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/internal/devcert"
)

// TestHandshake: a client trusting the certificate completes a TLS
// handshake with a server using it, by IP and by name, and its PEM files
// load with tls.X509KeyPair.
func TestHandshake(t *testing.T) {
	c, err := devcert.New("127.0.0.1", "localhost")
	require.NoError(t, err)
	_, err = tls.X509KeyPair(c.CertPEM, c.KeyPEM)
	require.NoError(t, err)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{c.TLS}})
	require.NoError(t, err)
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		for range 2 {
			s, err := ln.Accept()
			if err != nil {
				done <- err
				return
			}
			err = s.(*tls.Conn).Handshake()
			s.Close()
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for _, name := range []string{"127.0.0.1", "localhost"} {
		cfg := c.ClientConfig()
		cfg.ServerName = name
		conn, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		require.NoError(t, err, name)
		require.NoError(t, conn.Handshake())
		conn.Close()
	}
	require.NoError(t, <-done)

	_, err = devcert.New()
	assert.ErrorContains(t, err, "no host")
}
