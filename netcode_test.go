package netcode_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/testing/stacks"
	"github.com/gonetcode/netcode/internal/transport"
	"github.com/gonetcode/netcode/token"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv(echoServerEnv); spec != "" {
		runEchoServer(spec) // a child process of TestNoNonceReuseOnTheWire
		return
	}
	// NETCODE_TEST_PATH=mmsg or plain runs every test with the sockets on
	// that path of the transport (the default is the best the system
	// has); the tests that matter most run on each path anyway.
	if p := os.Getenv("NETCODE_TEST_PATH"); p != "" {
		for _, path := range transport.Paths {
			if path.String() == p {
				transport.ForcePath(path)
			}
		}
	}
	goleak.VerifyTestMain(m)
}

const testProtocolID = 0x0102030405060708

var testKey = crypto.Key{0xaa, 0xbb, 0xcc, 1, 2, 3}

// families are the real-UDP variants every feature test runs on.
var families = []struct {
	name, network, addr string
}{
	{"ipv4", "udp4", "127.0.0.1:0"},
	{"ipv6", "udp6", "[::1]:0"},
}

// ipv6Probe is the one reason a real-UDP test may skip: a machine without
// an IPv6 loopback. It is decided by a plain socket, never by the code
// under test.
var ipv6Probe = sync.OnceValue(func() error {
	pc, err := net.ListenPacket("udp6", "[::1]:0")
	if err == nil {
		pc.Close()
	}
	return err
})

// requireIPv6 skips the test on a machine without an IPv6 loopback.
func requireIPv6(t testing.TB) {
	t.Helper()
	if err := ipv6Probe(); err != nil {
		t.Skipf("no IPv6 loopback on this machine: %v", err)
	}
}

func listen(t testing.TB, network, addr string, mod func(*netcode.ServerConfig)) *netcode.Listener {
	t.Helper()
	cfg := &netcode.ServerConfig{ProtocolID: testProtocolID, PrivateKey: testKey, MaxClients: 64}
	if mod != nil {
		mod(cfg)
	}
	if network == "udp6" || strings.HasPrefix(addr, "[") {
		requireIPv6(t)
	}
	l, err := netcode.Listen(network, addr, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return l
}

type tokenOpt func(*token.Params)

func withTimeout(s int32) tokenOpt    { return func(p *token.Params) { p.TimeoutSeconds = s } }
func withExpire(s int64) tokenOpt     { return func(p *token.Params) { p.ExpireSeconds = s } }
func withClientID(id uint64) tokenOpt { return func(p *token.Params) { p.ClientID = id } }

func mint(t testing.TB, addr net.Addr, opts ...tokenOpt) []byte {
	t.Helper()
	p := token.Params{
		ProtocolID:     testProtocolID,
		ClientID:       1,
		PrivateKey:     testKey,
		ExpireSeconds:  30,
		TimeoutSeconds: 5,
	}
	if addr != nil {
		p.ServerAddrs = []netip.AddrPort{netip.MustParseAddrPort(addr.String())}
	}
	copy(p.UserData[:], "hello user data")
	for _, o := range opts {
		o(&p)
	}
	tok, err := token.Generate(&p)
	require.NoError(t, err)
	return tok
}

// pair returns a connected client conn and the server's conn for it.
func pair(t testing.TB, l *netcode.Listener, opts ...tokenOpt) (cli, srv *netcode.Conn) {
	t.Helper()
	return dialWith(t, &netcode.Dialer{}, l, mint(t, l.Addr(), opts...))
}

// send writes msg on from and requires it to be the next payload read on
// to (the same conn, for an echo).
func send(t testing.TB, from, to net.Conn, msg []byte) {
	t.Helper()
	_, err := from.Write(msg)
	require.NoError(t, err)
	got, err := readWithin(t, to, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, msg, got)
}

// echoUntilError writes back every payload c reads, until a read or a
// write fails (the connection ended).
func echoUntilError(c net.Conn) {
	buf := make([]byte, netcode.MaxPayloadBytes)
	for {
		n, err := c.Read(buf)
		if err != nil {
			return
		}
		if _, err := c.Write(buf[:n]); err != nil {
			return
		}
	}
}

func readWithin(t testing.TB, c net.Conn, d time.Duration) ([]byte, error) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(d)))
	buf := make([]byte, netcode.MaxPayloadBytes)
	n, err := c.Read(buf)
	return buf[:n], err
}

func TestEcho(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			l := listen(t, f.network, f.addr, nil)
			cli, srv := pair(t, l, withClientID(77))
			assert.Equal(t, uint64(77), srv.ClientID())
			assert.Equal(t, 64, srv.MaxClients())
			assert.Equal(t, 64, cli.MaxClients())
			assert.Equal(t, srv.ClientIndex(), cli.ClientIndex())
			ud := srv.UserData()
			assert.Equal(t, "hello user data", string(bytes.TrimRight(ud[:], "\x00")))
			// The client's socket is bound to the wildcard address, as a
			// net.UDPConn from net.ListenUDP would be; the port is the same.
			assert.Equal(t, cli.LocalAddr().(*net.UDPAddr).Port, srv.RemoteAddr().(*net.UDPAddr).Port)
			assert.Equal(t, l.Addr().String(), cli.RemoteAddr().String())

			for _, size := range []int{1, 8, 100, 1199, 1200} {
				msg := bytes.Repeat([]byte{byte(size)}, size)
				send(t, cli, srv, msg)
				send(t, srv, cli, msg)
			}
		})
	}
}

func TestWriteSizes(t *testing.T) {
	l := listen(t, "udp4", "127.0.0.1:0", nil)
	cli, srv := pair(t, l)
	for _, c := range []net.Conn{cli, srv} {
		_, err := c.Write(nil)
		assert.ErrorIs(t, err, netcode.ErrEmptyPayload)
		_, err = c.Write(make([]byte, netcode.MaxPayloadBytes+1))
		assert.ErrorIs(t, err, netcode.ErrPayloadTooLarge)
	}
}

func TestReadShortBufferKeepsPayload(t *testing.T) {
	l := listen(t, "udp4", "127.0.0.1:0", nil)
	cli, srv := pair(t, l)
	_, err := cli.Write([]byte("0123456789"))
	require.NoError(t, err)
	require.NoError(t, srv.SetReadDeadline(time.Now().Add(5*time.Second)))
	small := make([]byte, 4)
	_, err = srv.Read(small)
	require.ErrorIs(t, err, io.ErrShortBuffer)
	big := make([]byte, 64)
	n, err := srv.Read(big)
	require.NoError(t, err)
	assert.Equal(t, "0123456789", string(big[:n]))
}

// TestBuffered: Buffered counts the payloads queued for Read, on the
// server's side and on the dialed side.
func TestBuffered(t *testing.T) {
	l := listen(t, "udp4", "127.0.0.1:0", nil)
	cli, srv := pair(t, l)
	for _, c := range []struct {
		name     string
		from, to *netcode.Conn
	}{{"server side", cli, srv}, {"dialed side", srv, cli}} {
		t.Run(c.name, func(t *testing.T) {
			assert.Zero(t, c.to.Buffered())
			for _, p := range []string{"a", "b", "c"} {
				_, err := c.from.Write([]byte(p))
				require.NoError(t, err)
			}
			require.Eventually(t, func() bool { return c.to.Buffered() == 3 }, 5*time.Second, time.Millisecond)
			buf := make([]byte, 8)
			for want := 2; want >= 0; want-- {
				_, err := c.to.Read(buf)
				require.NoError(t, err)
				assert.Equal(t, want, c.to.Buffered())
			}
		})
	}
}

func TestReadDeadline(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			l := listen(t, f.network, f.addr, nil)
			cli, srv := pair(t, l)
			for _, c := range []net.Conn{cli, srv} {
				_, err := readWithin(t, c, 30*time.Millisecond)
				require.ErrorIs(t, err, os.ErrDeadlineExceeded)
				var ne net.Error
				require.ErrorAs(t, err, &ne)
				assert.True(t, ne.Timeout())
				// A deadline in the past fails at once; clearing it blocks again.
				require.NoError(t, c.SetReadDeadline(time.Now().Add(-time.Second)))
				_, err = c.Read(make([]byte, 10))
				require.ErrorIs(t, err, os.ErrDeadlineExceeded)
				require.NoError(t, c.SetReadDeadline(time.Time{}))
			}
			// A deadline extended while a Read is blocked takes effect.
			done := make(chan error, 1)
			require.NoError(t, srv.SetReadDeadline(time.Now().Add(time.Hour)))
			go func() {
				_, err := srv.Read(make([]byte, 10))
				done <- err
			}()
			waitReading(t, "netcode_test.TestReadDeadline")
			require.NoError(t, srv.SetReadDeadline(time.Now().Add(10*time.Millisecond)))
			select {
			case err := <-done:
				require.ErrorIs(t, err, os.ErrDeadlineExceeded)
			case <-time.After(5 * time.Second):
				t.Fatal("Read did not return after the deadline was shortened")
			}
		})
	}
}

// TestExpiredDeadlineKeepsQueuedPayloads: as in package net, a Read after
// the deadline fails even with data waiting, and the data is not lost.
func TestExpiredDeadlineKeepsQueuedPayloads(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			l := listen(t, f.network, f.addr, nil)
			cli, srv := pair(t, l)
			_, err := cli.Write([]byte("queued"))
			require.NoError(t, err)
			// Wait until the payload is queued on the server side.
			buf := make([]byte, 1)
			require.NoError(t, srv.SetReadDeadline(time.Now().Add(5*time.Second)))
			_, err = srv.Read(buf)
			require.ErrorIs(t, err, io.ErrShortBuffer)

			require.NoError(t, srv.SetReadDeadline(time.Now().Add(-time.Second)))
			_, err = srv.Read(make([]byte, 100))
			require.ErrorIs(t, err, os.ErrDeadlineExceeded)

			require.NoError(t, srv.SetReadDeadline(time.Time{}))
			n, err := srv.Read(make([]byte, 100))
			require.NoError(t, err)
			require.Equal(t, len("queued"), n)
		})
	}
}

func TestWriteDeadline(t *testing.T) {
	l := listen(t, "udp4", "127.0.0.1:0", nil)
	cli, _ := pair(t, l)
	require.NoError(t, cli.SetWriteDeadline(time.Now().Add(-time.Second)))
	_, err := cli.Write([]byte("x"))
	require.ErrorIs(t, err, os.ErrDeadlineExceeded)
	require.NoError(t, cli.SetWriteDeadline(time.Time{}))
	_, err = cli.Write([]byte("x"))
	require.NoError(t, err)
}

func TestCloseSemantics(t *testing.T) {
	for _, f := range families {
		t.Run(f.name+"/client closes", func(t *testing.T) {
			l := listen(t, f.network, f.addr, nil)
			cli, srv := pair(t, l, withTimeout(30))
			// Payloads that arrived before the disconnect are still read,
			// then io.EOF (long before the 30 s timeout).
			clientLeaves(t, cli, srv)
		})
		t.Run(f.name+"/server closes", func(t *testing.T) {
			l := listen(t, f.network, f.addr, nil)
			cli, srv := pair(t, l, withTimeout(30))
			require.NoError(t, srv.Close())
			_, err := readWithin(t, cli, 5*time.Second)
			require.ErrorIs(t, err, io.EOF)
			_, err = srv.Read(make([]byte, 10))
			assert.ErrorIs(t, err, net.ErrClosed)
		})
	}
}

// waitReading waits until a goroutine of the test fn is blocked in a
// Conn's Read (waiting in its queue's select, or reading the socket
// itself), so that what the test does next happens to a blocked Read,
// which no fixed sleep can promise.
func waitReading(t *testing.T, fn string) {
	t.Helper()
	require.Eventually(t, func() bool {
		return stacks.Blocked("select", fn, "packetq.(*Queue).read") ||
			stacks.Blocked("IO wait", fn, "msgconn.(*Conn).pullRead")
	}, 10*time.Second, time.Millisecond, "no Read of %s blocked", fn)
}

func TestCloseUnblocksRead(t *testing.T) {
	l := listen(t, "udp4", "127.0.0.1:0", nil)
	for side := range 2 {
		cli, srv := pair(t, l, withClientID(uint64(side+1)))
		c := []net.Conn{cli, srv}[side]
		done := make(chan error, 1)
		go func() {
			_, err := c.Read(make([]byte, 10))
			done <- err
		}()
		waitReading(t, "netcode_test.TestCloseUnblocksRead")
		require.NoError(t, c.Close())
		select {
		case err := <-done:
			assert.ErrorIs(t, err, net.ErrClosed)
		case <-time.After(5 * time.Second):
			t.Fatal("Close did not unblock Read")
		}
	}
}

func TestListenerCloseDisconnectsEveryone(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			l := listen(t, f.network, f.addr, nil)
			var clis []*netcode.Conn
			for i := range 8 {
				c, _ := pair(t, l, withClientID(uint64(i+1)), withTimeout(30))
				clis = append(clis, c)
			}
			acceptErr := make(chan error, 1)
			go func() {
				_, err := l.Accept()
				acceptErr <- err
			}()
			require.NoError(t, l.Close())
			for _, c := range clis {
				_, err := readWithin(t, c, 5*time.Second)
				assert.ErrorIs(t, err, io.EOF)
			}
			assert.ErrorIs(t, <-acceptErr, net.ErrClosed)
			assert.ErrorIs(t, l.Close(), net.ErrClosed)
		})
	}
}

func TestDialErrors(t *testing.T) {
	free := func(t *testing.T) net.Addr {
		// An address nobody answers on: a port held by a socket that never
		// reads, so that no other test's Listener (with the same key) can
		// take it and answer, as one could a port only closed.
		bound, _ := reservePort(t, "udp4", "127.0.0.1:0")
		a, err := net.ResolveUDPAddr("udp4", bound)
		require.NoError(t, err)
		return a
	}
	for _, tc := range []struct {
		name string
		tok  func(t *testing.T) []byte
		want error
	}{
		{"invalid token", func(t *testing.T) []byte { return make([]byte, 2048) }, netcode.ErrInvalidConnectToken},
		{"short token", func(t *testing.T) []byte { return []byte("short") }, netcode.ErrInvalidConnectToken},
		{"request timed out", func(t *testing.T) []byte { return mint(t, free(t), withTimeout(1)) }, netcode.ErrConnectionRequestTimedOut},
		{"token expired", func(t *testing.T) []byte { return mint(t, free(t), withTimeout(5), withExpire(1)) }, netcode.ErrConnectTokenExpired},
		{"denied", func(t *testing.T) []byte {
			l := listen(t, "udp4", "127.0.0.1:0", func(c *netcode.ServerConfig) { c.MaxClients = 1 })
			pair(t, l, withClientID(1))
			return mint(t, l.Addr(), withClientID(2))
		}, netcode.ErrConnectionDenied},
		{"wrong private key", func(t *testing.T) []byte {
			l := listen(t, "udp4", "127.0.0.1:0", func(c *netcode.ServerConfig) { c.PrivateKey = crypto.Key{9} })
			return mint(t, l.Addr(), withTimeout(1))
		}, netcode.ErrConnectionRequestTimedOut},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := netcode.Dial(tc.tok(t))
			require.Nil(t, c)
			require.ErrorIs(t, err, tc.want)
		})
	}
}

func TestDialContextCancel(t *testing.T) {
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer pc.Close() // a server that never answers
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	c, err := netcode.DialContext(ctx, mint(t, pc.LocalAddr()))
	require.Nil(t, c)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestAcceptConnContext(t *testing.T) {
	l := listen(t, "udp4", "127.0.0.1:0", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := l.AcceptConn(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

func TestConcurrentWrites(t *testing.T) {
	l := listen(t, "udp4", "127.0.0.1:0", func(c *netcode.ServerConfig) { c.ReadQueue = 4096 })
	cli, srv := pair(t, l)
	const writers, each = 8, 100
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				_, err := cli.Write([]byte(fmt.Sprintf("%d/%d", w, i)))
				assert.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	seen := map[string]bool{}
	for len(seen) < writers*each {
		got, err := readWithin(t, srv, 5*time.Second)
		require.NoError(t, err, "received %d of %d; %+v", len(seen), writers*each, l.Stats())
		require.False(t, seen[string(got)], "duplicate %q", got)
		seen[string(got)] = true
	}
}

func TestManyClients(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			const n = 64
			l := listen(t, f.network, f.addr, func(c *netcode.ServerConfig) { c.MaxClients = n })
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { // echo server
				defer wg.Done()
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					wg.Add(1)
					go func() {
						defer wg.Done()
						echoUntilError(c)
					}()
				}
			}()
			var cwg sync.WaitGroup
			for i := range n {
				cwg.Add(1)
				go func() {
					defer cwg.Done()
					c, err := netcode.Dial(mint(t, l.Addr(), withClientID(uint64(i+1))))
					if !assert.NoError(t, err) {
						return
					}
					defer c.Close()
					msg := []byte(fmt.Sprintf("client %d", i))
					for range 10 {
						_, err := c.Write(msg)
						assert.NoError(t, err)
						got, err := readWithin(t, c, 5*time.Second)
						if !assert.NoError(t, err) {
							return
						}
						assert.Equal(t, msg, got)
					}
				}()
			}
			cwg.Wait()
			l.Close()
			wg.Wait()
		})
	}
}

func TestListenErrors(t *testing.T) {
	_, err := netcode.Listen("tcp", "127.0.0.1:0", &netcode.ServerConfig{})
	assert.Error(t, err)
	_, err = netcode.Listen("udp4", "127.0.0.1:0", nil)
	assert.Error(t, err)
	_, err = netcode.Listen("udp4", "127.0.0.1:0", &netcode.ServerConfig{MaxClients: -1})
	assert.Error(t, err)
}

// TestServerAddressCheck: a server answers tokens whose internal address
// list names its public or its bound address, and ignores the others, which
// are for other servers. The client always reaches the server at its bound
// loopback address; the internal list is what the server checks.
func TestServerAddressCheck(t *testing.T) {
	public := netip.MustParseAddrPort("192.0.2.1:40000")
	other := netip.MustParseAddrPort("192.0.2.2:40000")
	tests := []struct {
		name     string
		public   string
		internal func(bound netip.AddrPort) netip.AddrPort // nil: the default, the client-facing address
		ok       bool
	}{
		{"bound address, no public address", "", nil, true},
		{"behind NAT: internal names the bound address", public.String(), nil, true},
		{"internal names the public address", public.String(), func(netip.AddrPort) netip.AddrPort { return public }, true},
		{"token for another server", public.String(), func(netip.AddrPort) netip.AddrPort { return other }, false},
		{"token for another server, no public address", "", func(netip.AddrPort) netip.AddrPort { return other }, false},
		{"another port of this host", "", func(b netip.AddrPort) netip.AddrPort { return netip.AddrPortFrom(b.Addr(), b.Port()+1) }, false},
	}
	for _, f := range families {
		for _, tt := range tests {
			t.Run(f.name+"/"+tt.name, func(t *testing.T) {
				l := listen(t, f.network, f.addr, func(c *netcode.ServerConfig) { c.PublicAddr = tt.public })
				bound := netip.MustParseAddrPort(l.Addr().String())
				opts := []tokenOpt{withTimeout(1)}
				if tt.internal != nil {
					opts = append(opts, func(p *token.Params) { p.InternalAddrs = []netip.AddrPort{tt.internal(bound)} })
				}
				c, err := netcode.Dial(mint(t, l.Addr(), opts...))
				if tt.ok {
					require.NoError(t, err)
					c.Close()
					return
				}
				require.ErrorIs(t, err, netcode.ErrConnectionRequestTimedOut)
				assert.Positive(t, l.Stats().AddressNotInToken)
			})
		}
	}
}

func TestWildcardListenerAnswersLoopback(t *testing.T) {
	l := listen(t, "udp4", "0.0.0.0:0", nil)
	port := l.Addr().(*net.UDPAddr).Port
	addr := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}
	c, err := netcode.Dial(mint(t, addr))
	require.NoError(t, err)
	c.Close()
}

func TestErrorsAreNetErrors(t *testing.T) {
	l := listen(t, "udp4", "127.0.0.1:0", nil)
	cli, _ := pair(t, l)
	_, err := readWithin(t, cli, time.Millisecond)
	var op *net.OpError
	require.True(t, errors.As(err, &op))
	assert.Equal(t, "read", op.Op)
}
