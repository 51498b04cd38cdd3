package reliable

import (
	"net"
	"net/netip"
	"testing"

	"github.com/gonetcode/netcode/internal/testing/netsim"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// simConn is a MessageConn between two addresses of a netsim network.
type simConn struct {
	pc   *netsim.Conn
	peer netip.AddrPort
}

func (c *simConn) Read(b []byte) (int, error) {
	for {
		n, from, err := c.pc.ReadFromUDPAddrPort(b)
		if err != nil || from == c.peer {
			return n, err
		}
	}
}

func (c *simConn) Write(b []byte) (int, error) { return c.pc.WriteToUDPAddrPort(b, c.peer) }
func (c *simConn) Close() error                { return c.pc.Close() }
func (c *simConn) LocalAddr() net.Addr         { return c.pc.LocalAddr() }
func (c *simConn) RemoteAddr() net.Addr        { return net.UDPAddrFromAddrPort(c.peer) }

// simPair returns two message connections joined by a real-time netsim
// network with cfg on both directions.
func simPair(t testing.TB, seed int64, cfg netsim.Config) (a, b *simConn) {
	t.Helper()
	n := netsim.New(seed, cfg)
	t.Cleanup(func() { n.Close() })
	aa := netip.MustParseAddrPort("10.0.0.1:1000")
	ba := netip.MustParseAddrPort("10.0.0.2:2000")
	pa, err := n.Listen(aa)
	require.NoError(t, err)
	pb, err := n.Listen(ba)
	require.NoError(t, err)
	return &simConn{pa.(*netsim.Conn), ba}, &simConn{pb.(*netsim.Conn), aa}
}

// lossy is a netsim link with loss, jitter, duplication and reordering.
func lossy(loss float64) netsim.Config {
	return netsim.Config{
		Latency:   2e6, // 2 ms
		Jitter:    1e6,
		Loss:      loss,
		Duplicate: 0.02,
		Reorder:   0.05,
	}
}

// pattern fills b from seed so that a receiver can check it.
func pattern(b []byte, seed int) {
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x = x*1664525 + 1013904223
		b[i] = byte(x >> 24)
	}
}
