//go:build linux

package netcode_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/internal/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// peerOf is the peer the socket bound to local is connected to, or nil
// if it is not connected.
func peerOf(t *testing.T, local net.Addr) net.Addr {
	t.Helper()
	sa, err := unix.Getpeername(socketFD(t, local))
	if errors.Is(err, unix.ENOTCONN) {
		return nil
	}
	require.NoError(t, err)
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return &net.UDPAddr{IP: sa.Addr[:], Port: sa.Port}
	case *unix.SockaddrInet6:
		return &net.UDPAddr{IP: sa.Addr[:], Port: sa.Port}
	}
	t.Fatalf("peer %T", sa)
	return nil
}

// TestDialConnectsItsSocket, over real UDP, IPv4 and IPv6, on every
// path: once the handshake is done, a dialed Conn's socket that the Dialer
// opened is connected to the server on the recvmmsg/sendmmsg paths (so its
// sends carry no destination) and left unconnected on the plain path; a
// socket from the Dialer's ListenPacket is never connected. Payloads go
// both ways in every case.
func TestDialConnectsItsSocket(t *testing.T) {
	for _, p := range transport.Paths {
		for _, f := range families {
			for _, own := range []bool{false, true} {
				t.Run(fmt.Sprint(p, "/", f.name, "/callers-socket=", own), func(t *testing.T) {
					defer transport.ForcePath(transport.ForcePath(p))
					l := listen(t, f.network, f.addr, nil)
					d := &netcode.Dialer{}
					if own {
						d.ListenPacket = func(_ context.Context, network, laddr string) (net.PacketConn, error) {
							return net.ListenPacket(network, laddr)
						}
					}
					cli, srv := dialWith(t, d, l, mint(t, l.Addr()))
					peer := peerOf(t, cli.LocalAddr())
					if p == transport.PathPlain || own {
						assert.Nil(t, peer, "socket connected")
					} else if assert.NotNil(t, peer, "socket not connected") {
						assert.Equal(t, l.Addr().String(), peer.String())
					}
					for i := range 20 {
						msg := []byte(fmt.Sprint("payload ", i))
						send(t, cli, srv, msg)
						send(t, srv, cli, msg)
					}
				})
			}
		}
	}
}

// TestDialConnectedPortClosed, over real UDP, IPv4 and IPv6, on every
// path: when the server's socket closes without a word, the client's
// sends to it draw ICMP port-unreachable errors, which a connected socket
// reports (ECONNREFUSED) on its next read or write; the Conn takes no
// notice of them and ends as it does on an unconnected socket, by its
// timeout: its Writes succeed until then, and its Read and Write then
// return ErrConnectionTimedOut.
func TestDialConnectedPortClosed(t *testing.T) {
	for _, p := range transport.Paths {
		for _, f := range families {
			t.Run(fmt.Sprint(p, "/", f.name), func(t *testing.T) {
				defer transport.ForcePath(transport.ForcePath(p))
				if f.network == "udp6" {
					requireIPv6(t)
				}
				pc, err := net.ListenPacket(f.network, f.addr)
				require.NoError(t, err)
				l, err := netcode.NewListener(pc, &netcode.ServerConfig{ProtocolID: testProtocolID, PrivateKey: testKey, MaxClients: 4})
				require.NoError(t, err)
				t.Cleanup(func() { l.Close() })
				cli, _ := dialWith(t, &netcode.Dialer{}, l, mint(t, l.Addr(), withTimeout(1)))
				require.NoError(t, pc.Close()) // the port closes: nothing more is sent from it

				read := make(chan error, 1)
				go func() {
					_, err := cli.Read(make([]byte, netcode.MaxPayloadBytes))
					read <- err
				}()
				ended := time.Now().Add(10 * time.Second)
				for {
					_, err := cli.Write([]byte("anyone there?"))
					if err != nil {
						require.ErrorIs(t, err, netcode.ErrConnectionTimedOut)
						break
					}
					require.True(t, time.Now().Before(ended), "the Conn did not end")
					time.Sleep(10 * time.Millisecond) // pace the sends that draw the ICMP errors
				}
				require.ErrorIs(t, <-read, netcode.ErrConnectionTimedOut)
				require.ErrorIs(t, cli.Err(), netcode.ErrConnectionTimedOut)
			})
		}
	}
}
