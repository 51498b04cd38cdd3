//go:build linux

package netcode_test

import (
	"net"
	"net/netip"
	"os"
	"strconv"
	"testing"

	"github.com/gonetcode/netcode"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// socketBuffers finds the process's UDP socket bound to local (through
// /proc/self/fd and getsockname, so that nothing in the package under test
// has to expose it) and returns its SO_RCVBUF and SO_SNDBUF as the kernel
// reports them.
func socketBuffers(t *testing.T, local net.Addr) (rcv, snd int) {
	t.Helper()
	ua := local.(*net.UDPAddr)
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	found := 0
	for _, e := range fds {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		sa, err := unix.Getsockname(fd)
		if err != nil {
			continue // not a socket
		}
		if typ, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_TYPE); err != nil || typ != unix.SOCK_DGRAM {
			continue
		}
		switch sa := sa.(type) {
		case *unix.SockaddrInet4:
			if ua.IP.To4() == nil || sa.Port != ua.Port {
				continue
			}
		case *unix.SockaddrInet6:
			if ua.IP.To4() != nil || sa.Port != ua.Port {
				continue
			}
		default:
			continue
		}
		rcv, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
		require.NoError(t, err)
		snd, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF)
		require.NoError(t, err)
		found++
	}
	require.Equal(t, 1, found, "UDP sockets bound to %v", local)
	return rcv, snd
}

// TestDialerSocketBuffer: the dialed Conn's socket has the buffers
// Dialer.Socket.Buffer asks for. Linux reports twice the size asked (the
// kernel's bookkeeping overhead, see socket(7)); the sizes here are below
// the usual net.core.rmem_max, so no privilege is needed to get them. The
// default (4 MiB, or as much as the system allows) is larger than either.
func TestDialerSocketBuffer(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			l := listen(t, f.network, f.addr, nil)
			var dflt int
			for _, tt := range []struct {
				name string
				size int
			}{
				{"default", 0},
				{"16 KiB", 16 << 10},
				{"64 KiB", 64 << 10},
			} {
				t.Run(tt.name, func(t *testing.T) {
					cli, srv := dialWith(t, &netcode.Dialer{Socket: netcode.SocketConfig{Buffer: tt.size}}, l, mint(t, l.Addr()))
					rcv, snd := socketBuffers(t, cli.LocalAddr())
					if tt.size == 0 {
						dflt = rcv
						require.Greater(t, rcv, 2*(64<<10), "default receive buffer")
						require.Greater(t, snd, 2*(64<<10), "default send buffer")
					} else {
						require.Equal(t, 2*tt.size, rcv, "receive buffer")
						require.Equal(t, 2*tt.size, snd, "send buffer")
						require.Less(t, rcv, dflt)
					}
					// The Conn works with it.
					_, err := cli.Write([]byte("ping"))
					require.NoError(t, err)
					buf := make([]byte, 16)
					n, err := srv.Read(buf)
					require.NoError(t, err)
					require.Equal(t, "ping", string(buf[:n]))
				})
			}
		})
	}
}

// TestListenSocketBuffer: SocketConfig.Buffer sizes the socket Listen opens
// and, when set, the UDP socket given to NewListener.
func TestListenSocketBuffer(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			l := listen(t, f.network, f.addr, func(c *netcode.ServerConfig) { c.Socket.Buffer = 32 << 10 })
			rcv, snd := socketBuffers(t, l.Addr())
			require.Equal(t, 2*(32<<10), rcv, "receive buffer")
			require.Equal(t, 2*(32<<10), snd, "send buffer")

			uc, err := net.ListenUDP(f.network, net.UDPAddrFromAddrPort(netip.MustParseAddrPort(f.addr)))
			require.NoError(t, err)
			nl, err := netcode.NewListener(uc, &netcode.ServerConfig{ProtocolID: testProtocolID, PrivateKey: testKey, Socket: netcode.SocketConfig{Buffer: 48 << 10}})
			if err != nil {
				uc.Close()
			}
			require.NoError(t, err)
			defer nl.Close()
			rcv, snd = socketBuffers(t, nl.Addr())
			require.Equal(t, 2*(48<<10), rcv, "receive buffer")
			require.Equal(t, 2*(48<<10), snd, "send buffer")
		})
	}
}
