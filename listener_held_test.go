package netcode_test

import (
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/internal/testing/netsim"
	"github.com/stretchr/testify/require"
)

// TestServerHeldLeaveWhenWriterWaits runs a server Conn's held Writes on
// simulated time (a simulated network, in a synctest bubble): a Write made
// while the Conn's read queue still holds a payload is held, and it has
// left the server by the time its writer waits, on whatever it waits (a
// channel, a WaitGroup, a game loop's sleep to its next tick, its next Read),
// with no simulated time passing: the bound of a held Write is its
// writer's next wait, not the Listener's tick nor the Conn's next Read or
// Write. It runs Go code on one thread (GOMAXPROCS 1), where the train's
// dispatch runs only at the writer's wait, so that the Write is seen held
// first.
func TestServerHeldLeaveWhenWriterWaits(t *testing.T) {
	cases := []struct {
		name string
		// wait is what the writer does after its held Write, without
		// writing the Conn again: it blocks until release is closed,
		// others is done, or the Conn is closed.
		wait func(srv *netcode.Conn, release <-chan struct{}, others *sync.WaitGroup)
	}{
		{"on a channel", func(_ *netcode.Conn, release <-chan struct{}, _ *sync.WaitGroup) { <-release }},
		{"on other goroutines", func(_ *netcode.Conn, _ <-chan struct{}, others *sync.WaitGroup) { others.Wait() }},
		{"for a game loop's next tick", func(*netcode.Conn, <-chan struct{}, *sync.WaitGroup) { time.Sleep(16 * time.Millisecond) }},
		{"in its Reads, the second finding the read queue empty", func(srv *netcode.Conn, _ <-chan struct{}, _ *sync.WaitGroup) {
			buf := make([]byte, netcode.MaxPayloadBytes)
			if _, err := srv.Read(buf); err != nil {
				panic(err) // the second payload was queued
			}
			_, _ = srv.Read(buf) // waits until the Conn closes
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
			synctest.Test(t, func(t *testing.T) {
				l, cli, srv := simPair(t)
				defer l.Close()
				defer cli.Close()
				for _, m := range []string{"a", "b"} {
					_, err := cli.Write([]byte(m))
					require.NoError(t, err)
				}
				for srv.Buffered() < 2 {
					time.Sleep(time.Millisecond) // the simulated network's latency
				}

				release := make(chan struct{})
				var others sync.WaitGroup
				others.Add(1)
				start := time.Now()
				held := make(chan int)
				var wg sync.WaitGroup
				wg.Go(func() { // the writer
					buf := make([]byte, netcode.MaxPayloadBytes)
					n, err := srv.Read(buf)
					if err == nil {
						_, err = srv.Write(buf[:n])
					}
					if err != nil {
						panic(err)
					}
					held <- netcode.HeldWrites(srv)
					tc.wait(srv, release, &others)
				})
				require.Equal(t, 1, <-held, "a Write while a payload waits in the read queue is held")
				synctest.Wait() // the writer waits: nothing else can run
				require.Zero(t, netcode.HeldWrites(srv), "the held Write left when its writer waited")
				require.Equal(t, start, time.Now(), "no simulated time passed: no timer, no tick sent it")
				got, err := readWithin(t, cli, time.Second)
				require.NoError(t, err)
				require.Equal(t, "a", string(got))

				close(release)
				others.Done()
				require.NoError(t, srv.Close())
				wg.Wait()
			})
		})
	}
}

// simPair starts a Listener on a simulated network and dials a client to
// it, for a synctest bubble; the caller closes them.
func simPair(t *testing.T) (l *netcode.Listener, cli, srv *netcode.Conn) {
	t.Helper()
	nw := netsim.New(1, netsim.Config{Latency: time.Millisecond})
	t.Cleanup(func() { nw.Close() })
	srvAP := netip.MustParseAddrPort("10.7.0.1:40000")
	spc, err := nw.Listen(srvAP)
	require.NoError(t, err)
	l, err = netcode.NewListener(spc, &netcode.ServerConfig{ProtocolID: testProtocolID, PrivateKey: testKey, MaxClients: 4})
	require.NoError(t, err)
	d := netcode.Dialer{ListenPacket: func(context.Context, string, string) (net.PacketConn, error) {
		return nw.Listen(netip.MustParseAddrPort("10.7.1.1:5000"))
	}}
	cli, err = d.DialContext(t.Context(), mint(t, net.UDPAddrFromAddrPort(srvAP)))
	require.NoError(t, err)
	srv, err = l.AcceptConn(t.Context())
	require.NoError(t, err)
	return l, cli, srv
}

// TestServerHeldWrites, over real UDP, IPv4 and IPv6, on every path of
// the transport: a server Conn's Write made while its read queue holds a
// payload is held, and leaves, in order and before anything that follows
// it, by whichever way out comes first: the Write that finds the read
// queue empty, a Read that finds it empty, WriteBatch (first in its
// train), the Conn's Close or the Listener's (before the disconnects), or
// its writer's next wait. Every case but the last holds with no dispatch
// (NoHeldDispatch), so that only what it names can send.
func TestServerHeldWrites(t *testing.T) {
	cases := []struct {
		name string
		// after, run once the server Conn has read one of two payloads
		// and written "held", makes "held" leave; then the client reads
		// "held" and next.
		after func(t *testing.T, l *netcode.Listener, srv *netcode.Conn)
		next  []string
		end   error // the client's Read after next
	}{
		{"next Write", func(t *testing.T, _ *netcode.Listener, srv *netcode.Conn) {
			_, err := readWithin(t, srv, 5*time.Second)
			require.NoError(t, err)
			_, err = srv.Write([]byte("after"))
			require.NoError(t, err)
			require.Zero(t, netcode.HeldWrites(srv), "held after a Write that found the read queue empty")
		}, []string{"after"}, nil},
		{"Read", func(t *testing.T, _ *netcode.Listener, srv *netcode.Conn) {
			_, err := readWithin(t, srv, 5*time.Second)
			require.NoError(t, err)
			_, err = readWithin(t, srv, time.Millisecond) // nothing comes: it waits, after sending
			require.ErrorIs(t, err, os.ErrDeadlineExceeded)
			require.Zero(t, netcode.HeldWrites(srv), "held after a Read that found the read queue empty")
		}, nil, nil},
		{"WriteBatch", func(t *testing.T, _ *netcode.Listener, srv *netcode.Conn) {
			n, err := writeBatch(t, srv, [][]byte{[]byte("batch0"), []byte("batch1")})
			require.NoError(t, err)
			require.Equal(t, 2, n)
			require.Zero(t, netcode.HeldWrites(srv), "held after a WriteBatch")
		}, []string{"batch0", "batch1"}, nil},
		{"Close", func(t *testing.T, _ *netcode.Listener, srv *netcode.Conn) {
			require.NoError(t, srv.Close())
		}, nil, io.EOF},
		{"Listener Close", func(t *testing.T, l *netcode.Listener, _ *netcode.Conn) {
			require.NoError(t, l.Close())
		}, nil, io.EOF},
		{"writer waits", nil, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			onEachPath(t, func(t *testing.T, network, addr string) {
				if tc.after != nil {
					defer netcode.NoHeldDispatch()()
				}
				l := listen(t, network, addr, nil)
				cli, srv := pair(t, l)
				for _, m := range []string{"a", "b"} {
					_, err := cli.Write([]byte(m))
					require.NoError(t, err)
				}
				require.Eventually(t, func() bool { return srv.Buffered() == 2 }, 5*time.Second, time.Millisecond)
				_, err := readWithin(t, srv, 5*time.Second)
				require.NoError(t, err)
				_, err = srv.Write([]byte("held"))
				require.NoError(t, err)
				if tc.after != nil {
					require.Equal(t, 1, netcode.HeldWrites(srv), "a Write while a payload waits in the read queue")
					tc.after(t, l, srv)
				}
				for _, want := range append([]string{"held"}, tc.next...) {
					got, err := readWithin(t, cli, 5*time.Second)
					require.NoError(t, err)
					require.Equal(t, want, string(got))
				}
				if tc.end != nil {
					_, err = readWithin(t, cli, 5*time.Second)
					require.ErrorIs(t, err, tc.end)
				}
			})
		})
	}
}
