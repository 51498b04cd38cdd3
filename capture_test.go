package netcode_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/internal/msgconn"
	"github.com/gonetcode/netcode/protocol"
	"github.com/gonetcode/netcode/token"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// wirePacket is one datagram the relay carried.
type wirePacket struct {
	toServer bool
	b        []byte
}

// relay is an on-path UDP relay: clients send to its down socket, it
// forwards everything to the server from one up socket (so every session
// through it comes from the same address, as a client that re-dials from
// its own address does), sends the server's answers to the client that
// spoke last, and records every datagram both ways.
type relay struct {
	down, up net.PacketConn
	server   atomic.Pointer[net.UDPAddr]
	blackout atomic.Bool // drop everything, both ways

	mu     sync.Mutex
	client net.Addr
	wire   []wirePacket
	wg     sync.WaitGroup
}

func newRelay(t *testing.T, network, loopback string, server net.Addr) *relay {
	t.Helper()
	down, err := net.ListenPacket(network, loopback)
	require.NoError(t, err)
	up, err := net.ListenPacket(network, loopback)
	require.NoError(t, err)
	r := &relay{down: down, up: up}
	r.setServer(server)
	r.wg.Add(2)
	go r.pump(down, true)
	go r.pump(up, false)
	t.Cleanup(func() {
		down.Close()
		up.Close()
		r.wg.Wait()
	})
	return r
}

func (r *relay) setServer(a net.Addr) { r.server.Store(a.(*net.UDPAddr)) }

func (r *relay) pump(from net.PacketConn, toServer bool) {
	defer r.wg.Done()
	buf := make([]byte, 2048)
	for {
		n, src, err := from.ReadFrom(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if r.blackout.Load() {
			continue
		}
		r.mu.Lock()
		r.wire = append(r.wire, wirePacket{toServer, append([]byte(nil), buf[:n]...)})
		if toServer {
			r.client = src
		}
		client := r.client
		r.mu.Unlock()
		if toServer {
			_, _ = r.up.WriteTo(buf[:n], r.server.Load())
		} else if client != nil {
			_, _ = r.down.WriteTo(buf[:n], client)
		}
	}
}

func (r *relay) captured() []wirePacket {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]wirePacket(nil), r.wire...)
}

// nonceUse is one (direction, sequence) a token's keys sealed a packet
// under: the direction picks the key, the sequence the nonce.
type nonceUse struct {
	toServer bool
	seq      uint64
}

// assertNoNonceReuse decodes every sealed packet on the wire (all but
// connection requests, whose sealed part the backend wrote once) and
// fails on any (direction, sequence) seen twice: a reused nonce.
func assertNoNonceReuse(t *testing.T, wire []wirePacket) int {
	t.Helper()
	seen := map[nonceUse]int{}
	for i, p := range wire {
		typ, ok := protocol.PeekType(p.b)
		require.True(t, ok, "the relay only carried netcode packets")
		if typ == protocol.ConnectionRequest {
			continue
		}
		n := int(p.b[0] >> 4)
		require.True(t, n >= 1 && n <= 8 && len(p.b) > 1+n, "a sealed packet with its sequence")
		var seq uint64
		for j := range n {
			seq |= uint64(p.b[1+j]) << (8 * j)
		}
		u := nonceUse{p.toServer, seq}
		if first, dup := seen[u]; dup {
			t.Errorf("nonce reuse: packet %d (%v, to server %v) repeats the sequence %d of packet %d", i, typ, p.toServer, seq, first)
		}
		seen[u] = i
	}
	return len(seen)
}

// captureToken mints a token that sends the client to the relay while
// the server checks its own address.
func captureToken(t *testing.T, r *relay, server net.Addr, opts ...tokenOpt) []byte {
	t.Helper()
	opts = append([]tokenOpt{func(p *token.Params) {
		p.InternalAddrs = []netip.AddrPort{netip.MustParseAddrPort(server.String())}
	}}, opts...)
	return mint(t, r.down.LocalAddr(), opts...)
}

// session dials tok, trades payloads both ways and returns both ends.
func session(t *testing.T, l *netcode.Listener, tok []byte) (cli, srv *netcode.Conn) {
	t.Helper()
	cli, srv = dialWith(t, &netcode.Dialer{}, l, tok)
	trade(t, cli, srv)
	return cli, srv
}

// trade sends payloads both ways and checks they arrive.
func trade(t *testing.T, cli, srv net.Conn) {
	t.Helper()
	for i := range 10 {
		exchange(t, cli, srv, string([]byte{byte(i), 0xab}))
	}
}

// batchTrade sends batches of payloads both ways, through the batched
// writes package reliable uses, and checks they arrive: each batch one
// GSO train, read before the next is sent.
func batchTrade(t *testing.T, cli, srv *netcode.Conn) {
	t.Helper()
	ps := batchPayloads(40)
	for range 3 {
		for _, c := range [][2]*netcode.Conn{{cli, srv}, {srv, cli}} {
			n, err := writeBatch(t, c[0], ps)
			require.NoError(t, err)
			require.Equal(t, len(ps), n)
			for i := range ps {
				got, err := readWithin(t, c[1], 5*time.Second)
				require.NoError(t, err)
				require.Equal(t, ps[i], got, "payload %d", i)
			}
		}
	}
}

// refused dials tok and requires that no session opens.
func refused(t *testing.T, l *netcode.Listener, tok []byte) {
	t.Helper()
	before := l.Stats()
	c, err := netcode.Dial(tok)
	require.Nil(t, c)
	require.ErrorIs(t, err, netcode.ErrConnectionRequestTimedOut)
	after := l.Stats()
	assert.Equal(t, before.ConnectionsOpened, after.ConnectionsOpened, "no second session")
	assert.Positive(t, after.TokenReuseRefused-before.TokenReuseRefused, "refused as a reused token")
}

// TestNoNonceReuseOnTheWire re-dials one token after every way a session
// can end, captures every datagram on the path, and checks the two
// promises: where the rules refuse a second session none opens, and where
// one opens (a server that forgot the token), no (direction, key,
// sequence) of the first session is sealed again.
func TestNoNonceReuseOnTheWire(t *testing.T) {
	tests := []struct {
		name     string
		sessions int // sessions the token opens
		run      func(t *testing.T, network, addr string) *relay
	}{
		{"redial after a clean close", 1, func(t *testing.T, network, addr string) *relay {
			l := listen(t, network, addr, nil)
			r := newRelay(t, network, addr, l.Addr())
			tok := captureToken(t, r, l.Addr(), withTimeout(1))
			cli, srv := session(t, l, tok)
			require.NoError(t, cli.Close())
			_, err := readWithin(t, srv, 5*time.Second)
			require.ErrorIs(t, err, io.EOF)
			refused(t, l, tok)
			return r
		}},
		{"redial after batched writes", 1, func(t *testing.T, network, addr string) *relay {
			l := listen(t, network, addr, nil)
			r := newRelay(t, network, addr, l.Addr())
			tok := captureToken(t, r, l.Addr(), withTimeout(1))
			cli, srv := session(t, l, tok)
			batchTrade(t, cli, srv)
			trade(t, cli, srv) // Writes after batches take the next sequences
			require.NoError(t, cli.Close())
			_, err := readWithin(t, srv, 5*time.Second)
			require.ErrorIs(t, err, io.EOF)
			refused(t, l, tok)
			return r
		}},
		{"redial after a bulk transfer's batched writes", 1, func(t *testing.T, network, addr string) *relay {
			l := listen(t, network, addr, nil)
			r := newRelay(t, network, addr, l.Addr())
			tok := captureToken(t, r, l.Addr(), withTimeout(1))
			cli, srv := session(t, l, tok)
			msgconn.MarkBulk(cli, 0) // its reads take trains coalesced from now on
			batchTrade(t, cli, srv)
			trade(t, cli, srv)
			require.NoError(t, cli.Close())
			_, err := readWithin(t, srv, 5*time.Second)
			require.ErrorIs(t, err, io.EOF)
			refused(t, l, tok)
			return r
		}},
		{"redial after a timeout", 1, func(t *testing.T, network, addr string) *relay {
			l := listen(t, network, addr, nil)
			r := newRelay(t, network, addr, l.Addr())
			tok := captureToken(t, r, l.Addr(), withTimeout(1))
			cli, srv := session(t, l, tok)
			r.blackout.Store(true)
			_, err := readWithin(t, srv, 5*time.Second)
			require.ErrorIs(t, err, netcode.ErrConnectionTimedOut)
			_, err = readWithin(t, cli, 5*time.Second)
			require.ErrorIs(t, err, netcode.ErrConnectionTimedOut)
			r.blackout.Store(false)
			refused(t, l, tok)
			return r
		}},
		{"redial after a denial", 1, func(t *testing.T, network, addr string) *relay {
			l := listen(t, network, addr, func(c *netcode.ServerConfig) { c.MaxClients = 1 })
			r := newRelay(t, network, addr, l.Addr())
			tok := captureToken(t, r, l.Addr(), withClientID(7))
			filler, fillerSrv := pair(t, l, withClientID(8))
			_, err := netcode.Dial(tok)
			require.ErrorIs(t, err, netcode.ErrConnectionDenied)
			require.NoError(t, filler.Close())
			_, err = readWithin(t, fillerSrv, 5*time.Second)
			require.ErrorIs(t, err, io.EOF)
			// Denied, never connected: the same address may try again.
			before := l.Stats().ConnectionsOpened
			session(t, l, tok)
			assert.Equal(t, before+1, l.Stats().ConnectionsOpened)
			return r
		}},
		{"redial after a history flood", 1, func(t *testing.T, network, addr string) *relay {
			l := listen(t, network, addr, func(c *netcode.ServerConfig) {
				c.MaxClients = 1
				c.TokenRate = 1
				c.TokenExpiry = 16 * time.Second
			})
			r := newRelay(t, network, addr, l.Addr())
			tok := captureToken(t, r, l.Addr(), withTimeout(1))
			cli, srv := session(t, l, tok)
			require.NoError(t, cli.Close())
			_, err := readWithin(t, srv, 5*time.Second)
			require.ErrorIs(t, err, io.EOF)
			// Only connections fill the history: the rest of it, then a
			// flood of requests with new tokens.
			for i := range l.Stats().HistoryLimit - 1 {
				c, s := pair(t, l, withClientID(uint64(500+i)))
				require.NoError(t, c.Close())
				_, err := readWithin(t, s, 5*time.Second)
				require.ErrorIs(t, err, io.EOF)
			}
			flood(t, network, addr, l, 200)
			require.Positive(t, l.Stats().HistoryFull, "the flood found the history full")
			refused(t, l, tok)
			return r
		}},
		{"Close and Listen on the same port at once", 2, func(t *testing.T, network, addr string) *relay {
			bound, control := reservePort(t, network, addr)
			reuse := func(c *netcode.ServerConfig) { c.Socket.Control = control }
			l := listen(t, network, bound, reuse)
			r := newRelay(t, network, addr, l.Addr())
			tok := captureToken(t, r, l.Addr(), withTimeout(2))
			cli, _ := session(t, l, tok)
			require.NoError(t, l.Close())
			_, err := readWithin(t, cli, 5*time.Second)
			require.ErrorIs(t, err, io.EOF)
			l2 := listen(t, network, bound, reuse)
			session(t, l2, tok) // a new server: it does not know the token
			return r
		}},
		{"process restart", 2, func(t *testing.T, network, addr string) *relay {
			bound, _ := reservePort(t, network, addr) // the child sets SO_REUSEADDR too
			srvAddr, err := net.ResolveUDPAddr(network, bound)
			require.NoError(t, err)
			r := newRelay(t, network, addr, srvAddr)
			tok := captureToken(t, r, srvAddr, withTimeout(2))
			for range 2 {
				child := startEchoServer(t, network, bound)
				cli, err := netcode.Dial(tok)
				require.NoError(t, err)
				t.Cleanup(func() { cli.Close() })
				echoTrade(t, cli)
				child.kill() // no disconnect packets: a crash
				_, err = readWithin(t, cli, 5*time.Second)
				require.ErrorIs(t, err, netcode.ErrConnectionTimedOut)
			}
			return r
		}},
	}
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					t.Parallel()
					if f.network == "udp6" {
						requireIPv6(t)
					}
					r := tt.run(t, f.network, f.addr)
					n := assertNoNonceReuse(t, r.captured())
					// 20 payloads and the handshake per session, at least.
					assert.Greater(t, n, 22*tt.sessions, "the capture saw every session's traffic")
				})
			}
		})
	}
}

// flood sends n connection requests with distinct valid tokens from one
// socket, 64 at a time, each batch once the server has handled the last
// (so none is lost in a socket buffer).
func flood(t *testing.T, network, addr string, l *netcode.Listener, n int) {
	t.Helper()
	pc, err := net.ListenPacket(network, addr)
	require.NoError(t, err)
	defer pc.Close()
	start := l.Stats()
	for sent := 0; sent < n; {
		for range min(64, n-sent) {
			pt, err := token.Parse(mint(t, l.Addr(), withClientID(uint64(100_000+sent))))
			require.NoError(t, err)
			req := protocol.AppendConnectionRequest(nil, pt.ProtocolID, pt.ExpireTimestamp, &pt.Nonce, pt.PrivateData[:])
			_, err = pc.WriteTo(req, l.Addr())
			require.NoError(t, err)
			sent++
		}
		require.Eventually(t, func() bool { return handled(l.Stats(), start) == uint64(sent) }, 10*time.Second, time.Millisecond)
	}
}

// handled counts the connection requests the server answered or refused
// since start.
func handled(now, start netcode.ServerStats) uint64 {
	return now.HistoryFull - start.HistoryFull + now.ChallengesSent - start.ChallengesSent +
		now.DeniedSent - start.DeniedSent + now.MappingsFull - start.MappingsFull
}

// reservePort returns a port on network's loopback that the test binds,
// closes and binds again (a server restarting on its address), and the
// SocketConfig.Control hook those sockets need. A port only closed and
// bound again may be taken in between by any socket the OS hands a port to
// (another test's, in parallel, or another process's): bind failed with
// "address already in use" once under load. So a socket on the wildcard
// address holds the port for the test's life with SO_REUSEADDR; the OS hands
// it to no other socket and refuses it to any bind without SO_REUSEADDR,
// while the test's own sockets, which set it (the hook), bind the loopback
// address and receive its datagrams: the more specific binding takes them.
// The wildcard socket never reads; it only keeps the port.
func reservePort(t *testing.T, network, addr string) (bound string, control func(network, address string, c syscall.RawConn) error) {
	t.Helper()
	host := strings.Trim(strings.TrimSuffix(addr, ":0"), "[]")
	wildcard := map[string]string{"udp4": "0.0.0.0:0", "udp6": "[::]:0"}[network]
	lc := net.ListenConfig{Control: reuseAddr}
	pc, err := lc.ListenPacket(context.Background(), network, wildcard)
	require.NoError(t, err)
	_, port, err := net.SplitHostPort(pc.LocalAddr().String())
	require.NoError(t, err)
	if reuseAddr == nil {
		require.NoError(t, pc.Close()) // see port_other_test.go
	} else {
		t.Cleanup(func() { pc.Close() })
	}
	return net.JoinHostPort(host, port), reuseAddr
}

// echoTrade checks that payloads come back from an echo server.
func echoTrade(t *testing.T, cli *netcode.Conn) {
	t.Helper()
	for i := range 10 {
		send(t, cli, cli, []byte{byte(i), 0xcd})
	}
}

// echoServerEnv makes the test binary an echo server (see TestMain): its
// value is "network address".
const echoServerEnv = "NETCODE_TEST_ECHO_SERVER"

type childServer struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func (c *childServer) kill() {
	_ = c.cmd.Process.Kill()
	<-c.done
}

// startEchoServer runs this test binary as an echo server in a process of
// its own, and returns once it listens.
func startEchoServer(t *testing.T, network, addr string) *childServer {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), echoServerEnv+"="+network+" "+addr)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	c := &childServer{cmd: cmd, done: make(chan struct{})}
	ready := make(chan error, 1)
	go func() {
		defer close(c.done)
		var line [64]byte
		n, err := out.Read(line[:])
		if err == nil && !strings.HasPrefix(string(line[:n]), "listening") {
			err = fmt.Errorf("echo server said %q", line[:n])
		}
		ready <- err
		_ = cmd.Wait()
	}()
	t.Cleanup(c.kill)
	require.NoError(t, <-ready)
	return c
}

// runEchoServer is the child process of startEchoServer: it serves until
// it is killed.
func runEchoServer(spec string) {
	network, addr, _ := strings.Cut(spec, " ")
	// The parent holds the port (reservePort): bind it beside that socket.
	cfg := &netcode.ServerConfig{ProtocolID: testProtocolID, PrivateKey: testKey, MaxClients: 8}
	cfg.Socket.Control = reuseAddr
	l, err := netcode.Listen(network, addr, cfg)
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	fmt.Println("listening")
	for {
		c, err := l.Accept()
		if err != nil {
			os.Exit(0)
		}
		go echoUntilError(c)
	}
}
