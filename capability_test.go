package netcode_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/stretchr/testify/require"
)

// plainPacketConn is what a user who wraps a socket hands the library: a
// net.PacketConn and nothing more, hiding every capability of the socket
// inside (internal/transport's capability.go).
type plainPacketConn struct{ pc net.PacketConn }

func (p plainPacketConn) ReadFrom(b []byte) (int, net.Addr, error)  { return p.pc.ReadFrom(b) }
func (p plainPacketConn) WriteTo(b []byte, a net.Addr) (int, error) { return p.pc.WriteTo(b, a) }
func (p plainPacketConn) Close() error                              { return p.pc.Close() }
func (p plainPacketConn) LocalAddr() net.Addr                       { return p.pc.LocalAddr() }
func (p plainPacketConn) SetDeadline(t time.Time) error             { return p.pc.SetDeadline(t) }
func (p plainPacketConn) SetReadDeadline(t time.Time) error         { return p.pc.SetReadDeadline(t) }
func (p plainPacketConn) SetWriteDeadline(t time.Time) error        { return p.pc.SetWriteDeadline(t) }

// TestPlainPacketConnFallbacks, over real UDP, IPv4 and IPv6: a Listener
// (NewListener) and a dialed Conn (Dialer.ListenPacket) over plain
// net.PacketConn wrappers run on every fallback of the socket engine (one
// datagram per call, no held reads, no connected socket and so no held
// Writes, no push path) and still connect, echo (their Reads pulling the
// socket or waiting on their queue), and close.
func TestPlainPacketConnFallbacks(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			uc, err := net.ListenPacket(f.network, f.addr)
			if err != nil {
				t.Skipf("no %s loopback: %v", f.name, err)
			}
			l, err := netcode.NewListener(plainPacketConn{uc}, &netcode.ServerConfig{ProtocolID: testProtocolID, PrivateKey: testKey, MaxClients: 4})
			require.NoError(t, err)
			defer l.Close()
			d := netcode.Dialer{ListenPacket: func(_ context.Context, network, addr string) (net.PacketConn, error) {
				pc, err := net.ListenPacket(network, addr)
				return plainPacketConn{pc}, err
			}}
			cli, srv := dialWith(t, &d, l, mint(t, l.Addr()))
			go echoUntilError(srv)
			for i := range 50 {
				send(t, cli, cli, []byte{byte(i), 1, 2, 3})
			}
			// A burst answered as it comes back: Writes while Reads have
			// payloads queued, which a connected socket would hold.
			for i := range 16 {
				_, err := cli.Write([]byte{byte(i)})
				require.NoError(t, err)
			}
			buf := make([]byte, netcode.MaxPayloadBytes)
			require.NoError(t, cli.SetReadDeadline(time.Now().Add(10*time.Second)))
			for range 16 {
				_, err := cli.Read(buf)
				require.NoError(t, err)
			}
			require.Zero(t, netcode.HeldWrites(cli), "no connected socket: nothing held")
			require.NoError(t, cli.Close())
		})
	}
}
