package netcode_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/internal/testing/netsim"
	"github.com/gonetcode/netcode/internal/testing/stacks"
	"github.com/gonetcode/netcode/internal/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Where a dialed Conn's goroutines show in their stacks: a Read reading
// the socket itself, the reader parked while Reads do, and the reader
// reading the socket.
const (
	inPull      = "engine.(*Reader).pullOne"
	readerYield = "engine.socketTurn.Yield"
	readerLoop  = "netcode.(*dialConn).readLoop"
)

// onEachPath runs test over real UDP on each of families (its network and
// address), with the sockets made meanwhile on each path of the transport.
func onEachPath(t *testing.T, test func(t *testing.T, network, addr string)) {
	for _, p := range transport.Paths {
		for _, f := range families {
			t.Run(fmt.Sprint(p, "/", f.name), func(t *testing.T) {
				defer transport.ForcePath(transport.ForcePath(p))
				test(t, f.network, f.addr)
			})
		}
	}
}

// waitFor waits until a goroutine is in state with every one of fns in
// its stack.
func waitFor(t *testing.T, state string, fns ...string) {
	t.Helper()
	require.Eventually(t, func() bool { return stacks.Blocked(state, fns...) },
		10*time.Second, time.Millisecond, "no goroutine %s in %v", state, fns)
}

// TestReadPullsFromSocket, over real UDP, IPv4 and IPv6, on every path of
// the transport: once a dialed Conn's Read has waited for a payload, the
// next Read reads the socket itself while the reader stays parked; a read
// deadline set, or moved, while it reads, and Close, end that Read as
// they end any; once Reads stop, the reader takes the socket back.
func TestReadPullsFromSocket(t *testing.T) {
	onEachPath(t, func(t *testing.T, network, addr string) {
		l := listen(t, network, addr, nil)
		cli, srv := pair(t, l)
		go echoUntilError(srv)
		for i := range 3 {
			send(t, cli, cli, []byte{byte(i)})
		}

		// A payload that arrives while a Read reads the socket.
		got := make(chan []byte, 1)
		go func() {
			b, err := readWithin(t, cli, time.Minute)
			assert.NoError(t, err)
			got <- b
		}()
		waitFor(t, "IO wait", inPull)
		waitFor(t, "select", readerYield, readerLoop)
		_, err := cli.Write([]byte("pulled"))
		require.NoError(t, err)
		require.Equal(t, "pulled", string(<-got))

		checkPullDeadlines(t, cli, cli, inPull, readerLoop, false)

		// Close ends a Read reading the socket.
		send(t, cli, cli, []byte("once more"))
		errc := make(chan error, 1)
		go func() {
			_, err := cli.Read(make([]byte, 100))
			errc <- err
		}()
		waitFor(t, "IO wait", inPull)
		require.NoError(t, cli.Close())
		require.ErrorIs(t, <-errc, net.ErrClosed)
	})
}

// TestPullingConnStaysUp runs a dialed Conn on simulated time whose user
// reads in turns: a Read that waits 10 s for a payload that does not come
// (the keep-alives it reads keep the Conn up), then 10 s of no Read at
// all (the reader takes the keep-alives), with a timeout of 1 s; the Conn
// stays up through both and still echoes.
func TestPullingConnStaysUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := netsim.New(1, netsim.Config{Latency: time.Millisecond})
		defer nw.Close()
		srvAP := netip.MustParseAddrPort("10.7.0.1:40000")
		spc, err := nw.Listen(srvAP)
		require.NoError(t, err)
		l, err := netcode.NewListener(spc, &netcode.ServerConfig{ProtocolID: testProtocolID, PrivateKey: testKey, MaxClients: 4})
		require.NoError(t, err)
		defer l.Close()
		d := netcode.Dialer{ListenPacket: func(context.Context, string, string) (net.PacketConn, error) {
			return nw.Listen(netip.MustParseAddrPort("10.7.1.1:5000"))
		}}
		cli, err := d.DialContext(t.Context(), mint(t, net.UDPAddrFromAddrPort(srvAP), withTimeout(1)))
		require.NoError(t, err)
		defer cli.Close()
		srv, err := l.AcceptConn(t.Context())
		require.NoError(t, err)
		defer srv.Close()
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Go(func() { echoUntilError(srv) })

		echo := func(msg string) {
			_, err := cli.Write([]byte(msg))
			require.NoError(t, err)
			b := make([]byte, 100)
			n, err := cli.Read(b)
			require.NoError(t, err)
			require.Equal(t, msg, string(b[:n]))
		}
		echo("one")
		echo("two")
		require.NoError(t, cli.SetReadDeadline(time.Now().Add(10*time.Second)))
		_, err = cli.Read(make([]byte, 100))
		require.ErrorIs(t, err, os.ErrDeadlineExceeded)
		require.NoError(t, cli.SetReadDeadline(time.Time{}))
		require.NoError(t, cli.Err())
		echo("three")
		time.Sleep(10 * time.Second)
		require.NoError(t, cli.Err())
		require.NoError(t, srv.Err())
		echo("four")
		require.NoError(t, cli.Close())
		require.NoError(t, srv.Close())
	})
}

// TestEchoOnEachPath runs clients with payloads in flight against a
// Listener, over real UDP, IPv4 and IPv6, with every socket on each path
// of the transport: every payload comes back whole.
func TestEchoOnEachPath(t *testing.T) {
	onEachPath(t, func(t *testing.T, network, addr string) {
		const clients, window, rounds = 8, 16, 20
		l := listen(t, network, addr, func(c *netcode.ServerConfig) { c.MaxClients = clients })
		var wg sync.WaitGroup
		defer wg.Wait()
		defer l.Close()
		wg.Go(func() {
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				wg.Go(func() { echoUntilError(c) })
			}
		})
		var cwg sync.WaitGroup
		for i := range clients {
			cwg.Go(func() {
				c, err := netcode.Dial(mint(t, l.Addr(), withClientID(uint64(i+1))))
				if !assert.NoError(t, err) {
					return
				}
				defer c.Close()
				seen := map[string]bool{}
				for r := range rounds {
					for w := range window {
						msg := bytes.Repeat([]byte{byte(i)}, 100)
						copy(msg, fmt.Sprint(r, "/", w))
						_, err := c.Write(msg)
						assert.NoError(t, err)
					}
					for range window {
						b, err := readWithin(t, c, 5*time.Second)
						if !assert.NoError(t, err) {
							return
						}
						assert.Equal(t, byte(i), b[99])
						assert.False(t, seen[string(b)])
						seen[string(b)] = true
					}
				}
			})
		}
		cwg.Wait()
	})
}

// noReadDeadline is a caller's transport whose reads take no deadline.
type noReadDeadline struct{ *net.UDPConn }

func (noReadDeadline) SetReadDeadline(time.Time) error { return errors.ErrUnsupported }

// TestPullWithoutReadDeadlines: over a caller's transport that refuses
// read deadlines, a Read does not read the socket itself (it could not
// be stopped at its deadline): the reader reads it, and Reads, their
// deadlines and Close work as ever.
func TestPullWithoutReadDeadlines(t *testing.T) {
	l := listen(t, "udp4", "127.0.0.1:0", nil)
	d := netcode.Dialer{ListenPacket: func(_ context.Context, network, addr string) (net.PacketConn, error) {
		uc, err := net.ListenUDP(network, nil)
		return noReadDeadline{uc}, err
	}}
	cli, srv := dialWith(t, &d, l, mint(t, l.Addr()))
	go echoUntilError(srv)
	for i := range 5 {
		send(t, cli, cli, []byte{byte(i)})
	}
	require.NoError(t, cli.SetReadDeadline(time.Now().Add(10*time.Millisecond)))
	_, err := cli.Read(make([]byte, 10))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.NoError(t, cli.SetReadDeadline(time.Time{}))
	send(t, cli, cli, []byte("still up"))
	assert.False(t, stacks.Blocked("IO wait", inPull), "no Read reads the socket")
	errc := make(chan error, 1)
	go func() {
		_, err := cli.Read(make([]byte, 10))
		errc <- err
	}()
	waitReading(t, "netcode_test.TestPullWithoutReadDeadlines")
	require.NoError(t, cli.Close())
	require.ErrorIs(t, <-errc, net.ErrClosed)
}

// checkPullDeadlines checks the read deadline of r's Read while it reads
// the socket itself (a goroutine in pullFrame): set before the Read, and
// moved while it waits, the Read ends with a timeout; then, with no Read,
// the socket's reader goroutine (readerFrame) reads again and queues what
// w sends for the next Read. With warm, a payload goes through first each
// time, so that the Read finds the socket's turn as a busy Conn does.
func checkPullDeadlines(t *testing.T, w, r net.Conn, pullFrame, readerFrame string, warm bool) {
	t.Helper()
	for _, move := range []bool{false, true} {
		if warm {
			send(t, w, r, []byte("warm"))
		}
		d := 20 * time.Millisecond
		if move {
			d = time.Hour
		}
		_, errc := readAsync(t, r, d)
		if move {
			waitFor(t, "IO wait", pullFrame)
			require.NoError(t, r.SetReadDeadline(time.Now().Add(10*time.Millisecond)))
		}
		err := <-errc
		require.ErrorIs(t, err, os.ErrDeadlineExceeded, "moved %v", move)
		var ne net.Error
		require.ErrorAs(t, err, &ne)
		require.True(t, ne.Timeout())
	}
	require.NoError(t, r.SetReadDeadline(time.Time{}))
	send(t, w, r, []byte("after the deadlines"))

	// Nobody reads: the reader reads the socket again, and queues what
	// comes for the next Read.
	waitFor(t, "IO wait", readerFrame, "transport.ReadLoopTurns")
	_, err := w.Write([]byte("queued"))
	require.NoError(t, err)
	b, err := readWithin(t, r, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, "queued", string(b))
}
