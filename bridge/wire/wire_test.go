package wire_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/bridge/internal/bridgetest"
	"github.com/gonetcode/netcode/bridge/wire"
)

// target is a UDP server on loopback that counts what it receives and
// echoes each datagram to its sender, or not.
type target struct {
	conn  *net.UDPConn
	addr  netip.AddrPort
	echo  bool
	got   atomic.Uint64 // datagrams
	bytes atomic.Uint64
	sent  atomic.Uint64 // bytes echoed

	mu    sync.Mutex
	peers map[netip.AddrPort]int // datagrams by source
	done  chan struct{}
}

func newTarget(t testing.TB, network string, echo bool) *target {
	t.Helper()
	addr := "127.0.0.1:0"
	if network == "udp6" {
		addr = "[::1]:0"
	}
	c := bridgetest.ListenLoopback(t, network, addr)
	tg := &target{conn: c, addr: netip.MustParseAddrPort(c.LocalAddr().String()), echo: echo,
		peers: make(map[netip.AddrPort]int), done: make(chan struct{})}
	go tg.serve()
	t.Cleanup(func() {
		c.Close()
		<-tg.done
	})
	return tg
}

func (tg *target) serve() {
	defer close(tg.done)
	buf := make([]byte, 1<<16)
	for {
		n, from, err := tg.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		tg.got.Add(1)
		tg.bytes.Add(uint64(n))
		tg.mu.Lock()
		tg.peers[from]++
		tg.mu.Unlock()
		if tg.echo {
			if m, err := tg.conn.WriteToUDPAddrPort(buf[:n], from); err == nil {
				tg.sent.Add(uint64(m))
			}
		}
	}
}

// sources returns the addresses datagrams came from.
func (tg *target) sources() []netip.AddrPort {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	var s []netip.AddrPort
	for a := range tg.peers {
		s = append(s, a)
	}
	return s
}

// serveWire serves h over HTTP on network's loopback and returns the
// ws:// prefix of its wire URLs (append the port).
func serveWire(t testing.TB, h http.Handler, network string) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(wire.DefaultPath, h)
	hs := httptest.NewUnstartedServer(mux)
	if network == "tcp6" {
		ln, err := net.Listen("tcp6", "[::1]:0")
		if err != nil {
			t.Skipf("no IPv6 loopback on this machine: %v", err)
		}
		hs.Listener.Close()
		hs.Listener = ln
	}
	hs.Start()
	t.Cleanup(hs.Close)
	return "ws" + strings.TrimPrefix(hs.URL, "http") + wire.DefaultPath
}

func newWire(t testing.TB, cfg wire.Config) *wire.Handler {
	h := wire.NewHandler(&cfg)
	t.Cleanup(func() { h.Close() })
	return h
}

// dial opens a wire session to url, as a Cute web build does: no
// subprotocol.
func dial(t testing.TB, url string) *websocket.Conn {
	t.Helper()
	ws, _, err := websocket.Dial(bridgetest.Ctx(t, 5*time.Second), url, nil)
	require.NoError(t, err)
	ws.SetReadLimit(1 << 17)
	t.Cleanup(func() { ws.CloseNow() })
	return ws
}

func allow(a netip.AddrPort) wire.Range {
	return wire.Range{Addr: a.Addr(), First: a.Port(), Last: a.Port()}
}

func portURL(base string, port uint16) string { return fmt.Sprint(base, port) }

// TestForwards carries datagrams of every size class both ways, unchanged,
// over real UDP and WebSocket on IPv4 and IPv6, and the target sees them
// come from one socket: the session's.
func TestForwards(t *testing.T) {
	for _, network := range []string{"udp4", "udp6"} {
		t.Run(network, func(t *testing.T) {
			tg := newTarget(t, network, true)
			h := newWire(t, wire.Config{Allow: []wire.Range{allow(tg.addr)}})
			base := serveWire(t, h, "tcp"+network[3:])
			ws := dial(t, portURL(base, tg.addr.Port()))
			ctx := bridgetest.Ctx(t, 10*time.Second)
			sizes := []int{0, 1, 100, 1200, 1300, 9000, 65000, wire.MaxUDP4}
			if network == "udp6" {
				sizes = append(sizes, wire.MaxUDP6)
			}
			for i, n := range sizes {
				msg := bytes.Repeat([]byte{byte(i + 1)}, n)
				require.NoError(t, ws.Write(ctx, websocket.MessageBinary, msg))
				typ, got, err := ws.Read(ctx)
				require.NoError(t, err)
				assert.Equal(t, websocket.MessageBinary, typ)
				assert.True(t, bytes.Equal(msg, got), "%d bytes came back as %d", n, len(got))
			}
			assert.Len(t, tg.sources(), 1, "one socket per session")
			bridgetest.Eventually(t, func() bool {
				st := h.Stats()
				return st.DatagramsToBrowser == uint64(len(sizes)) && st.DatagramsToTarget == uint64(len(sizes))
			}, "counted")
			st := h.Stats()
			assert.Equal(t, uint64(len(sizes)), st.DatagramsToTarget)
			assert.Equal(t, uint64(len(sizes)), st.DatagramsToBrowser)
			assert.Equal(t, st.BytesToTarget, st.BytesToBrowser)
			assert.Equal(t, 1, st.Sessions)
		})
	}
}

// TestNotAnOpenProxy: a session reaches only an allowed port. An empty
// allowlist refuses everything; a port outside the ranges, a port on
// another address, and URLs that do not end with a port are refused
// before anything is sent; nothing reaches the targets that were not
// allowed.
func TestNotAnOpenProxy(t *testing.T) {
	allowed := newTarget(t, "udp4", true)
	other := newTarget(t, "udp4", true) // a port nobody allowed
	tests := []struct {
		name   string
		allow  []wire.Range
		path   string
		code   websocket.StatusCode
		status int
	}{
		{"empty allowlist", nil, fmt.Sprint(allowed.addr.Port()), wire.CodeTargetNotAllowed, 0},
		{"port outside", []wire.Range{allow(allowed.addr)}, fmt.Sprint(other.addr.Port()), wire.CodeTargetNotAllowed, 0},
		{"another host's range", []wire.Range{{Addr: netip.MustParseAddr("127.0.0.2"), First: 1, Last: 65535}}, "", 0, 0},
		{"not a port", []wire.Range{allow(allowed.addr)}, "x" + fmt.Sprint(allowed.addr.Port()), 0, http.StatusNotFound},
		{"port 0", []wire.Range{allow(allowed.addr)}, "0", 0, http.StatusNotFound},
		{"port too large", []wire.Range{allow(allowed.addr)}, "65536", 0, http.StatusNotFound},
		{"signed", []wire.Range{allow(allowed.addr)}, "+" + fmt.Sprint(allowed.addr.Port()), 0, http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newWire(t, wire.Config{Allow: tt.allow})
			base := serveWire(t, h, "tcp4")
			if tt.path == "" {
				// Allowed, but on 127.0.0.2: the session reaches that
				// address, never the target on 127.0.0.1.
				ws := dial(t, portURL(base, other.addr.Port()))
				require.NoError(t, ws.Write(bridgetest.Ctx(t, 5*time.Second), websocket.MessageBinary, []byte("x")))
				bridgetest.Eventually(t, func() bool { return h.Stats().DatagramsToTarget == 1 }, "sent")
				return
			}
			ws, resp, err := websocket.Dial(bridgetest.Ctx(t, 5*time.Second), base+tt.path, nil)
			if tt.status != 0 {
				require.Error(t, err)
				require.NotNil(t, resp)
				assert.Equal(t, tt.status, resp.StatusCode)
				assert.Zero(t, h.Stats().SessionsOpened, "refused before a socket was opened")
				return
			}
			require.NoError(t, err)
			defer ws.CloseNow()
			ce := bridgetest.Closed(t, ws, 5*time.Second)
			assert.Equal(t, tt.code, ce.Code)
			assert.Contains(t, ce.Reason, wire.ErrTargetNotAllowed.Error())
			assert.Equal(t, uint64(1), h.Stats().RefusedNotAllowed)
			assert.Zero(t, h.Stats().SessionsOpened, "refused before a socket was opened")
		})
	}
	assert.Zero(t, other.got.Load(), "nothing reached a port outside the allowlist")
	assert.Zero(t, allowed.got.Load(), "nothing reached a refused session's target")
}

// TestRepliesOnlyFromTarget: the session's socket is connected to its
// target; a datagram another socket sends to it is never forwarded, the
// target's are.
func TestRepliesOnlyFromTarget(t *testing.T) {
	for _, network := range []string{"udp4", "udp6"} {
		t.Run(network, func(t *testing.T) {
			tg := newTarget(t, network, true)
			h := newWire(t, wire.Config{Allow: []wire.Range{allow(tg.addr)}})
			ws := dial(t, portURL(serveWire(t, h, "tcp4"), tg.addr.Port()))
			ctx := bridgetest.Ctx(t, 10*time.Second)
			require.NoError(t, ws.Write(ctx, websocket.MessageBinary, []byte("hello")))
			_, got, err := ws.Read(ctx)
			require.NoError(t, err)
			require.Equal(t, "hello", string(got))
			relay := tg.sources()[0]
			stranger := bridgetest.ListenLoopback(t, network, netip.AddrPortFrom(tg.addr.Addr(), 0).String())
			defer stranger.Close()
			for range 10 {
				_, err := stranger.WriteToUDPAddrPort([]byte("spoof"), relay)
				require.NoError(t, err)
			}
			require.NoError(t, ws.Write(ctx, websocket.MessageBinary, []byte("again")))
			_, got, err = ws.Read(ctx)
			require.NoError(t, err)
			assert.Equal(t, "again", string(got), "only the target's datagram came through")
			bridgetest.Eventually(t, func() bool { return h.Stats().DatagramsToBrowser == 2 }, "two forwarded")
		})
	}
}

// TestNoAmplification: bytes out per byte in are at most 1 toward either
// side, counting datagram bytes (what the relay forwards; the transports'
// own framing aside): toward the target, at most what the browser sent
// (here less: the rate cap drops some); toward the browser, at most what
// the target sent. The relay sends nothing of its own to the target.
func TestNoAmplification(t *testing.T) {
	tg := newTarget(t, "udp4", true)
	h := newWire(t, wire.Config{Allow: []wire.Range{allow(tg.addr)}, MaxDatagramsPerSecond: 50})
	ws := dial(t, portURL(serveWire(t, h, "tcp4"), tg.addr.Port()))
	ctx := bridgetest.Ctx(t, 10*time.Second)
	var in, back atomic.Uint64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			_, p, err := ws.Read(ctx)
			if err != nil {
				return
			}
			back.Add(uint64(len(p)))
		}
	}()
	for i := range 300 {
		msg := make([]byte, 1+i*7%1300)
		require.NoError(t, ws.Write(ctx, websocket.MessageBinary, msg))
		in.Add(uint64(len(msg)))
	}
	bridgetest.Eventually(t, func() bool {
		st := h.Stats()
		return st.DatagramsToTarget+st.DroppedRate == 300 && tg.got.Load() == st.DatagramsToTarget &&
			back.Load() == tg.sent.Load()
	}, "every datagram forwarded or dropped, every echo back")
	st := h.Stats()
	assert.Positive(t, st.DroppedRate, "the rate cap dropped the burst's excess")
	assert.LessOrEqual(t, tg.bytes.Load(), in.Load(), "toward the target")
	assert.Equal(t, st.BytesToTarget, tg.bytes.Load())
	assert.LessOrEqual(t, back.Load(), tg.sent.Load(), "toward the browser")
	ws.Close(websocket.StatusNormalClosure, "")
	<-done
}

// TestRateCap: past MaxDatagramsPerSecond (after a second's burst) the
// browser's datagrams are dropped; what passes is bounded by the rate
// over the time taken.
func TestRateCap(t *testing.T) {
	tg := newTarget(t, "udp4", false)
	const rate = 100
	h := newWire(t, wire.Config{Allow: []wire.Range{allow(tg.addr)}, MaxDatagramsPerSecond: rate})
	ws := dial(t, portURL(serveWire(t, h, "tcp4"), tg.addr.Port()))
	ctx := bridgetest.Ctx(t, 10*time.Second)
	start := time.Now()
	const n = 1000
	for range n {
		require.NoError(t, ws.Write(ctx, websocket.MessageBinary, []byte("x")))
	}
	bridgetest.Eventually(t, func() bool {
		st := h.Stats()
		return st.DatagramsToTarget+st.DroppedRate == n
	}, "every datagram forwarded or dropped")
	elapsed := time.Since(start)
	st := h.Stats()
	assert.GreaterOrEqual(t, st.DatagramsToTarget, uint64(rate), "a second's burst passes")
	assert.LessOrEqual(t, float64(st.DatagramsToTarget), rate+1+rate*elapsed.Seconds(), "at most the burst and the rate")
}

// TestCaps: sessions are capped per source address (4020) and in total
// (1013); a slot comes back when its session ends.
func TestCaps(t *testing.T) {
	tg := newTarget(t, "udp4", true)
	h := newWire(t, wire.Config{Allow: []wire.Range{allow(tg.addr)}, MaxSessions: 3, MaxSessionsPerSource: 2})
	v4 := portURL(serveWire(t, h, "tcp4"), tg.addr.Port())
	v6 := portURL(serveWire(t, h, "tcp6"), tg.addr.Port())
	a := dial(t, v4)
	dial(t, v4)
	refused := dial(t, v4)
	ce := bridgetest.Closed(t, refused, 5*time.Second)
	assert.Equal(t, wire.CodeSourceFull, ce.Code)
	assert.Equal(t, wire.ErrSourceFull.Error(), ce.Reason)
	dial(t, v6) // another source
	full := dial(t, v6)
	ce = bridgetest.Closed(t, full, 5*time.Second)
	assert.Equal(t, wire.CodeFull, ce.Code)
	st := h.Stats()
	assert.Equal(t, uint64(1), st.RefusedSourceFull)
	assert.Equal(t, uint64(1), st.RefusedFull)
	bridgetest.Eventually(t, func() bool { return h.Sessions() == 3 }, "three sessions open")
	a.Close(websocket.StatusNormalClosure, "")
	bridgetest.Eventually(t, func() bool { return h.Sessions() == 2 }, "the session ended")
	b := dial(t, v4)
	ctx := bridgetest.Ctx(t, 5*time.Second)
	require.NoError(t, b.Write(ctx, websocket.MessageBinary, []byte("slot")))
	_, got, err := b.Read(ctx)
	require.NoError(t, err)
	assert.Equal(t, "slot", string(got))
}

// TestSessionEnds: the idle timeout (4012), a message over the size bound
// (1009), a text message (1003), a refused origin (HTTP 403) and Close
// (1001).
func TestSessionEnds(t *testing.T) {
	tg := newTarget(t, "udp4", true)
	port := tg.addr.Port()
	t.Run("idle", func(t *testing.T) {
		h := newWire(t, wire.Config{Allow: []wire.Range{allow(tg.addr)}, IdleTimeout: 200 * time.Millisecond})
		ws := dial(t, portURL(serveWire(t, h, "tcp4"), port))
		assert.Equal(t, wire.CodeIdleTimeout, bridgetest.Closed(t, ws, 5*time.Second).Code)
		bridgetest.Eventually(t, func() bool { return h.Stats().IdleTimeouts == 1 }, "counted")
	})
	t.Run("too big", func(t *testing.T) {
		h := newWire(t, wire.Config{Allow: []wire.Range{allow(tg.addr)}, MaxDatagram: 100})
		ws := dial(t, portURL(serveWire(t, h, "tcp4"), port))
		require.NoError(t, ws.Write(bridgetest.Ctx(t, 5*time.Second), websocket.MessageBinary, make([]byte, 101)))
		assert.Equal(t, websocket.StatusMessageTooBig, bridgetest.Closed(t, ws, 5*time.Second).Code)
	})
	t.Run("text", func(t *testing.T) {
		h := newWire(t, wire.Config{Allow: []wire.Range{allow(tg.addr)}})
		ws := dial(t, portURL(serveWire(t, h, "tcp4"), port))
		require.NoError(t, ws.Write(bridgetest.Ctx(t, 5*time.Second), websocket.MessageText, []byte("hi")))
		assert.Equal(t, websocket.StatusUnsupportedData, bridgetest.Closed(t, ws, 5*time.Second).Code)
	})
	t.Run("origin", func(t *testing.T) {
		h := newWire(t, wire.Config{Allow: []wire.Range{allow(tg.addr)}, OriginPatterns: []string{"game.example"}})
		base := portURL(serveWire(t, h, "tcp4"), port)
		for origin, ok := range map[string]bool{"https://evil.example": false, "https://game.example": true} {
			ws, resp, err := websocket.Dial(bridgetest.Ctx(t, 5*time.Second), base, &websocket.DialOptions{HTTPHeader: http.Header{"Origin": {origin}}})
			if ok {
				require.NoError(t, err, origin)
				ws.CloseNow()
				continue
			}
			require.Error(t, err, origin)
			assert.Equal(t, http.StatusForbidden, resp.StatusCode)
		}
		assert.Equal(t, uint64(1), h.Stats().RefusedOrigin)
	})
	t.Run("close", func(t *testing.T) {
		h := wire.NewHandler(&wire.Config{Allow: []wire.Range{allow(tg.addr)}})
		ws := dial(t, portURL(serveWire(t, h, "tcp4"), port))
		require.NoError(t, h.Close())
		assert.Equal(t, websocket.StatusGoingAway, bridgetest.Closed(t, ws, 5*time.Second).Code)
		_, resp, err := websocket.Dial(bridgetest.Ctx(t, 5*time.Second), portURL(serveWire(t, h, "tcp4"), port), nil)
		require.Error(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	})
}

func TestParseRange(t *testing.T) {
	tests := []struct {
		in   string
		want wire.Range
		err  bool
	}{
		{"127.0.0.1:5601", wire.Range{Addr: netip.MustParseAddr("127.0.0.1"), First: 5601, Last: 5601}, false},
		{"10.0.0.7:5600-5699", wire.Range{Addr: netip.MustParseAddr("10.0.0.7"), First: 5600, Last: 5699}, false},
		{"[::1]:1-65535", wire.Range{Addr: netip.MustParseAddr("::1"), First: 1, Last: 65535}, false},
		{"[::ffff:10.0.0.1]:7", wire.Range{Addr: netip.MustParseAddr("10.0.0.1"), First: 7, Last: 7}, false},
		{"game.example:5601", wire.Range{}, true},
		{"127.0.0.1", wire.Range{}, true},
		{"127.0.0.1:0", wire.Range{}, true},
		{"127.0.0.1:65536", wire.Range{}, true},
		{"127.0.0.1:9-8", wire.Range{}, true},
		{"127.0.0.1:-8", wire.Range{}, true},
		{"127.0.0.1:+8", wire.Range{}, true},
	}
	for _, tt := range tests {
		got, err := wire.ParseRange(tt.in)
		if tt.err {
			assert.Error(t, err, tt.in)
			continue
		}
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, got, tt.in)
		back, err := wire.ParseRange(got.String())
		require.NoError(t, err)
		assert.Equal(t, got, back, "String round trip")
	}
}
