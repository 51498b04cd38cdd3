package netcode_test

import (
	"context"
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

// TestServerHeldLeaveWhenWriterWaits runs a server Conn's held Writes on
// simulated time (a simulated network, in a synctest bubble): a Write made
// while the Conn's read queue still holds a payload is held; if its writer
// then waits on something else than the Conn (a channel, a WaitGroup, a
// game loop's sleep to its next tick), the Listener's fallback sends it
// exactly HeldFallback later, and not before; if a Read of the Conn, the
// writer's own or another goroutine's, finds the read queue empty, that
// Read sends it with no simulated time passing. Without the fallback the
// first three would stay held.
func TestServerHeldLeaveWhenWriterWaits(t *testing.T) {
	cases := []struct {
		name string
		// wait is what the writer does after its held Write, without
		// writing the Conn again: it blocks until release is closed,
		// others is done, or the Conn is closed.
		wait func(srv *netcode.Conn, release <-chan struct{}, others *sync.WaitGroup)
		// after is the simulated time the held Write leaves after it.
		after time.Duration
	}{
		{"on a channel", func(_ *netcode.Conn, release <-chan struct{}, _ *sync.WaitGroup) { <-release }, netcode.HeldFallback},
		{"on other goroutines", func(_ *netcode.Conn, _ <-chan struct{}, others *sync.WaitGroup) { others.Wait() }, netcode.HeldFallback},
		{"for a game loop's next tick", func(*netcode.Conn, <-chan struct{}, *sync.WaitGroup) { time.Sleep(16 * time.Millisecond) }, netcode.HeldFallback},
		{"in its Reads, the second finding the read queue empty", func(srv *netcode.Conn, _ <-chan struct{}, _ *sync.WaitGroup) {
			buf := make([]byte, netcode.MaxPayloadBytes)
			if _, err := srv.Read(buf); err != nil {
				panic(err) // the second payload was queued
			}
			_, _ = srv.Read(buf) // waits until the Conn closes
		}, 0},
		{"on a channel, while a reader goroutine's Reads find the read queue empty", func(srv *netcode.Conn, release <-chan struct{}, _ *sync.WaitGroup) {
			read := make(chan struct{})
			go func() {
				defer close(read)
				buf := make([]byte, netcode.MaxPayloadBytes)
				if _, err := srv.Read(buf); err != nil {
					panic(err) // the second payload was queued
				}
				_, _ = srv.Read(buf) // waits until the Conn closes
			}()
			<-release
			<-read
		}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l, clis, srvs := simConns(t, 1)
				cli, srv := clis[0], srvs[0]
				defer l.Close()
				defer cli.Close()
				sendTwo(t, cli, srv)

				release := make(chan struct{})
				var others sync.WaitGroup
				others.Add(1)
				start := time.Now()
				held := make(chan int)
				var wg sync.WaitGroup
				wg.Go(func() { // the writer
					writeHeld(srv)
					held <- netcode.HeldWrites(srv)
					tc.wait(srv, release, &others)
				})
				require.Equal(t, 1, <-held, "a Write while a payload waits in the read queue is held")
				synctest.Wait() // the writer waits: nothing else can run
				if tc.after > 0 {
					require.Equal(t, 1, netcode.HeldWrites(srv), "held while its writer waits")
					time.Sleep(tc.after - time.Nanosecond)
					synctest.Wait()
					require.Equal(t, 1, netcode.HeldWrites(srv), "held until the fallback")
					time.Sleep(time.Nanosecond)
					synctest.Wait()
				}
				require.Zero(t, netcode.HeldWrites(srv), "the held Write left")
				require.Equal(t, tc.after, time.Since(start), "the simulated time it was held")
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

// TestServerHeldFallbackManyConns holds a Write on each of 64 server
// Conns of one Listener at once, their writers then waiting on a channel:
// one firing of the Listener's fallback, HeldFallback later, sends every
// Conn's, and none leaves before.
func TestServerHeldFallbackManyConns(t *testing.T) {
	const n = 64
	synctest.Test(t, func(t *testing.T) {
		l, clis, srvs := simConns(t, n)
		defer l.Close()
		for i := range n {
			defer clis[i].Close()
			sendTwo(t, clis[i], srvs[i])
		}
		release := make(chan struct{})
		var wg sync.WaitGroup
		start := time.Now()
		for _, srv := range srvs {
			wg.Go(func() {
				writeHeld(srv)
				<-release
			})
		}
		synctest.Wait()
		held := func() (sum int) {
			for _, srv := range srvs {
				sum += netcode.HeldWrites(srv)
			}
			return sum
		}
		require.Equal(t, n, held(), "each Conn holds its Write")
		time.Sleep(netcode.HeldFallback - time.Nanosecond)
		synctest.Wait()
		require.Equal(t, n, held(), "held until the fallback")
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		require.Zero(t, held(), "one firing sent every Conn's")
		require.Equal(t, netcode.HeldFallback, time.Since(start))
		for _, cli := range clis {
			got, err := readWithin(t, cli, time.Second)
			require.NoError(t, err)
			require.Equal(t, "a", string(got))
		}
		close(release)
		wg.Wait()
	})
}

// sendTwo writes "a" and "b" from cli and waits until both are in srv's
// read queue (simulated time).
func sendTwo(t *testing.T, cli, srv *netcode.Conn) {
	t.Helper()
	for _, m := range []string{"a", "b"} {
		_, err := cli.Write([]byte(m))
		require.NoError(t, err)
	}
	for srv.Buffered() < 2 {
		time.Sleep(time.Millisecond) // the simulated network's latency
	}
}

// writeHeld reads srv's first payload and writes it back, held: the
// second is still queued.
func writeHeld(srv *netcode.Conn) {
	buf := make([]byte, netcode.MaxPayloadBytes)
	n, err := srv.Read(buf)
	if err == nil {
		_, err = srv.Write(buf[:n])
	}
	if err != nil {
		panic(err)
	}
}

// simConns starts a Listener on a simulated network and dials n clients
// to it, for a synctest bubble; the caller closes them.
func simConns(t *testing.T, n int) (l *netcode.Listener, clis, srvs []*netcode.Conn) {
	t.Helper()
	nw := netsim.New(1, netsim.Config{Latency: time.Millisecond})
	t.Cleanup(func() { nw.Close() })
	srvAP := netip.MustParseAddrPort("10.7.0.1:40000")
	spc, err := nw.Listen(srvAP)
	require.NoError(t, err)
	l, err = netcode.NewListener(spc, &netcode.ServerConfig{ProtocolID: testProtocolID, PrivateKey: testKey, MaxClients: max(n, 4)})
	require.NoError(t, err)
	for i := range n {
		d := netcode.Dialer{ListenPacket: func(context.Context, string, string) (net.PacketConn, error) {
			return nw.Listen(netip.AddrPortFrom(netip.MustParseAddr("10.7.1.1"), uint16(5000+i)))
		}}
		cli, err := d.DialContext(t.Context(), mint(t, net.UDPAddrFromAddrPort(srvAP), withClientID(uint64(i+1))))
		require.NoError(t, err)
		srv, err := l.AcceptConn(t.Context())
		require.NoError(t, err)
		clis, srvs = append(clis, cli), append(srvs, srv)
	}
	return l, clis, srvs
}

// TestServerHeldWrites, over real UDP, IPv4 and IPv6, on every path of
// the transport: a server Conn's Write made while its read queue holds a
// payload is held, and leaves, in order and before anything that follows
// it, by whichever way out comes first: the Write that finds the read
// queue empty, a Read that finds it empty, WriteBatch (first in its
// train), the Conn's Close or the Listener's (before the disconnects), or
// the Listener's fallback (its writer waiting on something else). Every
// case but the last holds with no fallback (NoHeldDispatch), so that only
// what it names can send.
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
