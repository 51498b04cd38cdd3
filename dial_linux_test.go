//go:build linux

package netcode_test

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"testing"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/internal/msgconn"
	"github.com/gonetcode/netcode/internal/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// socketFD finds the process's UDP socket bound to local (through
// /proc/self/fd and getsockname, so that nothing in the package under test
// has to expose it) and returns its descriptor.
func socketFD(t *testing.T, local net.Addr) int {
	t.Helper()
	ua := local.(*net.UDPAddr)
	fds, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	found := -1
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
		require.Equal(t, -1, found, "UDP sockets bound to %v", local)
		found = fd
	}
	require.NotEqual(t, -1, found, "no UDP socket bound to %v", local)
	return found
}

// socketBuffers returns the SO_RCVBUF and SO_SNDBUF of the socket bound
// to local as the kernel reports them.
func socketBuffers(t *testing.T, local net.Addr) (rcv, snd int) {
	t.Helper()
	fd := socketFD(t, local)
	rcv, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
	require.NoError(t, err)
	snd, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF)
	require.NoError(t, err)
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

// kernelHasGRO asks the kernel itself whether a UDP socket may take
// coalesced datagrams.
func kernelHasGRO(t *testing.T) bool {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	require.NoError(t, err)
	defer unix.Close(fd)
	return unix.SetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_GRO, 1) == nil
}

// TestBulkReadsCoalesced, over real UDP, IPv4 and IPv6, on every path: a
// dialed Conn reads its socket datagram by datagram until a bulk transfer
// attaches (as package reliable does, msgconn.MarkBulk); from its next
// read on, its socket takes the server's trains coalesced (UDP_GRO, as
// the kernel reports it) where the path and the kernel allow it, and not
// elsewhere; in both cases every payload of the batches each side writes
// (each one train) arrives whole and in order.
func TestBulkReadsCoalesced(t *testing.T) {
	gro := kernelHasGRO(t)
	for _, p := range transport.Paths {
		for _, f := range families {
			t.Run(fmt.Sprint(p, "/", f.name), func(t *testing.T) {
				defer transport.ForcePath(transport.ForcePath(p))
				l := listen(t, f.network, f.addr, nil)
				cli, srv := pair(t, l)
				fd := socketFD(t, cli.LocalAddr())
				on := func() bool {
					v, err := unix.GetsockoptInt(fd, unix.IPPROTO_UDP, unix.UDP_GRO)
					return err == nil && v == 1
				}
				require.False(t, on(), "GRO before a bulk transfer")
				msgconn.MarkBulk(cli, 0)
				msgconn.MarkBulk(srv, 0) // a server's Conn shares the Listener's socket: no GRO of its own
				batchTrade(t, cli, srv)
				assert.Equal(t, gro && p == transport.PathBest, on(), "GRO after a bulk transfer")
			})
		}
	}
}
