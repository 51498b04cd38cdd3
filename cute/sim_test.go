package cute

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/gonetcode/netcode/internal/testing/netsim"
	"github.com/stretchr/testify/require"
)

// simServer is a Listener on nw (a simulated network), at 10.8.0.1:40000.
type simServer struct {
	*Listener
	addr netip.AddrPort
	sk   SecretKey
}

func newSimServer(t *testing.T, nw *netsim.Network) *simServer {
	t.Helper()
	s := &simServer{addr: netip.MustParseAddrPort("10.8.0.1:40000")}
	pc, err := nw.Listen(s.addr)
	require.NoError(t, err)
	var pk PublicKey
	pk, s.sk = GenerateKeyPair()
	s.Listener, err = NewListener(pc, &ServerConfig{ApplicationID: testApp, PublicKey: pk, SecretKey: s.sk})
	require.NoError(t, err)
	return s
}

// dial connects client i (from 0) to s, from 10.8.1.i:5000.
func (s *simServer) dial(t *testing.T, nw *netsim.Network, i int) *Conn {
	t.Helper()
	tok, err := GenerateToken(&TokenParams{ApplicationID: testApp, ClientID: uint64(i + 1), SecretKey: s.sk, ServerAddrs: []netip.AddrPort{s.addr}})
	require.NoError(t, err)
	d := Dialer{ListenPacket: func(context.Context, string, string) (net.PacketConn, error) {
		return nw.Listen(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 8, 1, byte(i)}), 5000))
	}}
	c, err := d.DialContext(context.Background(), tok)
	require.NoError(t, err)
	return c
}
