// Package loopback helps real-network tests: it lists the loopback address
// families they run on, skips a family the machine lacks, and connects a
// client to a Listener with a token.
package loopback

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
)

// Family is one address family on loopback.
type Family struct {
	Name    string // subtest name: "ipv4" or "ipv6"
	Network string // "udp4" or "udp6"
	Addr    string // loopback address with port 0
}

// Families are IPv4 and IPv6 loopback, in that order.
var Families = []Family{
	{"ipv4", "udp4", "127.0.0.1:0"},
	{"ipv6", "udp6", "[::1]:0"},
}

// Require skips t when the machine has no loopback for f, as found by
// binding a plain UDP socket: that is something the machine lacks, never an
// error of the code under test.
func (f Family) Require(t testing.TB) {
	t.Helper()
	pc, err := net.ListenPacket(f.Network, f.Addr)
	if err != nil {
		t.Skipf("no %s loopback on this machine: %v", f.Name, err)
	}
	pc.Close()
}

// Connect dials l with tok, accepts the connection, and checks that a
// payload goes each way. It returns the server's side of the connection;
// both sides are closed when t ends.
func Connect(t testing.TB, l *netcode.Listener, tok []byte) *netcode.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := netcode.DialContext(ctx, tok)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	s, err := l.AcceptConn(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	buf := make([]byte, netcode.MaxPayloadBytes)
	for _, p := range []struct {
		from, to *netcode.Conn
		msg      string
	}{{c, s, "ping from the client"}, {s, c, "pong from the server"}} {
		_, err = p.from.Write([]byte(p.msg))
		require.NoError(t, err)
		require.NoError(t, p.to.SetReadDeadline(time.Now().Add(5*time.Second)))
		n, err := p.to.Read(buf)
		require.NoError(t, err)
		require.Equal(t, p.msg, string(buf[:n]))
	}
	return s
}

// AddrPorts returns addr, a Listener's address, as the one-element server
// list of a token.
func AddrPorts(t testing.TB, addr net.Addr) []netip.AddrPort {
	t.Helper()
	ap, err := netip.ParseAddrPort(addr.String())
	require.NoError(t, err)
	return []netip.AddrPort{ap}
}
