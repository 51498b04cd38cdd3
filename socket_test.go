package netcode_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
)

// TestListenerAddrPort: AddrPort is the bound address as a netip.AddrPort,
// the same as Addr, over real UDP on IPv4 and IPv6.
func TestListenerAddrPort(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			l := listen(t, f.network, f.addr, nil)
			ap := l.AddrPort()
			require.True(t, ap.IsValid())
			require.NotZero(t, ap.Port())
			require.Equal(t, l.Addr().(*net.UDPAddr).AddrPort(), ap)
			require.Equal(t, netip.MustParseAddrPort(f.addr).Addr(), ap.Addr())
		})
	}
}

// controlRecorder is a SocketConfig.Control hook that records the sockets
// it is called with, and fails with err if it is set.
type controlRecorder struct {
	mu    sync.Mutex
	calls []string
	err   error
}

func (r *controlRecorder) control(network, address string, c syscall.RawConn) error {
	var fdSeen bool
	if err := c.Control(func(fd uintptr) { fdSeen = true }); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if fdSeen {
		r.calls = append(r.calls, network+" "+address)
	}
	return r.err
}

func (r *controlRecorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// TestSocketControl: the Control hook of ServerConfig.Socket and
// Dialer.Socket runs on each socket Listen and Dial open, before they are
// bound, and an error from it fails Listen or Dial with that error.
func TestSocketControl(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			var srv, cli controlRecorder
			l := listen(t, f.network, f.addr, func(c *netcode.ServerConfig) { c.Socket.Control = srv.control })
			require.Equal(t, 1, srv.count(), "Listen's socket")
			d := &netcode.Dialer{Socket: netcode.SocketConfig{Control: cli.control}}
			c, s := dialWith(t, d, l, mint(t, l.Addr()))
			require.Equal(t, 1, cli.count(), "Dial's socket")
			_, err := c.Write([]byte("ping"))
			require.NoError(t, err)
			buf := make([]byte, 8)
			n, err := s.Read(buf)
			require.NoError(t, err)
			require.Equal(t, "ping", string(buf[:n]))

			refuse := errors.New("refused by the hook")
			bad := &controlRecorder{err: refuse}
			_, err = netcode.Listen(f.network, f.addr, &netcode.ServerConfig{
				ProtocolID: testProtocolID, PrivateKey: testKey,
				Socket: netcode.SocketConfig{Control: bad.control},
			})
			require.ErrorIs(t, err, refuse)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			bd := &netcode.Dialer{Socket: netcode.SocketConfig{Control: bad.control}}
			_, err = bd.DialContext(ctx, mint(t, l.Addr()))
			require.ErrorIs(t, err, refuse)
		})
	}
}

// TestSocketConfigCallerTransport: on a transport the caller opened
// (NewListener, Dialer.ListenPacket), a Control hook, which could never
// run, is refused, and so is a Buffer for a transport that is not a UDP
// socket; NewListener leaves pc open on the error. Nothing is ignored in
// silence.
func TestSocketConfigCallerTransport(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			if f.network == "udp6" {
				requireIPv6(t)
			}
			uc, err := net.ListenUDP(f.network, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(f.addr)))
			require.NoError(t, err)
			defer uc.Close()
			var rec controlRecorder
			for _, tt := range []struct {
				name string
				pc   net.PacketConn
				sock netcode.SocketConfig
			}{
				{"control", uc, netcode.SocketConfig{Control: rec.control}},
				{"buffer on a tunnel", &opaqueConn{PacketConn: uc}, netcode.SocketConfig{Buffer: 64 << 10}},
			} {
				_, err := netcode.NewListener(tt.pc, &netcode.ServerConfig{ProtocolID: testProtocolID, PrivateKey: testKey, Socket: tt.sock})
				require.Error(t, err, tt.name)
				require.Contains(t, err.Error(), "SocketConfig", tt.name)
			}
			require.Zero(t, rec.count())
			// pc is still open and usable.
			_, err = uc.WriteToUDPAddrPort([]byte("x"), uc.LocalAddr().(*net.UDPAddr).AddrPort())
			require.NoError(t, err)

			l := listen(t, f.network, f.addr, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			opened := false
			d := &netcode.Dialer{
				Socket: netcode.SocketConfig{Control: rec.control},
				ListenPacket: func(context.Context, string, string) (net.PacketConn, error) {
					opened = true
					return net.ListenUDP(f.network, nil)
				},
			}
			_, err = d.DialContext(ctx, mint(t, l.Addr()))
			require.ErrorContains(t, err, "SocketConfig.Control")
			require.False(t, opened, "ListenPacket called although the Dialer is refused")

			d = &netcode.Dialer{
				Socket: netcode.SocketConfig{Buffer: 64 << 10},
				ListenPacket: func(_ context.Context, network, _ string) (net.PacketConn, error) {
					pc, err := net.ListenUDP(network, nil)
					return &opaqueConn{PacketConn: pc}, err
				},
			}
			_, err = d.DialContext(ctx, mint(t, l.Addr()))
			require.ErrorContains(t, err, "SocketConfig.Buffer")
		})
	}
}
