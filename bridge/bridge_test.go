package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	"go.uber.org/goleak"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/bridge"
	"github.com/gonetcode/netcode/bridge/internal/bridgetest"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/token"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testServer is a netcode server on loopback. In echo mode it sends every
// payload back; every accepted connection is also passed on conns.
type testServer struct {
	l     *netcode.Listener
	key   crypto.Key
	addr  netip.AddrPort
	conns chan *netcode.Conn
	wg    sync.WaitGroup
}

func newServer(t testing.TB, maxClients int, echo bool) *testServer {
	t.Helper()
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	l, err := netcode.Listen("udp4", "127.0.0.1:0", &netcode.ServerConfig{
		ProtocolID: bridgetest.ProtocolID,
		PrivateKey: key,
		MaxClients: maxClients,
	})
	require.NoError(t, err)
	s := &testServer{
		l:     l,
		key:   key,
		addr:  netip.MustParseAddrPort(l.Addr().String()),
		conns: make(chan *netcode.Conn, 64),
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := l.AcceptConn(context.Background())
			if err != nil {
				return
			}
			select {
			case s.conns <- c:
			default:
			}
			if !echo {
				continue
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				bridgetest.EchoUntilError(c)
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		s.wg.Wait()
	})
	return s
}

// token mints a connect token for the given servers.
func (s *testServer) token(t testing.TB, timeout int32, addrs ...netip.AddrPort) []byte {
	t.Helper()
	if len(addrs) == 0 {
		addrs = []netip.AddrPort{s.addr}
	}
	b, err := token.Generate(&token.Params{
		ProtocolID:     bridgetest.ProtocolID,
		ClientID:       bridgetest.NextClientID(),
		PrivateKey:     s.key,
		ServerAddrs:    addrs,
		ExpireSeconds:  30,
		TimeoutSeconds: timeout,
	})
	require.NoError(t, err)
	return b
}

// newBridge serves a Handler with cfg over HTTP.
func newBridge(t testing.TB, cfg bridge.Config) (*bridge.Handler, string) {
	t.Helper()
	h := bridge.NewHandler(&cfg)
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		h.Close()
		srv.Close()
	})
	return h, "ws" + strings.TrimPrefix(srv.URL, "http")
}

// dial opens a WebSocket offering the relay subprotocol.
func dial(t testing.TB, url string) *websocket.Conn {
	t.Helper()
	ws, _, err := websocket.Dial(bridgetest.Ctx(t, 5*time.Second), url, &websocket.DialOptions{
		Subprotocols: []string{bridge.Subprotocol},
	})
	require.NoError(t, err)
	require.Equal(t, bridge.Subprotocol, ws.Subprotocol())
	t.Cleanup(func() { ws.CloseNow() })
	return ws
}

type connected struct {
	Type        string `json:"type"`
	ClientIndex int    `json:"clientIndex"`
	MaxClients  int    `json:"maxClients"`
}

// open dials the bridge and sends tok; it returns the WebSocket once the
// bridge says it is connected.
func open(t testing.TB, url string, tok []byte) (*websocket.Conn, connected) {
	t.Helper()
	ws := dial(t, url)
	ctx := bridgetest.Ctx(t, 10*time.Second)
	require.NoError(t, ws.Write(ctx, websocket.MessageBinary, tok))
	typ, msg, err := ws.Read(ctx)
	require.NoError(t, err)
	require.Equal(t, websocket.MessageText, typ)
	var c connected
	require.NoError(t, json.Unmarshal(msg, &c), "%s", msg)
	require.Equal(t, "connected", c.Type)
	return ws, c
}

func allowOnly(s *testServer) bridge.Config {
	return bridge.Config{AllowedServers: []netip.AddrPort{s.addr}}
}

func TestEcho(t *testing.T) {
	srv := newServer(t, 8, true)
	h, url := newBridge(t, allowOnly(srv))
	ws, c := open(t, url, srv.token(t, 5))
	assert.Equal(t, 8, c.MaxClients)
	assert.True(t, c.ClientIndex >= 0 && c.ClientIndex < 8, "clientIndex %d", c.ClientIndex)
	assert.Equal(t, 1, h.Sessions())

	ctx := bridgetest.Ctx(t, 30*time.Second)
	const n = 2000
	// A window of messages in flight, checked in order of arrival by
	// content (UDP may reorder, but not on loopback in practice).
	want := make(map[string]int)
	var mu sync.Mutex
	errc := make(chan error, 1)
	received := make(chan struct{}, n)
	go func() {
		for range n {
			typ, b, err := ws.Read(ctx)
			if err != nil {
				errc <- err
				return
			}
			if typ != websocket.MessageBinary {
				errc <- fmt.Errorf("message type %v", typ)
				return
			}
			mu.Lock()
			k := string(b)
			if want[k] == 0 {
				mu.Unlock()
				errc <- fmt.Errorf("unexpected echo of %d bytes", len(b))
				return
			}
			want[k]--
			mu.Unlock()
			received <- struct{}{}
		}
		errc <- nil
	}()
	sem := make(chan struct{}, 16)
	for i := range n {
		size := 1 + (i*37)%netcode.MaxPayloadBytes
		if i%100 == 0 {
			size = netcode.MaxPayloadBytes
		}
		msg := bytes.Repeat([]byte{byte(i)}, size)
		copy(msg, fmt.Sprint(i))
		mu.Lock()
		want[string(msg)]++
		mu.Unlock()
		sem <- struct{}{}
		require.NoError(t, ws.Write(ctx, websocket.MessageBinary, msg))
		select {
		case <-received:
			<-sem
		default:
		}
		for len(sem) == cap(sem) {
			select {
			case <-received:
				<-sem
			case err := <-errc:
				require.NoError(t, err)
				t.Fatal("reader stopped early")
			case <-ctx.Done():
				t.Fatal("echoes stopped arriving")
			}
		}
	}
	require.NoError(t, <-errc)

	require.NoError(t, ws.Close(websocket.StatusNormalClosure, ""))
	bridgetest.Eventually(t, func() bool { return srv.l.Stats().Connected == 0 }, "server slot not freed")
	bridgetest.Eventually(t, func() bool { return h.Sessions() == 0 }, "session not ended")
}

func TestAllowList(t *testing.T) {
	srv := newServer(t, 8, true)
	other := netip.MustParseAddrPort("127.0.0.1:9")
	mapped := netip.AddrPortFrom(netip.AddrFrom16(srv.addr.Addr().As16()), srv.addr.Port())
	tests := []struct {
		name  string
		cfg   bridge.Config
		addrs []netip.AddrPort
		ok    bool
	}{
		{"default refuses all", bridge.Config{}, nil, false},
		{"other server allowed", bridge.Config{AllowedServers: []netip.AddrPort{other}}, nil, false},
		{"same host other port", bridge.Config{AllowedServers: []netip.AddrPort{
			netip.AddrPortFrom(srv.addr.Addr(), srv.addr.Port()+1)}}, nil, false},
		{"one of two servers allowed", allowOnly(srv), []netip.AddrPort{srv.addr, other}, false},
		{"second of two not allowed", allowOnly(srv), []netip.AddrPort{other, srv.addr}, false},
		{"func refuses", bridge.Config{AllowServer: func(netip.AddrPort) bool { return false }}, nil, false},
		{"allowed", allowOnly(srv), nil, true},
		{"allowed in mapped form", bridge.Config{AllowedServers: []netip.AddrPort{mapped}}, nil, true},
		{"func allows prefix", bridge.Config{AllowServer: func(a netip.AddrPort) bool {
			return netip.MustParsePrefix("127.0.0.0/8").Contains(a.Addr()) && a.Port() == srv.addr.Port()
		}}, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := srv.l.Stats()
			_, url := newBridge(t, tc.cfg)
			tok := srv.token(t, 5, tc.addrs...)
			if tc.ok {
				ws, _ := open(t, url, tok)
				ws.Close(websocket.StatusNormalClosure, "")
				return
			}
			ws := dial(t, url)
			require.NoError(t, ws.Write(bridgetest.Ctx(t, time.Second), websocket.MessageBinary, tok))
			ce := bridgetest.Closed(t, ws, 5*time.Second)
			assert.Equal(t, bridge.CodeServerNotAllowed, ce.Code)
			assert.Contains(t, ce.Reason, "not allowed")
			after := srv.l.Stats()
			assert.Equal(t, before.ChallengesSent, after.ChallengesSent, "the bridge sent a request to the server")
		})
	}
}

func TestSubprotocolRequired(t *testing.T) {
	srv := newServer(t, 8, true)
	_, url := newBridge(t, allowOnly(srv))
	for _, protos := range [][]string{nil, {"other"}, {"netcode.relay.v2", "chat"}} {
		ws, resp, err := websocket.Dial(bridgetest.Ctx(t, 5*time.Second), url, &websocket.DialOptions{Subprotocols: protos})
		if ws != nil {
			ws.CloseNow()
		}
		require.Error(t, err, "subprotocols %q", protos)
		require.NotNil(t, resp)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	}
	// Offered among others, it is chosen.
	ws, _, err := websocket.Dial(bridgetest.Ctx(t, 5*time.Second), url, &websocket.DialOptions{
		Subprotocols: []string{"chat", bridge.Subprotocol},
	})
	require.NoError(t, err)
	assert.Equal(t, bridge.Subprotocol, ws.Subprotocol())
	ws.CloseNow()
}

func TestBadFirstMessage(t *testing.T) {
	srv := newServer(t, 8, true)
	cfg := allowOnly(srv)
	cfg.HandshakeTimeout = 300 * time.Millisecond
	_, url := newBridge(t, cfg)
	good := srv.token(t, 5)
	corrupt := append([]byte(nil), good...)
	corrupt[0] ^= 0xff // version info
	tests := []struct {
		name string
		typ  websocket.MessageType
		msg  []byte
		code websocket.StatusCode
	}{
		{"text", websocket.MessageText, []byte(`{"token":"x"}`), bridge.CodeInvalidConnectToken},
		{"short", websocket.MessageBinary, good[:100], bridge.CodeInvalidConnectToken},
		{"one byte short", websocket.MessageBinary, good[:2047], bridge.CodeInvalidConnectToken},
		{"long", websocket.MessageBinary, append(append([]byte(nil), good...), 0), bridge.CodeInvalidConnectToken},
		{"huge", websocket.MessageBinary, make([]byte, 64<<10), bridge.CodeInvalidConnectToken},
		{"empty", websocket.MessageBinary, nil, bridge.CodeInvalidConnectToken},
		{"garbage", websocket.MessageBinary, make([]byte, token.ConnectTokenBytes), bridge.CodeInvalidConnectToken},
		{"corrupt version", websocket.MessageBinary, corrupt, bridge.CodeInvalidConnectToken},
		{"nothing", 0, nil, bridge.CodeHandshakeTimeout},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ws := dial(t, url)
			if tc.typ != 0 {
				// A huge message may be cut short by the bridge's close.
				_ = ws.Write(bridgetest.Ctx(t, 2*time.Second), tc.typ, tc.msg)
			}
			ce := bridgetest.Closed(t, ws, 5*time.Second)
			if tc.name == "huge" && ce.Code == websocket.StatusMessageTooBig {
				return // the library's read limit may fire first
			}
			assert.Equal(t, tc.code, ce.Code, "reason %q", ce.Reason)
			assert.NotEmpty(t, ce.Reason)
		})
	}
	assert.Zero(t, srv.l.Stats().ChallengesSent)
}

func TestMessageChecks(t *testing.T) {
	srv := newServer(t, 8, true)
	tests := []struct {
		name string
		typ  websocket.MessageType
		msg  []byte
		code websocket.StatusCode
	}{
		{"oversized", websocket.MessageBinary, make([]byte, netcode.MaxPayloadBytes+1), websocket.StatusMessageTooBig},
		{"far oversized", websocket.MessageBinary, make([]byte, 100_000), websocket.StatusMessageTooBig},
		{"empty", websocket.MessageBinary, nil, websocket.StatusPolicyViolation},
		{"text", websocket.MessageText, []byte("hello"), websocket.StatusUnsupportedData},
	}
	h, url := newBridge(t, allowOnly(srv))
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ws, _ := open(t, url, srv.token(t, 5))
			sc := srv.accepted(t)
			ctx := bridgetest.Ctx(t, 5*time.Second)
			// The largest payload passes.
			max := bytes.Repeat([]byte{7}, netcode.MaxPayloadBytes)
			require.NoError(t, ws.Write(ctx, websocket.MessageBinary, max))
			_, b, err := ws.Read(ctx)
			require.NoError(t, err)
			require.Equal(t, max, b)

			_ = ws.Write(ctx, tc.typ, tc.msg)
			ce := bridgetest.Closed(t, ws, 5*time.Second)
			assert.Equal(t, tc.code, ce.Code, "reason %q", ce.Reason)
			// The server sees a clean disconnect.
			select {
			case <-sc.Done():
				assert.ErrorIs(t, sc.Err(), io.EOF)
			case <-time.After(5 * time.Second):
				t.Fatal("server connection still up")
			}
		})
	}
	bridgetest.Eventually(t, func() bool { return srv.l.Stats().Connected == 0 && h.Sessions() == 0 }, "slots not freed")
}

func TestSessionCap(t *testing.T) {
	srv := newServer(t, 8, true)
	cfg := allowOnly(srv)
	cfg.MaxSessions = 2
	h, url := newBridge(t, cfg)
	ws1, _ := open(t, url, srv.token(t, 5))
	ws2, _ := open(t, url, srv.token(t, 5))
	assert.Equal(t, 2, h.Sessions())

	ws3 := dial(t, url)
	ce := bridgetest.Closed(t, ws3, 5*time.Second)
	assert.Equal(t, websocket.StatusTryAgainLater, ce.Code)
	assert.Contains(t, ce.Reason, "too many sessions")
	assert.Equal(t, 2, srv.l.Stats().Connected)

	// Room again after one leaves.
	require.NoError(t, ws1.Close(websocket.StatusNormalClosure, ""))
	bridgetest.Eventually(t, func() bool { return h.Sessions() == 1 }, "session not released")
	ws4, _ := open(t, url, srv.token(t, 5))
	ws4.Close(websocket.StatusNormalClosure, "")
	ws2.Close(websocket.StatusNormalClosure, "")
	bridgetest.Eventually(t, func() bool { return srv.l.Stats().Connected == 0 }, "server slots not freed")
}

func TestUpstreamTimeout(t *testing.T) {
	// A UDP socket that never answers stands for a server that is down.
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer pc.Close()
	dead := netip.MustParseAddrPort(pc.LocalAddr().String())
	srv := newServer(t, 8, true) // only for its key
	_, url := newBridge(t, bridge.Config{AllowedServers: []netip.AddrPort{dead}})
	ws := dial(t, url)
	require.NoError(t, ws.Write(bridgetest.Ctx(t, time.Second), websocket.MessageBinary, srv.token(t, 1, dead)))
	start := time.Now()
	ce := bridgetest.Closed(t, ws, 10*time.Second)
	assert.Equal(t, bridge.CodeConnectionRequestTimedOut, ce.Code)
	assert.Equal(t, netcode.ErrConnectionRequestTimedOut.Error(), ce.Reason)
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestDialTimeout(t *testing.T) {
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	defer pc.Close()
	dead := netip.MustParseAddrPort(pc.LocalAddr().String())
	srv := newServer(t, 8, true)
	_, url := newBridge(t, bridge.Config{AllowedServers: []netip.AddrPort{dead}, DialTimeout: 200 * time.Millisecond})
	ws := dial(t, url)
	require.NoError(t, ws.Write(bridgetest.Ctx(t, time.Second), websocket.MessageBinary, srv.token(t, 10, dead)))
	ce := bridgetest.Closed(t, ws, 5*time.Second)
	assert.Equal(t, bridge.CodeHandshakeTimeout, ce.Code)
	assert.Contains(t, ce.Reason, "dial timed out")
}

func TestDenied(t *testing.T) {
	srv := newServer(t, 1, true)
	_, url := newBridge(t, allowOnly(srv))
	ws1, c := open(t, url, srv.token(t, 5))
	assert.Equal(t, 1, c.MaxClients)
	ws2 := dial(t, url)
	require.NoError(t, ws2.Write(bridgetest.Ctx(t, time.Second), websocket.MessageBinary, srv.token(t, 5)))
	ce := bridgetest.Closed(t, ws2, 10*time.Second)
	assert.Equal(t, bridge.CodeConnectionDenied, ce.Code)
	assert.Equal(t, netcode.ErrConnectionDenied.Error(), ce.Reason)
	ws1.Close(websocket.StatusNormalClosure, "")
}

func TestBrowserDisconnectReleasesSlot(t *testing.T) {
	for _, abrupt := range []bool{false, true} {
		t.Run(fmt.Sprintf("abrupt=%v", abrupt), func(t *testing.T) {
			srv := newServer(t, 4, false)
			h, url := newBridge(t, allowOnly(srv))
			ws, _ := open(t, url, srv.token(t, 30))
			sc := srv.accepted(t)
			ctx := bridgetest.Ctx(t, 5*time.Second)
			// Mid-session: a payload each way.
			require.NoError(t, ws.Write(ctx, websocket.MessageBinary, []byte("ping")))
			buf := make([]byte, netcode.MaxPayloadBytes)
			require.NoError(t, sc.SetReadDeadline(time.Now().Add(5*time.Second)))
			n, err := sc.Read(buf)
			require.NoError(t, err)
			assert.Equal(t, "ping", string(buf[:n]))
			_, err = sc.Write([]byte("pong"))
			require.NoError(t, err)
			_, b, err := ws.Read(ctx)
			require.NoError(t, err)
			assert.Equal(t, "pong", string(b))

			if abrupt {
				ws.CloseNow() // the TCP connection just goes away
			} else {
				ws.Close(websocket.StatusNormalClosure, "bye")
			}
			// The server sees a clean disconnect (not a timeout: the token's is 30 s).
			_, err = sc.Read(buf)
			assert.ErrorIs(t, err, io.EOF)
			bridgetest.Eventually(t, func() bool { return srv.l.Stats().Connected == 0 }, "server slot not freed")
			bridgetest.Eventually(t, func() bool { return h.Sessions() == 0 }, "session not ended")
		})
	}
}

func TestServerDisconnect(t *testing.T) {
	srv := newServer(t, 4, false)
	h, url := newBridge(t, allowOnly(srv))
	ws, _ := open(t, url, srv.token(t, 30))
	sc := srv.accepted(t)
	require.NoError(t, sc.Close())
	ce := bridgetest.Closed(t, ws, 5*time.Second)
	assert.Equal(t, bridge.CodeDisconnected, ce.Code)
	bridgetest.Eventually(t, func() bool { return h.Sessions() == 0 }, "session not ended")
}

// blackhole is a server socket that can be made to drop everything, as if
// the server machine went away.
type blackhole struct {
	net.PacketConn
	drop atomic.Bool
}

func (b *blackhole) ReadFrom(p []byte) (int, net.Addr, error) {
	for {
		n, a, err := b.PacketConn.ReadFrom(p)
		if err != nil || !b.drop.Load() {
			return n, a, err
		}
	}
}

func (b *blackhole) WriteTo(p []byte, a net.Addr) (int, error) {
	if b.drop.Load() {
		return len(p), nil
	}
	return b.PacketConn.WriteTo(p, a)
}

func TestServerTimeout(t *testing.T) {
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	bh := &blackhole{PacketConn: pc}
	l, err := netcode.NewListener(bh, &netcode.ServerConfig{ProtocolID: bridgetest.ProtocolID, PrivateKey: key, MaxClients: 4})
	require.NoError(t, err)
	defer l.Close()
	srv := &testServer{l: l, key: key, addr: netip.MustParseAddrPort(pc.LocalAddr().String())}
	_, url := newBridge(t, allowOnly(srv))

	ws := dial(t, url)
	ctx := bridgetest.Ctx(t, 10*time.Second)
	require.NoError(t, ws.Write(ctx, websocket.MessageBinary, srv.token(t, 1)))
	typ, _, err := ws.Read(ctx)
	require.NoError(t, err)
	require.Equal(t, websocket.MessageText, typ)
	bh.drop.Store(true)
	ce := bridgetest.Closed(t, ws, 10*time.Second)
	assert.Equal(t, bridge.CodeConnectionTimedOut, ce.Code)
	assert.Equal(t, netcode.ErrConnectionTimedOut.Error(), ce.Reason)
}

// TestIdleTimeout checks that the idle timeout counts traffic in both
// directions: a browser that only sends, or only receives, stays connected
// for many idle periods (its messages a twentieth of a period apart, so a
// slow machine does not end it by accident), and a session where neither
// side says anything is ended with CodeIdleTimeout, not long before the idle
// timeout after the last message.
func TestIdleTimeout(t *testing.T) {
	const idle = time.Second
	tests := []struct {
		name string
		// talk keeps the session busy for d, one way, and returns when the
		// last message has been received.
		talk func(t *testing.T, ws *websocket.Conn, sc *netcode.Conn, d time.Duration)
	}{
		{"browser only sends", func(t *testing.T, ws *websocket.Conn, sc *netcode.Conn, d time.Duration) {
			ctx := bridgetest.Ctx(t, 30*time.Second)
			stop := bridgetest.SendEvery(idle/20, func() error { return ws.Write(ctx, websocket.MessageBinary, []byte("tick")) })
			defer stop()
			buf := make([]byte, netcode.MaxPayloadBytes)
			for until := time.Now().Add(d); time.Now().Before(until); {
				require.NoError(t, sc.SetReadDeadline(time.Now().Add(idle)))
				n, err := sc.Read(buf)
				require.NoError(t, err, "the server stopped hearing the browser")
				require.Equal(t, "tick", string(buf[:n]))
			}
		}},
		{"browser only receives", func(t *testing.T, ws *websocket.Conn, sc *netcode.Conn, d time.Duration) {
			stop := bridgetest.SendEvery(idle/20, func() error {
				_, err := sc.Write([]byte("tick"))
				return err
			})
			defer stop()
			bridgetest.ReadTicks(t, ws, d, "a browser that only receives")
		}},
		{"both silent", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, 4, false)
			cfg := allowOnly(srv)
			cfg.IdleTimeout = idle
			h, url := newBridge(t, cfg)
			ws, _ := open(t, url, srv.token(t, 30))
			sc := srv.accepted(t)
			if tc.talk != nil {
				// Four idle periods in which only one side speaks.
				tc.talk(t, ws, sc, 4*idle)
				assert.Equal(t, 1, h.Sessions())
			}
			// Silence both ways ends the session. The bridge saw the last
			// message a little before last; a session ended half an idle
			// period later or sooner ignored the timeout.
			last := time.Now()
			ce := bridgetest.Closed(t, ws, 10*idle)
			assert.Equal(t, bridge.CodeIdleTimeout, ce.Code, "reason %q", ce.Reason)
			assert.GreaterOrEqual(t, time.Since(last), idle/2, "ended before the idle timeout")
			bridgetest.Eventually(t, func() bool { return srv.l.Stats().Connected == 0 && h.Sessions() == 0 }, "not released")
		})
	}
}

func TestHandlerClose(t *testing.T) {
	srv := newServer(t, 4, true)
	cfg := allowOnly(srv)
	h := bridge.NewHandler(&cfg)
	hs := httptest.NewServer(h)
	defer hs.Close()
	url := "ws" + strings.TrimPrefix(hs.URL, "http")
	ws, _ := open(t, url, srv.token(t, 30))
	done := make(chan websocket.CloseError, 1)
	go func() {
		for {
			_, _, err := ws.Read(context.Background())
			if err != nil {
				var ce websocket.CloseError
				errors.As(err, &ce)
				done <- ce
				return
			}
		}
	}()
	require.NoError(t, h.Close())
	ce := <-done
	assert.Equal(t, websocket.StatusGoingAway, ce.Code)
	bridgetest.Eventually(t, func() bool { return srv.l.Stats().Connected == 0 }, "server slot not freed")
	_, resp, err := websocket.Dial(bridgetest.Ctx(t, 5*time.Second), url, &websocket.DialOptions{Subprotocols: []string{bridge.Subprotocol}})
	require.Error(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
}

func TestOrigin(t *testing.T) {
	srv := newServer(t, 4, true)
	_, url := newBridge(t, allowOnly(srv))
	hdr := http.Header{"Origin": []string{"https://evil.example"}}
	_, resp, err := websocket.Dial(bridgetest.Ctx(t, 5*time.Second), url, &websocket.DialOptions{
		Subprotocols: []string{bridge.Subprotocol}, HTTPHeader: hdr,
	})
	require.Error(t, err)
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)

	cfg := allowOnly(srv)
	cfg.OriginPatterns = []string{"*.example"}
	_, url2 := newBridge(t, cfg)
	ws, _, err := websocket.Dial(bridgetest.Ctx(t, 5*time.Second), url2, &websocket.DialOptions{
		Subprotocols: []string{bridge.Subprotocol}, HTTPHeader: hdr,
	})
	require.NoError(t, err)
	ws.CloseNow()
}

func BenchmarkRelayEcho(b *testing.B) {
	srv := newServer(b, 4, true)
	_, url := newBridge(b, allowOnly(srv))
	ws, _ := open(b, url, srv.token(b, 30))
	ctx := context.Background()
	msg := make([]byte, 100)
	buf := make([]byte, netcode.MaxPayloadBytes)
	b.ReportAllocs()
	b.SetBytes(int64(len(msg)))
	for b.Loop() {
		if err := ws.Write(ctx, websocket.MessageBinary, msg); err != nil {
			b.Fatal(err)
		}
		_, r, err := ws.Reader(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(r, buf[:len(msg)]); err != nil {
			b.Fatal(err)
		}
		if _, err := r.Read(buf); err != io.EOF {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	ws.Close(websocket.StatusNormalClosure, "")
}

func TestServerTimeoutsDoNotCutSessions(t *testing.T) {
	srv := newServer(t, 4, true)
	cfg := allowOnly(srv)
	h := bridge.NewHandler(&cfg)
	hs := httptest.NewUnstartedServer(h)
	hs.Config.ReadTimeout = 200 * time.Millisecond
	hs.Config.WriteTimeout = 200 * time.Millisecond
	hs.Start()
	defer func() {
		h.Close()
		hs.Close()
	}()
	ws, _ := open(t, "ws"+strings.TrimPrefix(hs.URL, "http"), srv.token(t, 30))
	ctx := bridgetest.Ctx(t, 5*time.Second)
	for range 6 {
		time.Sleep(100 * time.Millisecond)
		require.NoError(t, ws.Write(ctx, websocket.MessageBinary, []byte("still here")))
		_, b, err := ws.Read(ctx)
		require.NoError(t, err)
		require.Equal(t, "still here", string(b))
	}
	ws.Close(websocket.StatusNormalClosure, "")
}

// accepted returns the next connection the server accepts, failing the test
// after 5 s.
func (s *testServer) accepted(t *testing.T) *netcode.Conn {
	t.Helper()
	select {
	case c := <-s.conns:
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("server did not accept")
		return nil
	}
}

// TestServerBurst: a burst of payloads from the server (which the relay
// writes to the browser in batches, those queued together in one write)
// arrives whole and in order, message by message, over several rounds and
// sizes.
func TestServerBurst(t *testing.T) {
	srv := newServer(t, 4, false)
	_, url := newBridge(t, allowOnly(srv))
	ws, _ := open(t, url, srv.token(t, 30))
	sc := srv.accepted(t)
	ws.SetReadLimit(netcode.MaxPayloadBytes)
	ctx := bridgetest.Ctx(t, 10*time.Second)
	const burst = 100 // within the relay's read queue (DefaultReadQueue)
	for _, size := range []int{1, 100, netcode.MaxPayloadBytes} {
		for round := range 3 {
			want := make([][]byte, burst)
			for i := range want {
				p := bytes.Repeat([]byte{byte(round)}, size)
				p[0] = byte(i)
				want[i] = p
				_, err := sc.Write(p)
				require.NoError(t, err)
			}
			for i := range want {
				typ, got, err := ws.Read(ctx)
				require.NoError(t, err, "size %d round %d message %d", size, round, i)
				require.Equal(t, websocket.MessageBinary, typ)
				require.Equal(t, want[i], got, "size %d round %d message %d", size, round, i)
			}
		}
	}
}
