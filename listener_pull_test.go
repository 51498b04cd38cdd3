package netcode_test

import (
	"context"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/internal/testing/netsim"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Where a Listener's goroutines show in their stacks: a server Conn's
// Read reading the Listener's socket itself, the Listener's reader parked
// while Reads do, and the reader reading the socket.
const (
	inServerPull     = "engine.(*Reader).pullMany"
	serverYield      = "engine.socketTurn.Yield"
	serverReaderLoop = "netcode.(*Listener).readLoop"
)

// readAsync starts a Read of c with deadline d and returns where its
// payload, or its error, will arrive.
func readAsync(t *testing.T, c net.Conn, d time.Duration) (<-chan []byte, <-chan error) {
	got, errc := make(chan []byte, 1), make(chan error, 1)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(d)))
	go func() {
		buf := make([]byte, netcode.MaxPayloadBytes)
		n, err := c.Read(buf)
		if err != nil {
			errc <- err
			return
		}
		got <- buf[:n]
	}()
	return got, errc
}

// pullingRead starts a Read of srv and waits until it reads the
// Listener's socket itself, with the Listener's reader parked.
func pullingRead(t *testing.T, cli, srv net.Conn) (<-chan []byte, <-chan error) {
	t.Helper()
	// A payload read through the reader's hand-off makes the reader
	// give the socket up to Reads.
	send(t, cli, srv, []byte("warm"))
	got, errc := readAsync(t, srv, time.Minute)
	waitFor(t, "IO wait", inServerPull)
	waitFor(t, "select", serverYield, serverReaderLoop)
	return got, errc
}

// TestServerReadPulls, over real UDP, IPv4 and IPv6, on every path of the
// transport: a server Conn's Read reads the Listener's socket itself once
// the reader has handed it a payload, and while it does, it takes in what
// comes for the Listener as the reader would: another client's handshake
// and payloads, which reach that client's Conn. A read deadline set, or
// moved, while it reads, the Conn's Close, the peer's disconnect and the
// Listener's Close end that Read as they end any; once Reads stop, the
// reader takes the socket back.
func TestServerReadPulls(t *testing.T) {
	onEachPath(t, func(t *testing.T, network, addr string) {
		l := listen(t, network, addr, nil)
		cli, srv := pair(t, l)

		// A payload that arrives while the Read reads the socket.
		got, errc := pullingRead(t, cli, srv)
		_, err := cli.Write([]byte("pulled"))
		require.NoError(t, err)
		select {
		case b := <-got:
			require.Equal(t, "pulled", string(b))
		case err := <-errc:
			require.NoError(t, err)
		}

		// Another client connects and sends while srv's Read pulls:
		// its payload reaches its own Conn.
		got, errc = pullingRead(t, cli, srv)
		cli2, srv2 := pair(t, l, withClientID(2))
		send(t, cli2, srv2, []byte("second client"))
		send(t, srv2, cli2, []byte("its echo"))
		_, err = cli.Write([]byte("first client"))
		require.NoError(t, err)
		select {
		case b := <-got:
			require.Equal(t, "first client", string(b))
		case err := <-errc:
			require.NoError(t, err)
		}

		checkPullDeadlines(t, cli, srv, inServerPull, serverReaderLoop, true)

		// The Conn's Close ends a Read reading the socket.
		_, errc = pullingRead(t, cli, srv)
		require.NoError(t, srv.Close())
		require.ErrorIs(t, <-errc, net.ErrClosed)

		// The peer's disconnect ends it with io.EOF.
		_, errc = pullingRead(t, cli2, srv2)
		require.NoError(t, cli2.Close())
		require.ErrorIs(t, <-errc, io.EOF)

		// The Listener's Close ends it.
		cli3, srv3 := pair(t, l, withClientID(3))
		_, errc = pullingRead(t, cli3, srv3)
		require.NoError(t, l.Close())
		require.ErrorIs(t, <-errc, net.ErrClosed)
	})
}

// TestServerPullSeesTimeout runs a Listener on simulated time whose Conn's
// Read reads the socket itself when its client falls silent: the client
// times out (the ticker ends the Conn, with no datagram to wake the
// read), and the Read returns ErrConnectionTimedOut all the same.
func TestServerPullSeesTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := netsim.New(1, netsim.Config{Latency: time.Millisecond})
		defer nw.Close()
		srvAP := netip.MustParseAddrPort("10.7.0.1:40000")
		spc, err := nw.Listen(srvAP)
		require.NoError(t, err)
		l, err := netcode.NewListener(spc, &netcode.ServerConfig{ProtocolID: testProtocolID, PrivateKey: testKey, MaxClients: 4})
		require.NoError(t, err)
		defer l.Close()
		var cpc net.PacketConn
		d := netcode.Dialer{ListenPacket: func(context.Context, string, string) (net.PacketConn, error) {
			cpc, err = nw.Listen(netip.MustParseAddrPort("10.7.1.1:5000"))
			return cpc, err
		}}
		cli, err := d.DialContext(t.Context(), mint(t, net.UDPAddrFromAddrPort(srvAP), withTimeout(1)))
		require.NoError(t, err)
		defer cli.Close()
		srv, err := l.AcceptConn(t.Context())
		require.NoError(t, err)
		defer srv.Close()
		for _, msg := range []string{"one", "two"} {
			_, err := cli.Write([]byte(msg))
			require.NoError(t, err)
			b := make([]byte, 100)
			n, err := srv.Read(b)
			require.NoError(t, err)
			require.Equal(t, msg, string(b[:n]))
		}
		var wg sync.WaitGroup
		defer wg.Wait()
		errc := make(chan error, 1)
		wg.Go(func() {
			_, err := srv.Read(make([]byte, 100))
			errc <- err
		})
		synctest.Wait()
		// The client's socket goes: it sends nothing more, not even
		// its disconnects.
		require.NoError(t, cpc.Close())
		start := time.Now()
		err = <-errc
		assert.ErrorIs(t, err, netcode.ErrConnectionTimedOut)
		assert.Less(t, time.Since(start), 2*time.Second, "the Read ends within the pull's bound of the timeout")
	})
}
