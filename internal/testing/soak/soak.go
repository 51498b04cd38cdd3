// Package soak is the adapter-level soak both dialects run (netcode's
// TestSoakNetsim in the root package, cute's TestSoakNetsim in package
// cute): a dialect's real Listener and Dialer, with all their goroutines,
// over an in-memory network with loss, jitter, duplication and
// reordering, or (netcode) over the WebSocket transport; clients that
// connect with fresh tokens, echo, disconnect and reconnect; a server that
// kicks some; and Listener restarts while clients are connected. Every
// session's end, on both sides, is judged by an oracle (Ends) written once
// for both dialects from their error sentinels (Errors).
package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/bridge/transport"
	"github.com/gonetcode/netcode/internal/testing/netsim"
	"github.com/gonetcode/netcode/internal/testing/race"
)

// Clients is how many clients a run has: 64, or 16 under the race
// detector. It makes every goroutine many times slower, and 64 clients'
// traffic (keep-alives 10 times a second each way, the echoes) then needs
// more CPU than a busy 2-core machine gives the test: the process falls
// seconds behind its own traffic, and sessions of a real-time protocol
// with 5 s timeouts time out by the dozen, against the oracle (2 runs in 8
// at load 18; none in 8 with 16 clients, in the same interleaved runs).
// 16 clients keep the concurrency the race detector needs: the restarts
// close live connections, every side still races.
var Clients = map[bool]int{false: 64, true: 16}[race.Enabled]

// Conn is a dialect's connection as the soak uses it.
type Conn interface {
	net.Conn
	ClientID() uint64
}

// Listener is a dialect's Listener as the soak uses it.
type Listener interface {
	// Accept waits for the next client.
	Accept(ctx context.Context) (Conn, error)
	// Connected is the number of clients connected now, and Opened the
	// connections made since the Listener started.
	Connected() int
	Opened() uint64
	// Stats is the Listener's Stats, for the log.
	Stats() any
	Close() error
}

// Errors are a dialect's sentinels for the oracle.
type Errors struct {
	RequestTimedOut  error // no server answered the token
	ResponseTimedOut error // a server challenged the client but never accepted it
	Denied           error
	TokenExpired     error
	InvalidToken     error
	TimedOut         error // the connection fell silent
}

// Dialect is what a dialect gives the soak.
type Dialect struct {
	// Listen serves on pc, with a slot for every client (at least
	// Clients).
	Listen func(pc net.PacketConn) (Listener, error)
	// Token mints a fresh token for the server at addr, with a 5 s
	// timeout and valid for 30 s. It runs on the clients' goroutines.
	Token func(server netip.AddrPort, clientID uint64) ([]byte, error)
	// Dial connects with tok over the transport listenPacket opens.
	Dial func(ctx context.Context, tok []byte, listenPacket func(ctx context.Context, network, laddr string) (net.PacketConn, error)) (Conn, error)
	// MaxMessage is the largest message a Read returns.
	MaxMessage int
	Errors     Errors
}

// End is what the oracle knows when a session ends.
type End struct {
	WS        bool // the client reaches the server over the WebSocket transport (a transport.Mux)
	Restarted bool // the listener was closed (and a new one opened) since the client began dialing, or was closing then
	WSLost    bool // the dial's WebSocket ended from the server's side before the dial did
	Kicked    bool // the server closed this client's conn (client side: its server conn)
	Asked     bool // the client closed its conn (server side)
	Closed    bool // the listener that accepted it was closed (server side)
}

// Rule is one way a session can end: an error (matched with errors.Is)
// on one side in one phase, and the rule that allows it.
type Rule struct {
	Side  string // "dial", "client" (a connected client's Read or Write) or "server" (a server conn's Read)
	Err   error
	Rule  string
	Allow func(e End) bool // nil: never allowed
}

// Ends is the oracle: every way a session can end, with the rule that
// allows it; an end it does not list fails the soak. Some can never
// happen in the soak; they are listed with the reason.
func Ends(e Errors) []Rule {
	return []Rule{
		{"dial", io.EOF, "the listener closed after accepting our response, before its keep-alive reached us: " +
			"its disconnects reached us in sending connection response", func(e End) bool { return e.Restarted }},
		{"dial", e.ResponseTimedOut, "the listener restarted between its challenge and our response: " +
			"the new one cannot open the old one's challenge token (as in the reference), and nothing tells the client", func(e End) bool { return e.Restarted }},
		{"dial", e.RequestTimedOut, "over the WebSocket transport, the listener (and its Mux) closed during the dial, " +
			"or was closing as it began and its Mux admitted the dial's WebSocket just before its Close, " +
			"ending the dial's WebSocket: the client hears nothing more until its timeout; never over UDP, where a new listener is up " +
			"within milliseconds of a Close", func(e End) bool { return e.WS && e.Restarted && e.WSLost }},
		{"dial", e.Denied, "never: there is a slot for every client", nil},
		{"dial", e.TokenExpired, "never: tokens are fresh and valid for 30 s", nil},
		{"dial", e.InvalidToken, "never: tokens are minted valid", nil},
		{"dial", context.DeadlineExceeded, "never: the dial deadline is far beyond the protocol's 5 s timeouts", nil},
		{"client", io.EOF, "the server kicked us, or its listener closed", func(e End) bool { return e.Kicked || e.Restarted }},
		{"client", e.TimedOut, "never: a server that forgets a client says so with disconnect packets", nil},
		{"client", net.ErrClosed, "never: a client closes its conn only after its session", nil},
		{"server", io.EOF, "the client closed its conn", func(e End) bool { return e.Asked }},
		{"server", net.ErrClosed, "the listener closed (a restart, or the end)", func(e End) bool { return e.Closed }},
		{"server", e.TimedOut, "never: a client that leaves says so with disconnect packets", nil},
	}
}

// Judge returns "" if err ends a session on side by a rule of ends, else
// what went wrong; and the rule's error, to count ends by kind.
func Judge(ends []Rule, side string, err error, e End) (bad string, kind error) {
	for _, r := range ends {
		if r.Side != side || !errors.Is(err, r.Err) {
			continue
		}
		if r.Allow != nil && r.Allow(e) {
			return "", r.Err
		}
		return fmt.Sprintf("%s: %v, against the rule %q (%+v)", side, err, r.Rule, e), r.Err
	}
	return fmt.Sprintf("%s: %v, which the oracle does not list", side, err), err
}

// Run is the soak: d's Listener and Dialer over UDP on netsim, or with ws
// over the WebSocket transport, for run (then on until it has done what it
// checks, or a minute more). A quarter in (or, on a slow machine, once a
// client is connected), and every 20 s of a long run, the listener is
// closed while clients are connected and a new one listens on the same
// address. Every session's end is judged by the oracle; every slot must be
// free at the end. The caller's goleak check proves every goroutine
// exited.
func Run(t *testing.T, d Dialect, ws bool, run time.Duration) {
	ends := Ends(d.Errors)
	// The first restart comes early, so that dials stuck by it (see the
	// oracle) end soon after the run; a long run restarts every 20 s.
	const restartEvery = 20 * time.Second
	firstRestart := min(run/4, restartEvery)
	nw := netsim.New(3, netsim.Config{
		Latency:      15 * time.Millisecond,
		Jitter:       10 * time.Millisecond,
		Loss:         0.10,
		Duplicate:    0.05,
		Reorder:      0.05,
		ReorderDelay: 20 * time.Millisecond,
	})
	defer nw.Close()
	srvAP := netip.MustParseAddrPort("10.9.0.1:40000")

	var (
		servers  sync.WaitGroup
		failures = make(chan string, 1024)
		kicks    atomic.Int64
		sessions atomic.Int64
		echoed   atomic.Int64
		nextPort atomic.Uint32
		accepted atomic.Int64
		gen      atomic.Int64 // listener generation: a restart increments it before the Close
		kicked   sync.Map     // client id → true: the server closed its conn
		asked    sync.Map     // client id → true: the client closed its conn
		ended    = map[string]int{}
		endedMu  sync.Mutex
	)
	// up is the generation of the listener surely serving: a restart sets
	// it once the new listener is up (and its Mux is the HTTP server's).
	// While a restart is in progress it lags gen: a dial that begins then
	// may still reach the closing listener, over the transport by a
	// WebSocket that its Mux admits just before its Close ends it.
	var up atomic.Int64
	fail := func(format string, args ...any) {
		select {
		case failures <- fmt.Sprintf(format, args...):
		default:
		}
	}
	judge := func(side string, err error, e End) {
		bad, kind := Judge(ends, side, err, e)
		if bad != "" {
			fail("%s", bad)
			return
		}
		endedMu.Lock()
		ended[fmt.Sprintf("%s: %v", side, kind)]++
		endedMu.Unlock()
	}
	// serve runs one listener: it echoes, and kicks one connection in 50
	// after 20 payloads.
	serve := func(l Listener, closed *atomic.Bool) {
		var conns sync.WaitGroup
		defer conns.Wait()
		for {
			c, err := l.Accept(context.Background())
			if err != nil {
				return
			}
			kick := accepted.Add(1)%50 == 49
			conns.Go(func() {
				defer c.Close()
				buf := make([]byte, d.MaxMessage)
				for j := 0; ; j++ {
					n, err := c.Read(buf)
					if err != nil {
						_, a := asked.Load(c.ClientID())
						judge("server", err, End{Asked: a, Closed: closed.Load()})
						return
					}
					if kick && j == 20 {
						kicked.Store(c.ClientID(), true)
						kicks.Add(1)
						return
					}
					if _, err := c.Write(buf[:n]); err != nil && !errors.Is(err, net.ErrClosed) && !errors.Is(err, io.EOF) {
						fail("server write: %v", err)
						return
					}
				}
			})
		}
	}
	// Over the transport, one HTTP server stays up across restarts and
	// hands its WebSockets to the Mux of the listener of the moment.
	var (
		mux   atomic.Pointer[transport.Mux]
		wsURL string
	)
	if ws {
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mux.Load().Handler().ServeHTTP(w, r)
		}))
		defer hs.Close()
		wsURL = "ws" + strings.TrimPrefix(hs.URL, "http")
	}
	listen := func() (Listener, *atomic.Bool) {
		spc, err := nw.Listen(srvAP)
		require.NoError(t, err)
		if ws {
			m := transport.NewMux(spc, &transport.MuxConfig{})
			mux.Store(m)
			spc = m
		}
		l, err := d.Listen(spc)
		require.NoError(t, err)
		closed := new(atomic.Bool)
		servers.Go(func() { serve(l, closed) })
		return l, closed
	}
	l, closed := listen()

	deadline := time.Now().Add(run)
	giveUp := deadline.Add(time.Minute)
	var renewed atomic.Int64 // sessions whose dial began with a new listener up
	more := func() bool {
		now := time.Now()
		return now.Before(deadline) || now.Before(giveUp) && (sessions.Load() <= int64(Clients) || renewed.Load() == 0)
	}
	var clients sync.WaitGroup
	for i := range Clients {
		clients.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 99))
			for g := 0; more(); g++ {
				port := 10000 + uint16(nextPort.Add(1))
				var lc *lossyConn // the dial's transport, over WebSockets
				listenPacket := func(ctx context.Context, network, laddr string) (net.PacketConn, error) {
					return nw.Listen(netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 9, 1, byte(i)}), port))
				}
				if ws {
					listenPacket = func(ctx context.Context, network, laddr string) (net.PacketConn, error) {
						pc, err := dialTransport(ctx, wsURL)
						if err != nil {
							return nil, err
						}
						lc = &lossyConn{PacketConn: pc, rng: rand.New(rand.NewPCG(uint64(i), uint64(g))), loss: 0.10}
						return lc, nil
					}
				}
				id := uint64(i)<<32 | uint64(g)
				// Not require: it must not run outside the test
				// goroutine. A fresh token for every session.
				tok, err := d.Token(srvAP, id)
				if err != nil {
					fail("client %d gen %d: token: %v", i, g, err)
					return
				}
				g0, up0 := gen.Load(), up.Load()
				// A generous deadline: the rules, not a starved CI
				// machine, decide.
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				c, err := d.Dial(ctx, tok, listenPacket)
				cancel()
				if err != nil {
					// Against up0, not g0: a restart in progress when the
					// dial began counts.
					judge("dial", err, End{WS: ws, Restarted: gen.Load() != up0, WSLost: lc != nil && lc.lost.Load()})
					continue
				}
				sessions.Add(1)
				if up0 > 0 {
					renewed.Add(1)
				}
				msgs := 10 + rng.IntN(60)
				buf := make([]byte, d.MaxMessage)
				var end error
				for m := 0; m < msgs && end == nil; m++ {
					msg := fmt.Appendf(nil, "%d/%d/%d", i, g, m)
					if _, err := c.Write(msg); err != nil {
						end = err
						break
					}
					// Payloads may be lost: wait a little for the echo, not forever.
					_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
					n, err := c.Read(buf)
					switch {
					case err == nil:
						if got := string(buf[:n]); got != string(msg) && !isEcho(got, i, g) {
							fail("client %d got %q for %q", i, got, msg)
						}
						echoed.Add(1)
					case errors.Is(err, os.ErrDeadlineExceeded):
						// The payload or its echo was lost: send the next.
					default:
						end = err
					}
				}
				if end != nil {
					_, k := kicked.Load(id)
					judge("client", end, End{WS: ws, Restarted: gen.Load() != g0, Kicked: k})
				}
				asked.Store(id, true)
				c.Close()
				time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
			}
		})
	}
	clientsDone := make(chan struct{})
	go func() {
		clients.Wait()
		close(clientsDone)
	}()

	// Restart the listener while clients play: Close disconnects its
	// clients, and a new Listen takes the same address.
	restarts, closedLive := 0, 0
	restart := time.NewTimer(firstRestart)
wait:
	for {
		select {
		case <-clientsDone:
			break wait
		case <-restart.C:
			if restarts > 0 && !time.Now().Before(deadline) {
				continue
			}
			live := l.Connected()
			if restarts == 0 && live == 0 {
				// No client is connected yet (a starved machine): the
				// first restart must close some.
				restart.Reset(10 * time.Millisecond)
				continue
			}
			restart.Reset(restartEvery)
			gen.Add(1)
			closed.Store(true)
			require.NoError(t, l.Close())
			l, closed = listen()
			up.Store(gen.Load())
			restarts++
			closedLive += live
		}
	}
	restart.Stop()

	// Every slot frees once the clients' disconnect packets arrive.
	require.Eventually(t, func() bool { return l.Connected() == 0 }, 10*time.Second, 20*time.Millisecond, "slots still taken: %+v", l.Stats())
	closed.Store(true)
	require.NoError(t, l.Close())
	servers.Wait()
	close(failures)
	var all []string
	for f := range failures {
		all = append(all, f)
	}
	t.Logf("%d sessions, %d server kicks, %d echoes, %d listener restarts closing %d live connections; ends %v; netsim %+v; last server %+v",
		sessions.Load(), kicks.Load(), echoed.Load(), restarts, closedLive, ended, nw.Stats(), l.Stats())
	require.Empty(t, all, "sessions ended other than by the rules")
	require.Greater(t, sessions.Load(), int64(Clients))
	require.Positive(t, echoed.Load())
	require.Positive(t, restarts)
	require.Positive(t, closedLive, "no client was connected when the listener closed")
	require.Positive(t, l.Opened(), "no client reconnected to the new listener")
}

// dialTransport opens a WebSocket of the transport to url. A restart
// closes the Mux behind url for a moment, so a failed attempt is retried a
// few times: opening the WebSocket is not part of a session.
func dialTransport(ctx context.Context, url string) (*transport.Conn, error) {
	var err error
	for range 50 {
		var c *transport.Conn
		if c, err = transport.Dial(ctx, url, nil); err == nil {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil, err
}

// lossyConn loses a share of the datagrams a client sends and receives, as
// a lossy network would: a WebSocket itself loses nothing. It records
// whether its WebSocket ended from the server's side (reads failed before
// Close).
type lossyConn struct {
	net.PacketConn
	mu      sync.Mutex
	rng     *rand.Rand
	loss    float64
	closing atomic.Bool // Close was called
	lost    atomic.Bool // a read failed before Close
}

func (c *lossyConn) lose() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rng.Float64() < c.loss
}

func (c *lossyConn) ReadFrom(b []byte) (int, net.Addr, error) {
	for {
		n, a, err := c.PacketConn.ReadFrom(b)
		if err != nil && !c.closing.Load() {
			c.lost.Store(true)
		}
		if err != nil || !c.lose() {
			return n, a, err
		}
	}
}

func (c *lossyConn) Close() error {
	c.closing.Store(true)
	return c.PacketConn.Close()
}

func (c *lossyConn) WriteTo(b []byte, a net.Addr) (int, error) {
	if c.lose() {
		return len(b), nil
	}
	return c.PacketConn.WriteTo(b, a)
}

// isEcho reports whether got is an earlier echo of this client's session
// (a late one, after a read deadline passed).
func isEcho(got string, i, gen int) bool {
	var gi, gg, gm int
	_, err := fmt.Sscanf(got, "%d/%d/%d", &gi, &gg, &gm)
	return err == nil && gi == i && gg == gen
}

// dialectListener is what a dialect's Listener offers the soak: a
// *netcode.Listener or a *cute.Listener.
type dialectListener[C Conn, S any] interface {
	AcceptConn(ctx context.Context) (C, error)
	Stats() S
	Close() error
}

// Adapt makes a Listener of a dialect's, whose Stats say what connected
// and opened read.
func Adapt[C Conn, S any](l dialectListener[C, S], connected func(S) int, opened func(S) uint64) Listener {
	return adapted[C, S]{l, connected, opened}
}

type adapted[C Conn, S any] struct {
	l         dialectListener[C, S]
	connected func(S) int
	opened    func(S) uint64
}

func (a adapted[C, S]) Accept(ctx context.Context) (Conn, error) {
	c, err := a.l.AcceptConn(ctx)
	if err != nil {
		return nil, err
	}
	return c, nil
}
func (a adapted[C, S]) Connected() int { return a.connected(a.l.Stats()) }
func (a adapted[C, S]) Opened() uint64 { return a.opened(a.l.Stats()) }
func (a adapted[C, S]) Stats() any     { return a.l.Stats() }
func (a adapted[C, S]) Close() error   { return a.l.Close() }
