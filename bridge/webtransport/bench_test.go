package webtransport_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// BenchmarkRelayEcho is one payload of 100 bytes through a WebTransport
// relay session to the netcode echo server and back: the bridge reads a
// datagram and writes it to its netcode client, then reads the echo and
// sends it in a datagram. Its allocations are the whole process's (the Go
// client, the bridge and the server); -memprofile tells them apart (see
// the figures in docs/browsers.md, WebTransport, What a session costs).
func BenchmarkRelayEcho(b *testing.B) {
	r := newRig(b, rigConfig{})
	c := r.dialRelay(b)
	p, buf := make([]byte, 100), make([]byte, 1500)
	b.ReportAllocs()
	for b.Loop() {
		_, err := c.Write(p)
		require.NoError(b, err)
		_, err = c.Read(buf)
		require.NoError(b, err)
	}
}

// BenchmarkTransportEcho is one payload of 100 bytes from a netcode
// client over WebTransport to the echo server, whose Listener reads a Mux,
// and back.
func BenchmarkTransportEcho(b *testing.B) {
	r := newRig(b, rigConfig{})
	c := r.dialTransport(b)
	p, buf := make([]byte, 100), make([]byte, 1500)
	b.ReportAllocs()
	for b.Loop() {
		_, err := c.Write(p)
		require.NoError(b, err)
		_, err = c.Read(buf)
		require.NoError(b, err)
	}
}
