package transport

import (
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// capableSock offers every capability, as a Mux does: batched I/O and
// I/O by netip.AddrPort of its own, and a push path whose writes are
// direct, through an embedded Batched.
type capableSock struct {
	*net.UDPConn
	Batched
}

type directPusher struct{}

func (directPusher) Push(func([]Message)) {}
func (directPusher) WritesDirect() bool   { return true }

// TestCapabilityFallbacks: each capability is found where a socket of
// the module offers it, and a plain net.PacketConn wrapper of that socket
// (what a user who wraps it hands the library) offers none, and works
// through every fallback: one datagram per call with *net.UDPAddr
// addresses, read deadlines, and a read loop with neither held reads
// nor a push path.
func TestCapabilityFallbacks(t *testing.T) {
	for _, f := range []struct{ name, network, addr string }{{"IPv4", "udp4", "127.0.0.1:0"}, {"IPv6", "udp6", "[::1]:0"}} {
		t.Run(f.name, func(t *testing.T) {
			uc, err := net.ListenUDP(f.network, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(f.addr)))
			if err != nil {
				t.Skipf("no %s loopback: %v", f.name, err)
			}
			defer uc.Close()
			peer, err := net.ListenUDP(f.network, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(f.addr)))
			require.NoError(t, err)
			defer peer.Close()

			b := &calls{}
			full := capableSock{uc, Batched{B: batchingAP{apOnly{uc}, b}, P: uc, S: directPusher{}}}
			caps := CapabilitiesOf(full)
			assert.NotNil(t, caps.Batcher, "batch I/O")
			assert.NotNil(t, caps.AddrPortIO, "I/O by netip.AddrPort")
			assert.NotNil(t, caps.Pusher, "the push path")
			assert.True(t, caps.Direct, "direct writes to pushed peers")
			assert.NotNil(t, CapabilitiesOf(uc).AddrPortIO, "a *net.UDPConn's own methods")

			wrapped := hidden{full} // a plain net.PacketConn wrapper
			assert.Equal(t, Capabilities{}, CapabilitiesOf(wrapped), "a wrapper hides every capability")
			c := New(wrapped)
			require.IsType(t, &genericConn{}, c, "one datagram per call, addresses as *net.UDPAddr")
			_, held := c.(HeldReader)
			assert.False(t, held, "no held reads")
			_, waits := c.(WaitReporter)
			assert.False(t, waits, "no lone-read report")

			// The fallbacks carry datagrams both ways, in a read loop.
			to := AddrPortOf(peer.LocalAddr())
			require.NoError(t, c.WriteTo([]byte("one"), to))
			n, err := c.WriteBatch([]Message{{Buf: []byte("two"), Addr: to}, {Buf: []byte("three"), Addr: to}})
			require.NoError(t, err)
			require.Equal(t, 2, n)
			buf := make([]byte, 16)
			for _, want := range []string{"one", "two", "three"} {
				require.NoError(t, peer.SetReadDeadline(time.Now().Add(5*time.Second)))
				n, _, err := peer.ReadFrom(buf)
				require.NoError(t, err)
				assert.Equal(t, want, string(buf[:n]))
			}
			stop := make(chan struct{})
			got := make(chan string, 4)
			done := make(chan error, 1)
			go func() {
				done <- ReadLoopTurns(c, NewMessages(4), stop, func(ms []Message) {
					for _, m := range ms {
						got <- string(m.Buf)
					}
				}, nil, nil, true)
			}()
			_, err = peer.WriteTo([]byte("back"), uc.LocalAddr())
			require.NoError(t, err)
			select {
			case s := <-got:
				assert.Equal(t, "back", s)
			case <-time.After(5 * time.Second):
				t.Fatal("the read loop over the wrapper read nothing")
			}
			close(stop)
			require.NoError(t, c.SetReadDeadline(time.Unix(1, 0))) // ends the loop's read
			require.NoError(t, <-done)
			require.NoError(t, c.SetReadDeadline(time.Now().Add(time.Millisecond)))
			_, err = c.ReadBatch(NewMessages(1))
			require.ErrorIs(t, err, os.ErrDeadlineExceeded, "read deadlines work through the wrapper")
			assert.Zero(t, b.reads+b.writes, "the wrapped socket's Batcher was never used")
		})
	}
}
