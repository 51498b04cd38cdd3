package netcode_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/testing/tokentest"
	"github.com/gonetcode/netcode/protocol"
	"github.com/gonetcode/netcode/token"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// closeClients is how many clients the Close tests connect to one Listener.
const closeClients = 4096

// dgram is a datagram and the address it is from or to.
type dgram struct {
	addr netip.AddrPort
	b    []byte
}

// fakeSock is a Listener's socket in memory: the test puts what clients
// send in, and reads back what the Listener sends. Its writes can be held
// (hold), to catch the Listener in the middle of a Close.
type fakeSock struct {
	local  netip.AddrPort
	in     chan dgram
	out    chan dgram // what the Listener sends, while forward is set
	read   chan struct{}
	closed chan struct{}
	once   sync.Once

	forward     atomic.Bool
	disconnects atomic.Int64

	gateMu  sync.Mutex
	gate    chan struct{} // non-nil: writes wait until it is closed
	blocked chan struct{} // closed when a write first waits at the gate
}

func newFakeSock(local netip.AddrPort) *fakeSock {
	s := &fakeSock{
		local:  local,
		in:     make(chan dgram, 64),
		out:    make(chan dgram, 1024),
		read:   make(chan struct{}, 1),
		closed: make(chan struct{}),
	}
	s.forward.Store(true)
	return s
}

func (s *fakeSock) ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error) {
	select {
	case d := <-s.in:
		select {
		case s.read <- struct{}{}:
		default:
		}
		return copy(b, d.b), d.addr, nil
	case <-s.closed:
		return 0, netip.AddrPort{}, net.ErrClosed
	}
}

func (s *fakeSock) WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error) {
	if t, ok := protocol.PeekType(b); ok && t == protocol.Disconnect {
		s.gateMu.Lock()
		gate, blocked := s.gate, s.blocked
		if gate != nil && blocked != nil {
			close(blocked)
			s.blocked = nil
		}
		s.gateMu.Unlock()
		if gate != nil {
			<-gate
		}
		s.disconnects.Add(1)
	}
	if s.forward.Load() {
		s.out <- dgram{addr, append([]byte(nil), b...)}
	}
	return len(b), nil
}

// hold makes writes of disconnect packets wait until the returned release
// is called; blocked is closed when the first one waits.
func (s *fakeSock) hold() (blocked <-chan struct{}, release func()) {
	s.gateMu.Lock()
	defer s.gateMu.Unlock()
	gate, b := make(chan struct{}), make(chan struct{})
	s.gate, s.blocked = gate, b
	return b, func() {
		s.gateMu.Lock()
		s.gate = nil
		s.gateMu.Unlock()
		close(gate)
	}
}

func (s *fakeSock) ReadFrom(b []byte) (int, net.Addr, error) {
	n, a, err := s.ReadFromUDPAddrPort(b)
	return n, net.UDPAddrFromAddrPort(a), err
}

func (s *fakeSock) WriteTo(b []byte, addr net.Addr) (int, error) {
	return s.WriteToUDPAddrPort(b, addr.(*net.UDPAddr).AddrPort())
}

func (s *fakeSock) Close() error {
	s.once.Do(func() { close(s.closed) })
	return nil
}

func (s *fakeSock) LocalAddr() net.Addr                { return net.UDPAddrFromAddrPort(s.local) }
func (s *fakeSock) SetDeadline(t time.Time) error      { return nil }
func (s *fakeSock) SetReadDeadline(t time.Time) error  { return nil }
func (s *fakeSock) SetWriteDeadline(t time.Time) error { return nil }

// Fake clients resend their connection request every handshakeResend, as
// a real client does (the server may drop a challenge when its send queue
// is full: a reader never waits on the socket), and give up after
// handshakeBound with a failure naming the client.
const (
	handshakeResend = 100 * time.Millisecond
	handshakeBound  = 30 * time.Second
)

// handshake completes a connection for client n, whose packets go out by
// send, to a server at srv. recv returns the client's next challenge, or
// nil if none came within the wait it is given: the request is then sent
// again, until handshakeBound has passed. The token never times out: the
// clients send nothing after the handshake.
func handshake(tb testing.TB, srv netip.AddrPort, n int, send func([]byte), recv func(wait time.Duration) []byte) {
	tb.Helper()
	c2s := crypto.Key{0: byte(n), 1: byte(n >> 8), 2: 1}
	s2c := crypto.Key{0: byte(n), 1: byte(n >> 8), 2: 2}
	tok, err := tokentest.GenerateWith(token.Params{
		ProtocolID:     testProtocolID,
		ClientID:       uint64(n + 1),
		PrivateKey:     testKey,
		ServerAddrs:    []netip.AddrPort{srv},
		ExpireSeconds:  300,
		TimeoutSeconds: token.NoTimeout,
	}, uint64(time.Now().Unix()), [crypto.TokenNonceBytes]byte{0: byte(n), 1: byte(n >> 8), 23: 7}, c2s, s2c)
	require.NoError(tb, err)
	ct, err := token.Parse(tok)
	require.NoError(tb, err)
	request := protocol.AppendConnectionRequest(nil, ct.ProtocolID, ct.ExpireTimestamp, &ct.Nonce, ct.PrivateData[:])
	var challenge []byte
	for start, sent := time.Now(), 0; challenge == nil; sent++ {
		if time.Since(start) > handshakeBound {
			tb.Fatalf("client %d: no challenge after %d connection requests over %v", n, sent, handshakeBound)
		}
		send(request)
		challenge = recv(handshakeResend)
	}
	rd := protocol.Reader{ProtocolID: testProtocolID, Allowed: protocol.ClientAccepts}
	var p protocol.Packet
	require.NoError(tb, rd.Read(challenge, uint64(time.Now().Unix()), crypto.NewPacketAEAD(&s2c, testProtocolID), nil, &p))
	require.Equal(tb, protocol.ConnectionChallenge, p.Type)
	send(protocol.AppendResponse(nil, crypto.NewPacketAEAD(&c2s, testProtocolID), 0, p.ChallengeSequence, p.ChallengeToken))
}

// within runs fn and fails the test if it has not returned after a
// generous while: a check that fn is not stuck, not of its speed.
func within(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn()
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: stuck", what)
	}
}

// fakeClientAddr is the address of client n on a fakeSock.
func fakeClientAddr(n int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 98, byte(n >> 8), byte(n)}), 5000)
}

// fillFake connects closeClients clients to l through sock and accepts
// them all.
func fillFake(tb testing.TB, l *netcode.Listener, sock *fakeSock) []*netcode.Conn {
	tb.Helper()
	conns := make([]*netcode.Conn, 0, closeClients)
	for n := range closeClients {
		from := fakeClientAddr(n)
		handshake(tb, sock.local, n, func(b []byte) {
			select {
			case sock.in <- dgram{from, b}:
			case <-time.After(handshakeBound):
				tb.Fatalf("client %d: the Listener read nothing for %v", n, handshakeBound)
			}
		}, func(wait time.Duration) []byte {
			timer := time.NewTimer(wait)
			defer timer.Stop()
			for {
				select {
				case d := <-sock.out:
					if t, ok := protocol.PeekType(d.b); ok && t == protocol.ConnectionChallenge && d.addr == from {
						return d.b
					}
				case <-timer.C:
					return nil
				}
			}
		})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		c, err := l.AcceptConn(ctx)
		cancel()
		require.NoError(tb, err, "client %d", n)
		conns = append(conns, c)
	}
	sock.forward.Store(false)
	return conns
}

// TestListenerCloseWith4096Clients: while a Listener with 4096 clients is
// closing, its 40,960 disconnect packets held up at the socket, another
// Listener in the process serves its client, and the closing one's
// reader still reads and its tables can still be read: nothing holds the
// server's lock across the sends. Every disconnect goes out in the end.
func TestListenerCloseWith4096Clients(t *testing.T) {
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			other := listen(t, f.network, f.addr, nil)
			cli, srv := pair(t, other, withTimeout(30))

			sock := newFakeSock(netip.MustParseAddrPort("10.99.0.1:40000"))
			l, err := netcode.NewListener(sock, &netcode.ServerConfig{ProtocolID: testProtocolID, PrivateKey: testKey, MaxClients: closeClients})
			require.NoError(t, err)
			conns := fillFake(t, l, sock)
			require.Equal(t, closeClients, l.Stats().Connected)

			blocked, release := sock.hold()
			closed := make(chan error, 1)
			go func() { closed <- l.Close() }()
			within(t, "the first disconnect reaching the held socket", func() { <-blocked }) // the disconnects are going out, and cannot

			send(t, cli, srv, []byte("still here"))
			send(t, srv, cli, []byte("and here"))
			var st netcode.ServerStats
			within(t, "Stats while Close sends", func() { st = l.Stats() }) // the server's lock, for reading
			assert.Zero(t, st.Connected, "every client left before the sends")
			select { // a read signalled before
			case <-sock.read:
			default:
			}
			sock.in <- dgram{fakeClientAddr(1), []byte{0x15, 1, 2, 3}}
			within(t, "a read while Close sends", func() { <-sock.read })

			release()
			var closeErr error
			within(t, "Close once the socket is released", func() { closeErr = <-closed })
			require.NoError(t, closeErr)
			assert.Equal(t, int64(closeClients*10), sock.disconnects.Load(), "10 disconnect packets per client")
			for _, c := range conns[:16] {
				_, err := c.Read(make([]byte, 8))
				assert.ErrorIs(t, err, net.ErrClosed)
			}
			send(t, cli, srv, []byte("after"))
		})
	}
}

// BenchmarkListenerClose4096: how long a Listener on a real UDP socket
// takes to Close with 4096 connected clients (each sent 10 disconnect
// packets), the clients being 4096 UDP sockets of the same machine.
func BenchmarkListenerClose4096(b *testing.B) {
	for _, f := range families {
		b.Run(f.name, func(b *testing.B) {
			if f.network == "udp6" {
				requireIPv6(b)
			}
			socks := make([]*net.UDPConn, closeClients)
			for i := range socks {
				pc, err := net.ListenPacket(f.network, f.addr)
				require.NoError(b, err)
				socks[i] = pc.(*net.UDPConn)
				defer pc.Close()
			}
			buf := make([]byte, 2048)
			var total time.Duration
			for range b.N {
				l, err := netcode.Listen(f.network, f.addr, &netcode.ServerConfig{ProtocolID: testProtocolID, PrivateKey: testKey, MaxClients: closeClients})
				require.NoError(b, err)
				srv := netip.MustParseAddrPort(l.Addr().String())
				for n, sock := range socks {
					handshake(b, srv, n, func(p []byte) {
						_, err := sock.WriteToUDPAddrPort(p, srv)
						require.NoError(b, err)
					}, func(wait time.Duration) []byte {
						require.NoError(b, sock.SetReadDeadline(time.Now().Add(wait)))
						for {
							k, _, err := sock.ReadFromUDPAddrPort(buf)
							if errors.Is(err, os.ErrDeadlineExceeded) {
								return nil
							}
							require.NoError(b, err)
							if t, ok := protocol.PeekType(buf[:k]); ok && t == protocol.ConnectionChallenge {
								return buf[:k]
							}
						}
					})
				}
				for range closeClients {
					_, err := l.AcceptConn(context.Background())
					require.NoError(b, err)
				}
				require.Equal(b, closeClients, l.Stats().Connected)
				start := time.Now()
				require.NoError(b, l.Close())
				total += time.Since(start)
				for _, sock := range socks { // empty the buffers for the next round
					_ = sock.SetReadDeadline(time.Now())
					for {
						if _, _, err := sock.ReadFromUDPAddrPort(buf); err != nil {
							break
						}
					}
				}
			}
			b.ReportMetric(float64(total.Nanoseconds())/float64(b.N), "ns/close")
			b.ReportMetric(0, "ns/op") // the handshakes; not the figure
		})
	}
}
