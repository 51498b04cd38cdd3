package cute

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/gonetcode/netcode/cute/internal/wire"
	"github.com/gonetcode/netcode/internal/testing/race"
	"github.com/gonetcode/netcode/internal/transport"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// families are the real-UDP variants every adapter test runs on.
var families = []struct{ name, network, addr string }{
	{"ipv4", "udp4", "127.0.0.1:0"},
	{"ipv6", "udp6", "[::1]:0"},
}

// ipv6Probe is the one reason a test skips: no IPv6 loopback, decided by a
// plain socket, never by the code under test.
var ipv6Probe = sync.OnceValue(func() error {
	pc, err := net.ListenPacket("udp6", "[::1]:0")
	if err == nil {
		pc.Close()
	}
	return err
})

const testApp = 0x5eed

// server is a listening test server with its key.
type server struct {
	*Listener
	sk SecretKey
}

// bare is the edit of a listen whose Conns speak the bare protocol layer.
func bare(c *ServerConfig) { c.BareProtocol = true }

func listen(t *testing.T, network, addr string, edit func(*ServerConfig)) *server {
	t.Helper()
	if network == "udp6" && ipv6Probe() != nil {
		t.Skip("no IPv6 loopback on this machine:", ipv6Probe())
	}
	pk, sk := GenerateKeyPair()
	cfg := &ServerConfig{ApplicationID: testApp, PublicKey: pk, SecretKey: sk}
	if edit != nil {
		edit(cfg)
	}
	l, err := Listen(network, addr, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	return &server{l, sk}
}

// token mints a token for s, edited by edit.
func (s *server) token(t *testing.T, clientID uint64, edit func(*TokenParams)) []byte {
	t.Helper()
	p := TokenParams{
		ApplicationID: testApp,
		ClientID:      clientID,
		SecretKey:     s.sk,
		ServerAddrs:   []netip.AddrPort{s.Addr().(*net.UDPAddr).AddrPort()},
		UserData:      [UserDataBytes]byte{'h', 'i', 255: 7},
	}
	if edit != nil {
		edit(&p)
	}
	tok, err := GenerateToken(&p)
	require.NoError(t, err)
	return tok
}

// pair dials s and accepts, returning both ends, speaking the bare
// protocol layer if s does.
func pair(t *testing.T, s *server, clientID uint64) (cli, srv *Conn) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := Dialer{BareProtocol: s.cfg.BareProtocol}
	cli, err := d.DialContext(ctx, s.token(t, clientID, nil))
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	srv, err = s.AcceptConn(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { srv.Close() })
	return cli, srv
}

func echo(t testing.TB, from, to *Conn, msg, buf []byte) {
	if _, err := from.Write(msg); err != nil {
		t.Fatal(err)
	}
	n, err := to.Read(buf)
	if err != nil || n != len(msg) {
		t.Fatalf("read %d, %v", n, err)
	}
}

// TestEndToEnd (bare protocol layer): a client connects over real UDP, payloads of every size
// class cross both ways intact and in order, the token's client id and
// user data reach the server (from the right offset), and each side's
// Close reaches the other as io.EOF.
func TestEndToEnd(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			s := listen(t, f.network, f.addr, bare)
			cli, srv := pair(t, s, 77)
			assert.Equal(t, uint64(77), srv.ClientID())
			assert.Equal(t, uint64(77), cli.ClientID(), "from CONNECTION_ACCEPTED")
			assert.Equal(t, DefaultMaxClients, cli.MaxClients())
			ud := srv.UserData()
			assert.Equal(t, [UserDataBytes]byte{'h', 'i', 255: 7}, ud)
			assert.Equal(t, cli.LocalAddr().(*net.UDPAddr).Port, srv.RemoteAddr().(*net.UDPAddr).Port)
			assert.Equal(t, s.Addr().String(), cli.RemoteAddr().String())

			buf := make([]byte, MaxPayloadBytes)
			for _, n := range []int{0, 1, 100, MaxPayloadBytes} {
				msg := make([]byte, n)
				for i := range msg {
					msg[i] = byte(i + n)
				}
				for _, dir := range [][2]*Conn{{cli, srv}, {srv, cli}} {
					_, err := dir[0].Write(msg)
					require.NoError(t, err)
					got, err := dir[1].Read(buf)
					require.NoError(t, err)
					require.Equal(t, msg, buf[:got])
				}
			}
			_, err := cli.Write(make([]byte, MaxPayloadBytes+1))
			require.ErrorIs(t, err, ErrPayloadTooLarge)

			// In order, many at once.
			for i := range 100 {
				_, err := cli.Write([]byte{byte(i)})
				require.NoError(t, err)
			}
			for i := range 100 {
				n, err := srv.Read(buf)
				require.NoError(t, err)
				require.Equal(t, []byte{byte(i)}, buf[:n])
			}

			require.NoError(t, cli.Close())
			_, err = srv.Read(buf)
			require.ErrorIs(t, err, io.EOF, "the client's DISCONNECT")
			assert.Equal(t, io.EOF, srv.Err())
		})
	}
}

// TestServerCloseIsEOF: the server closing a Conn, or the whole Listener,
// ends the client's Conn with io.EOF; Accept then fails with net.ErrClosed.
func TestServerCloseIsEOF(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			s := listen(t, f.network, f.addr, nil)
			cli1, srv1 := pair(t, s, 1)
			cli2, _ := pair(t, s, 2)
			buf := make([]byte, 16)
			require.NoError(t, srv1.Close())
			_, err := cli1.Read(buf)
			require.ErrorIs(t, err, io.EOF)
			require.NoError(t, s.Close())
			_, err = cli2.Read(buf)
			require.ErrorIs(t, err, io.EOF)
			_, err = s.Accept()
			require.ErrorIs(t, err, net.ErrClosed)
			require.ErrorIs(t, s.Close(), net.ErrClosed)
		})
	}
}

// TestDeadlinesAndClose: deadlines fail with os.ErrDeadlineExceeded and
// keep the queued payload; after Close every call fails with net.ErrClosed;
// errors name both ends.
func TestDeadlinesAndClose(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			s := listen(t, f.network, f.addr, bare)
			cli, srv := pair(t, s, 5)
			buf := make([]byte, 16)
			for _, c := range []*Conn{cli, srv} {
				require.NoError(t, c.SetReadDeadline(time.Now().Add(-time.Second)))
				_, err := c.Read(buf)
				require.ErrorIs(t, err, os.ErrDeadlineExceeded)
				var ne net.Error
				require.True(t, errors.As(err, &ne) && ne.Timeout())
				var oe *net.OpError
				require.True(t, errors.As(err, &oe))
				assert.Equal(t, c.RemoteAddr(), oe.Addr, "the error names the peer")
				require.NoError(t, c.SetWriteDeadline(time.Now().Add(-time.Second)))
				_, err = c.Write([]byte("x"))
				require.ErrorIs(t, err, os.ErrDeadlineExceeded)
				require.NoError(t, c.SetDeadline(time.Time{}))
			}
			_, err := cli.Write([]byte("kept"))
			require.NoError(t, err)
			require.NoError(t, srv.SetReadDeadline(time.Now().Add(-time.Second)))
			require.Eventually(t, func() bool { return srv.m.Err() == nil }, time.Second, time.Millisecond)
			require.NoError(t, srv.SetReadDeadline(time.Time{}))
			n, err := srv.Read(buf)
			require.NoError(t, err)
			require.Equal(t, "kept", string(buf[:n]))

			requireClosedAtClose(t, srv)
		})
	}
}

// requireClosedAtClose closes c and checks that a Read blocked then, and
// every later call, fail with net.ErrClosed.
func requireClosedAtClose(t *testing.T, c *Conn) {
	t.Helper()
	buf := make([]byte, 16)
	errc := make(chan error, 1)
	go func() { _, err := c.Read(buf); errc <- err }()
	require.NoError(t, c.Close())
	require.ErrorIs(t, <-errc, net.ErrClosed)
	_, err := c.Write([]byte("x"))
	require.ErrorIs(t, err, net.ErrClosed)
	_, err = c.Read(buf)
	require.ErrorIs(t, err, net.ErrClosed)
	require.ErrorIs(t, c.Close(), net.ErrClosed)
	require.ErrorIs(t, c.SetDeadline(time.Now()), net.ErrClosed)
}

// TestDialRefusals: each failure state of the client comes back as its
// sentinel, wrapped in an error that names the server.
func TestDialRefusals(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			s := listen(t, f.network, f.addr, func(c *ServerConfig) { c.MaxClients = 1 })
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()

			_, err := DialContext(ctx, []byte("short"))
			require.ErrorIs(t, err, ErrInvalidConnectToken)

			// An expired token fails with the sentinel its text names.
			_, err = DialContext(ctx, s.token(t, 1, func(p *TokenParams) {
				p.Now = time.Now().Add(-time.Hour)
				p.ExpireSeconds = 10
			}))
			require.ErrorIs(t, err, ErrConnectTokenExpired)
			require.NotErrorIs(t, err, ErrInvalidConnectToken)

			d := Dialer{ApplicationID: testApp + 1}
			_, err = d.DialContext(ctx, s.token(t, 1, nil))
			require.ErrorIs(t, err, ErrInvalidConnectToken, "another application's token")

			// A server that cannot open the token stays silent.
			other := listen(t, f.network, f.addr, nil)
			tok := other.token(t, 1, func(p *TokenParams) {
				p.ServerAddrs = []netip.AddrPort{s.Addr().(*net.UDPAddr).AddrPort()}
				p.HandshakeTimeoutSeconds = 1
			})
			_, err = DialContext(ctx, tok)
			require.ErrorIs(t, err, ErrConnectionRequestTimedOut)
			assert.Contains(t, err.Error(), "likely causes: the token was already used", "a silent refusal says what may have happened")
			var oe *net.OpError
			require.True(t, errors.As(err, &oe))
			require.Equal(t, s.Addr().String(), oe.Addr.String(), "the error names the server")

			// Full: the one slot is taken.
			pair(t, s, 1)
			_, err = DialContext(ctx, s.token(t, 2, nil))
			require.ErrorIs(t, err, ErrConnectionDenied)

			// The context ends a handshake that gets no answer.
			silent, err := net.ListenPacket(f.network, f.addr)
			require.NoError(t, err)
			defer silent.Close()
			tok = s.token(t, 3, func(p *TokenParams) {
				p.ServerAddrs = []netip.AddrPort{silent.LocalAddr().(*net.UDPAddr).AddrPort()}
			})
			short, cancel2 := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel2()
			_, err = DialContext(short, tok)
			require.ErrorIs(t, err, context.DeadlineExceeded)
			require.ErrorIs(t, err, ErrConnectionRequestTimedOut)
			assert.Contains(t, err.Error(), "likely causes")
		})
	}
}

// TestAttackTokenReuse: a captured token replayed from another socket,
// while its connection is up and after it closed, never connects: the
// shared history remembers it until it expires.
func TestAttackTokenReuse(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			s := listen(t, f.network, f.addr, nil)
			tok := s.token(t, 9, func(p *TokenParams) { p.HandshakeTimeoutSeconds = 1 })
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cli, err := DialContext(ctx, tok)
			require.NoError(t, err)
			srv, err := s.AcceptConn(ctx)
			require.NoError(t, err)

			_, err = DialContext(ctx, tok) // while connected
			require.ErrorIs(t, err, ErrConnectionRequestTimedOut)
			require.NoError(t, cli.Close())
			_, err = srv.Read(make([]byte, 8))
			require.ErrorIs(t, err, io.EOF)
			_, err = DialContext(ctx, tok) // after the connection ended
			require.ErrorIs(t, err, ErrConnectionRequestTimedOut)
			assert.NotZero(t, s.Stats().TokenReplayed)
			assert.Zero(t, s.Stats().Connected)
		})
	}
}

// TestAttackPendingBound: a flood of valid connect token packets from many
// addresses fills the bounded handshake table, which refuses the rest and
// counts them, without touching a live connection; the handshakes expire.
func TestAttackPendingBound(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			s := listen(t, f.network, f.addr, func(c *ServerConfig) { c.MaxPending = 4 })
			cli, srv := pair(t, s, 1)
			var socks []net.PacketConn
			for i := range 12 {
				pc, err := net.ListenPacket(f.network, f.addr)
				require.NoError(t, err)
				defer pc.Close()
				socks = append(socks, pc)
				tok := s.token(t, uint64(100+i), func(p *TokenParams) { p.HandshakeTimeoutSeconds = 1 })
				_, err = pc.WriteTo(tok[wire.RESTBytes:], s.Addr())
				require.NoError(t, err)
			}
			require.Eventually(t, func() bool { return s.Stats().PendingFull >= 8 }, 5*time.Second, 5*time.Millisecond,
				"stats %+v", s.Stats())
			assert.LessOrEqual(t, s.Stats().Pending, 4)
			buf := make([]byte, 8)
			echo(t, cli, srv, []byte("alive"), buf)
			echo(t, srv, cli, []byte("alive"), buf)
			require.Eventually(t, func() bool { return s.Stats().Pending == 0 }, 5*time.Second, 10*time.Millisecond,
				"handshakes expire by their handshake timeout")
			assert.NotZero(t, s.Stats().PendingExpired)
			_ = socks
		})
	}
}

// TestSteadyStateAllocations: once connected, a payload costs no
// allocation on either side (counted for the whole process, so the read
// loops, writers and updaters are included).
func TestSteadyStateAllocations(t *testing.T) {
	race.Skip(t)
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			s := listen(t, f.network, f.addr, bare)
			cli, srv := pair(t, s, 1)
			msg := make([]byte, 100)
			buf := make([]byte, MaxPayloadBytes)
			round := func() { echo(t, cli, srv, msg, buf); echo(t, srv, cli, msg, buf) }
			for range 200 {
				round()
			}
			allocs := testing.AllocsPerRun(2000, round)
			t.Logf("%.3f allocations per round trip (2 payload packets)", allocs)
			require.Less(t, allocs, 0.1, "timers and keepalives may allocate now and then")
		})
	}
}

// TestManyClients: several clients at once through one Listener, each
// echoed by the server, with -race.
func TestManyClients(t *testing.T) {
	s := listen(t, "udp4", "127.0.0.1:0", nil)
	var wg sync.WaitGroup
	go func() {
		for {
			c, err := s.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				b := make([]byte, MaxPayloadBytes)
				for {
					n, err := c.Read(b)
					if err != nil {
						return
					}
					if _, err := c.Write(b[:n]); err != nil {
						return
					}
				}
			}()
		}
	}()
	var cw sync.WaitGroup
	for i := range 8 {
		cw.Add(1)
		go func() {
			defer cw.Done()
			cli, err := Dial(s.token(t, uint64(i+1), nil))
			if !assert.NoError(t, err) {
				return
			}
			defer cli.Close()
			b := make([]byte, 64)
			for j := range 50 {
				msg := fmt.Appendf(nil, "%d-%d", i, j)
				_, err := cli.Write(msg)
				require.NoError(t, err)
				n, err := cli.Read(b)
				require.NoError(t, err)
				require.Equal(t, string(msg), string(b[:n]))
			}
		}()
	}
	cw.Wait()
	s.Close()
	wg.Wait()
}

// TestReadShards: a Listener reading several SO_REUSEPORT sockets
// (SocketConfig.ReadShards) serves every client, over IPv4 and IPv6, each
// Conn through the socket that heard its handshake, so that the clients,
// spread by the kernel, are answered from several sockets; Close ends
// every client with io.EOF and stops every reader and writer (goleak).
func TestReadShards(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			s := listen(t, f.network, f.addr, func(c *ServerConfig) { c.Socket.ReadShards = 4 })
			want := 4
			if !transport.ReusePortSupported {
				want = 1
			}
			require.Len(t, s.shards, want)
			const clients = 16
			var clis, srvs []*Conn
			for i := range clients {
				c, srv := pair(t, s, uint64(1+i))
				clis, srvs = append(clis, c), append(srvs, srv)
			}
			buf := make([]byte, 64)
			for i := range clients {
				msg := fmt.Appendf(nil, "shard test %d", i)
				echo(t, clis[i], srvs[i], msg, buf)
				echo(t, srvs[i], clis[i], msg, buf)
			}
			assert.Equal(t, clients, s.ClientCount())
			used := 0
			for _, sh := range s.shards {
				if n, _ := sh.sq.Sent(); n > 0 {
					used++
				}
			}
			if want > 1 {
				// 16 client ports all hashed to one of 4 sockets: 4^-15.
				assert.Greater(t, used, 1, "the clients were answered from one socket only")
			}
			require.NoError(t, s.Close())
			for _, c := range clis {
				_, err := c.Read(buf)
				assert.ErrorIs(t, err, io.EOF)
			}
		})
	}
}

// TestListenRefuses: a zero key, a mismatched pair, a PublicAddr that is
// no address and an impossible slot count are refused before any packet
// is read.
func TestListenRefuses(t *testing.T) {
	pk, sk := GenerateKeyPair()
	pk2, _ := GenerateKeyPair()
	tests := []struct {
		name string
		addr string
		cfg  ServerConfig
		want error
	}{
		{"zero key", "127.0.0.1:0", ServerConfig{}, ErrZeroKey},
		{"mismatched pair", "127.0.0.1:0", ServerConfig{PublicKey: pk2, SecretKey: sk}, ErrKeyMismatch},
		{"unparsable PublicAddr", "127.0.0.1:0", ServerConfig{PublicKey: pk, SecretKey: sk, PublicAddr: "nowhere"}, nil},
		{"too many slots", "127.0.0.1:0", ServerConfig{PublicKey: pk, SecretKey: sk, MaxClients: MaxMaxClients + 1}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := Listen("udp4", tt.addr, &tt.cfg)
			require.Error(t, err)
			require.Nil(t, l)
			if tt.want != nil {
				require.ErrorIs(t, err, tt.want)
			}
		})
	}
}

// TestWildcardListenerAnswersLoopback: a Listener bound to an unspecified
// address, with no PublicAddr, serves tokens that name it by any of the
// machine's addresses at its port, as netcode's does (it was refused).
func TestWildcardListenerAnswersLoopback(t *testing.T) {
	for _, f := range []struct{ name, network, addr, loopback string }{
		{"ipv4", "udp4", "0.0.0.0:0", "127.0.0.1"},
		{"ipv6", "udp6", "[::]:0", "::1"},
	} {
		t.Run(f.name, func(t *testing.T) {
			s := listen(t, f.network, f.addr, nil)
			at := netip.AddrPortFrom(netip.MustParseAddr(f.loopback), s.Addr().(*net.UDPAddr).AddrPort().Port())
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			c, err := DialContext(ctx, s.token(t, 1, func(p *TokenParams) { p.ServerAddrs = []netip.AddrPort{at} }))
			require.NoError(t, err)
			require.NoError(t, c.Close())
		})
	}
}

// TestAcceptQueueFull: a client that connects while the accept queue is
// full is disconnected (its Read sees io.EOF), never left in a slot no
// one can reach; the queued ones stay.
func TestAcceptQueueFull(t *testing.T) {
	s := listen(t, "udp4", "127.0.0.1:0", func(c *ServerConfig) { c.AcceptQueue = 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, err := DialContext(ctx, s.token(t, 1, nil))
	require.NoError(t, err)
	defer first.Close()
	second, err := DialContext(ctx, s.token(t, 2, nil))
	if err == nil { // the server may disconnect it before or after it hears CONNECTED
		defer second.Close()
		_, err = second.Read(make([]byte, 8))
		require.ErrorIs(t, err, io.EOF)
	}
	require.Eventually(t, func() bool { return s.Stats().Connected == 1 }, 5*time.Second, time.Millisecond)
	srv, err := s.AcceptConn(ctx)
	require.NoError(t, err)
	require.Equal(t, uint64(1), srv.ClientID())
	echo(t, first, srv, []byte("still here"), make([]byte, 16))
}

// TestAcceptQueueHoldsEverySlot: with AcceptQueue unset, every slot may
// wait for Accept, as netcode's backlog does: a server of 80 slots, more
// than the 64 the queue held before, keeps all 80 clients that connect
// while no Accept runs (none is disconnected), then hands each over,
// connected. Before, the 65th and later were disconnected as they
// connected.
func TestAcceptQueueHoldsEverySlot(t *testing.T) {
	const clients = 80
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			s := listen(t, f.network, f.addr, func(c *ServerConfig) { c.MaxClients = clients })
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			dialed := make(map[uint64]*Conn, clients)
			for id := uint64(1); id <= clients; id++ {
				c, err := DialContext(ctx, s.token(t, id, nil))
				require.NoError(t, err, "client %d", id)
				defer c.Close()
				dialed[id] = c
			}
			buf := make([]byte, 16)
			for range clients {
				srv, err := s.AcceptConn(ctx)
				require.NoError(t, err)
				c := dialed[srv.ClientID()]
				require.NotNil(t, c, "client %d accepted twice", srv.ClientID())
				delete(dialed, srv.ClientID())
				echo(t, c, srv, []byte("still here"), buf)
				require.NoError(t, srv.Close())
			}
		})
	}
}
