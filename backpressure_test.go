package netcode_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/internal/testing/netsim"
	"github.com/stretchr/testify/require"
)

// gateConn is a Listener's socket whose writes can be held shut, as a
// socket whose send buffer is full holds them.
type gateConn struct {
	net.PacketConn
	mu     sync.Mutex
	gate   chan struct{} // nil: open; writes wait until it is closed
	closed chan struct{} // closed by Close, which ends the waiting writes
	once   sync.Once
}

func newGateConn(pc net.PacketConn) *gateConn {
	return &gateConn{PacketConn: pc, closed: make(chan struct{})}
}

// Close closes the socket; a write held at the gate fails, as a write
// blocked in a socket does when the socket is closed.
func (g *gateConn) Close() error {
	g.once.Do(func() { close(g.closed) })
	return g.PacketConn.Close()
}

func (g *gateConn) shut() {
	g.mu.Lock()
	g.gate = make(chan struct{})
	g.mu.Unlock()
}

func (g *gateConn) open() {
	g.mu.Lock()
	if g.gate != nil {
		close(g.gate)
		g.gate = nil
	}
	g.mu.Unlock()
}

func (g *gateConn) WriteTo(b []byte, addr net.Addr) (int, error) {
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-g.closed:
			return 0, net.ErrClosed
		}
	}
	return g.PacketConn.WriteTo(b, addr)
}

// TestWriteBackpressure: with the socket's writes held, a server Conn's
// Writes fill the Listener's send queue and then wait, holding no lock:
// the Listener goes on reading, ticking and answering other clients'
// calls; a Write deadline ends a waiting Write with os.ErrDeadlineExceeded;
// Conn.Close ends one with net.ErrClosed, and itself returns without
// waiting for the socket (its disconnects that do not fit are dropped).
// Once the socket writes again, everything that was queued leaves.
func TestWriteBackpressure(t *testing.T) {
	for _, how := range []string{"close", "deadline"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testWriteBackpressure(t, how) })
		})
	}
}

func testWriteBackpressure(t *testing.T, how string) {
	nw := netsim.New(1, netsim.Config{})
	defer nw.Close()
	srvAddr := netip.MustParseAddrPort("10.30.0.1:40000")
	pc, err := nw.Listen(srvAddr)
	require.NoError(t, err)
	sock := newGateConn(pc)
	l, err := netcode.NewListener(sock, &netcode.ServerConfig{ProtocolID: testProtocolID, PrivateKey: testKey})
	require.NoError(t, err)
	defer l.Close()
	dialer := func(port uint16) *netcode.Dialer {
		return &netcode.Dialer{ListenPacket: func(_ context.Context, _, _ string) (net.PacketConn, error) {
			return nw.Listen(netip.AddrPortFrom(netip.MustParseAddr("10.30.0.2"), port))
		}}
	}
	_, srv := dialWith(t, dialer(5000), l, mint(t, net.UDPAddrFromAddrPort(srvAddr), withTimeout(30)))
	_, other := dialWith(t, dialer(5001), l, mint(t, net.UDPAddrFromAddrPort(srvAddr), withTimeout(30), withClientID(2)))
	_, blocker := dialWith(t, dialer(5002), l, mint(t, net.UDPAddrFromAddrPort(srvAddr), withTimeout(30), withClientID(3)))

	sock.shut()
	// Someone's write (a keep-alive or this one) now waits in the socket;
	// srv's Writes queue until the queue is full, then wait.
	go blocker.Write([]byte("held in the socket"))
	synctest.Wait()
	errc := make(chan error, 1)
	go func() {
		for {
			if _, err := srv.Write(make([]byte, 100)); err != nil {
				errc <- err
				return
			}
		}
	}()
	synctest.Wait()
	require.Empty(t, errc, "the Write waits for room")

	// The Listener is not held up: another connection's Write on the full
	// queue waits on its own deadline, and Stats answers.
	require.NoError(t, other.SetWriteDeadline(time.Now().Add(time.Second)))
	_, err = other.Write([]byte("x"))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	_ = l.Stats()

	switch how {
	case "deadline":
		require.NoError(t, srv.SetWriteDeadline(time.Now().Add(time.Second)))
		require.ErrorIs(t, <-errc, os.ErrDeadlineExceeded)
		require.NoError(t, srv.SetWriteDeadline(time.Time{}))
	case "close":
		closed := make(chan error, 1)
		go func() { closed <- srv.Close() }()
		synctest.Wait()
		require.Len(t, closed, 1, "Close returned with the socket still held")
		require.NoError(t, <-closed)
		err := <-errc
		require.ErrorIs(t, err, net.ErrClosed, "the waiting Write ended with the Conn: %v", err)
		var opErr *net.OpError
		require.True(t, errors.As(err, &opErr))
		require.Equal(t, "write", opErr.Op)
	}
	sock.open()
	synctest.Wait()
}

// TestDialedCloseEndsWaitingWrites: a dialed Conn's Close ends at once
// the Writes waiting for their turn behind a write held in the socket,
// and waits only for that one write, so that its disconnect packets
// follow it.
func TestDialedCloseEndsWaitingWrites(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := netsim.New(1, netsim.Config{})
		defer nw.Close()
		srvAddr := netip.MustParseAddrPort("10.31.0.1:40000")
		pc, err := nw.Listen(srvAddr)
		require.NoError(t, err)
		l, err := netcode.NewListener(pc, &netcode.ServerConfig{ProtocolID: testProtocolID, PrivateKey: testKey})
		require.NoError(t, err)
		defer l.Close()
		var sock *gateConn
		d := &netcode.Dialer{ListenPacket: func(_ context.Context, _, _ string) (net.PacketConn, error) {
			cpc, err := nw.Listen(netip.MustParseAddrPort("10.31.0.2:5000"))
			sock = newGateConn(cpc)
			return sock, err
		}}
		cli, srv := dialWith(t, d, l, mint(t, net.UDPAddrFromAddrPort(srvAddr)))

		sock.shut()
		const waiting = 4
		wrote := make(chan error, 1+waiting)
		for range 1 + waiting { // one held in the socket, the rest waiting for it
			go func() {
				_, err := cli.Write([]byte("x"))
				wrote <- err
			}()
		}
		synctest.Wait()
		require.Empty(t, wrote, "one Write is in the socket, the others wait")
		closed := make(chan error, 1)
		go func() { closed <- cli.Close() }()
		synctest.Wait()
		require.Len(t, wrote, waiting, "Close ended the waiting Writes")
		for range waiting {
			require.ErrorIs(t, <-wrote, net.ErrClosed)
		}
		require.Empty(t, closed, "Close waits for the write in the socket")
		sock.open()
		synctest.Wait()
		require.NoError(t, <-closed)
		require.NoError(t, <-wrote, "the held Write went")
		_, err = cli.Write([]byte("after"))
		require.ErrorIs(t, err, net.ErrClosed)
		// The server heard the payload, then the disconnect.
		buf := make([]byte, 16)
		n, err := srv.Read(buf)
		require.NoError(t, err)
		require.Equal(t, "x", string(buf[:n]))
		_, err = srv.Read(buf)
		require.ErrorIs(t, err, io.EOF)
	})
}
