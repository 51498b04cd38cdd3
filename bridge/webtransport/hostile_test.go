package webtransport_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	wt "github.com/quic-go/webtransport-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/bridge"
	"github.com/gonetcode/netcode/bridge/internal/bridgetest"
	"github.com/gonetcode/netcode/bridge/internal/wsbridge"
	"github.com/gonetcode/netcode/bridge/transport"
	"github.com/gonetcode/netcode/bridge/webtransport"
	"github.com/gonetcode/netcode/protocol"
)

// rawTLS trusts the rig's development certificate as a browser pinning it
// does (the clients' Options do the same check).
func (r *rig) rawTLS() *tls.Config {
	return &tls.Config{InsecureSkipVerify: true, NextProtos: []string{http3.NextProtoH3}}
}

func rawQUIC() *quic.Config {
	// Packets of loopback's size from the start: datagrams over any
	// limit of the bridge's fit.
	return &quic.Config{EnableDatagrams: true, EnableStreamResetPartialDelivery: true, InitialPacketSize: 1452}
}

// raw opens a WebTransport session with webtransport-go itself: a peer
// that does what it likes. The QUIC connection closes with the session.
func (r *rig) raw(t testing.TB, url string) *wt.Session {
	t.Helper()
	d := &wt.Transport{TLSClientConfig: r.rawTLS(), QUICConfig: rawQUIC()}
	_, sess, err := d.Dial(bridgetest.Ctx(t, 5*time.Second), url, nil)
	require.NoError(t, err)
	t.Cleanup(func() { sess.CloseWithError(0, "") })
	return sess
}

// rawRelay opens a raw relay session and connects it.
func (r *rig) rawRelay(t testing.TB) *wt.Session {
	t.Helper()
	sess := r.raw(t, r.relayURL)
	str, err := sess.OpenStreamSync(bridgetest.Ctx(t, 5*time.Second))
	require.NoError(t, err)
	_, err = str.Write(r.token(t))
	require.NoError(t, err)
	msg, err := io.ReadAll(str)
	require.NoError(t, err)
	require.Contains(t, string(msg), `"type":"connected"`)
	return sess
}

// ended waits for sess to end and returns the bridge's close code and
// reason.
func ended(t testing.TB, sess *wt.Session) (websocket.StatusCode, string) {
	t.Helper()
	select {
	case <-sess.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the session did not end")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := sess.AcceptStream(ctx)
	var se *wt.SessionError
	require.True(t, errors.As(err, &se), "want a session close, got %v", err)
	return websocket.StatusCode(se.ErrorCode), se.Message
}

// TestRefusedWhenFull: WebTransport and WebSocket sessions share a Handler's
// and a Mux's MaxSessions; over it, a WebTransport session is refused at
// once (the Go clients fail with bridge.ErrBridgeFull; the session itself,
// what a browser sees, closes with 1013), and a slot comes back when its
// session ends.
func TestRefusedWhenFull(t *testing.T) {
	r := newRig(t, rigConfig{relay: bridge.Config{MaxSessions: 1}, mux: transport.MuxConfig{MaxSessions: 1}})
	ctx := bridgetest.Ctx(t, 10*time.Second)

	tc := r.dialTransport(t)
	_, err := webtransport.Dial(ctx, r.transportURL, r.opts)
	require.ErrorIs(t, err, bridge.ErrBridgeFull)
	_, err = transport.Dial(ctx, r.ws, nil)
	require.ErrorIs(t, err, bridge.ErrBridgeFull, "the WebSocket path shares the cap")
	code, reason := ended(t, r.raw(t, r.transportURL))
	assert.Equal(t, wsbridge.CodeFull, code)
	assert.Equal(t, bridge.ErrBridgeFull.Error(), reason)

	rc := r.dialRelay(t)
	_, err = webtransport.DialRelay(ctx, r.relayURL, r.token(t), r.opts)
	require.ErrorIs(t, err, bridge.ErrBridgeFull)
	ws, _, err := websocket.Dial(ctx, r.wsr, &websocket.DialOptions{Subprotocols: []string{bridge.Subprotocol}})
	require.NoError(t, err)
	assert.Equal(t, wsbridge.CodeFull, bridgetest.Closed(t, ws, 5*time.Second).Code, "the WebSocket relay shares the cap")
	code, _ = ended(t, r.raw(t, r.relayURL))
	assert.Equal(t, wsbridge.CodeFull, code)

	require.NoError(t, tc.Close())
	require.NoError(t, rc.Close())
	bridgetest.Eventually(t, func() bool { return r.mux.Sessions() == 0 && r.relay.Sessions() == 0 }, "the slots come back")
	again := r.dialTransport(t)
	require.NoError(t, bridgetest.Echo(t, again, 1, 5, false))
	require.NoError(t, echoRelay(r.dialRelay(t), 2, 5))

	// A WebSocket session holding the slot refuses WebTransport ones.
	require.NoError(t, again.Close())
	bridgetest.Eventually(t, func() bool { return r.mux.Sessions() == 0 }, "the slot comes back")
	wc, err := transport.Dial(ctx, r.ws, nil)
	require.NoError(t, err)
	defer wc.Close()
	_, err = webtransport.Dial(ctx, r.transportURL, r.opts)
	require.ErrorIs(t, err, bridge.ErrBridgeFull)
}

// TestDatagramTooLarge: at the 1,200-byte floor of QUIC packets, the
// largest datagram is known; a larger one is refused with an error
// wrapping bridge.ErrDatagramTooLarge by the Go clients and by the Mux's
// WriteTo, and a relay session whose server sends a payload larger than
// the session carries ends with 1009, saying so. Nothing is dropped
// silently.
func TestDatagramTooLarge(t *testing.T) {
	undo := webtransport.SetQUICFloor()
	t.Cleanup(undo)
	r := newRig(t, rigConfig{})
	ctx := bridgetest.Ctx(t, 10*time.Second)
	const max = webtransport.FloorDatagram

	c, err := webtransport.Dial(ctx, r.transportURL, r.opts)
	require.NoError(t, err)
	defer c.Close()
	require.Equal(t, max, c.MaxDatagram())
	addr := net.UDPAddrFromAddrPort(r.addr)
	_, err = c.WriteTo(make([]byte, max+1), addr)
	require.ErrorIs(t, err, bridge.ErrDatagramTooLarge)
	_, err = c.WriteTo(make([]byte, max), addr)
	require.NoError(t, err, "the largest datagram goes")

	// A netcode client over WebTransport: payloads up to the limit less
	// the packet's overhead echo; the server's WriteTo of a larger packet
	// to the session fails.
	nc := r.dialTransport(t)
	p := make([]byte, max-25)
	_, err = nc.Write(p)
	require.NoError(t, err)
	nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := nc.Read(make([]byte, netcode.MaxPayloadBytes))
	require.NoError(t, err)
	require.Equal(t, len(p), n)
	_, err = nc.Write(make([]byte, max-17)) // a packet of at least max+1 bytes (1 prefix, 1 to 8 of sequence, 16 of tag)
	require.ErrorIs(t, err, netcode.ErrPayloadTooLarge, "a payload whose packet is over the limit")
	require.ErrorIs(t, err, bridge.ErrDatagramTooLarge)
	peer := netip.MustParseAddrPort(r.serverConns()[0].RemoteAddr().String())
	require.True(t, transport.IsSessionAddr(peer))
	_, err = r.mux.WriteTo(make([]byte, max+1), net.UDPAddrFromAddrPort(peer))
	require.ErrorIs(t, err, bridge.ErrDatagramTooLarge)

	rc := r.dialRelay(t)
	_, err = rc.Write(make([]byte, max+1))
	require.ErrorIs(t, err, bridge.ErrDatagramTooLarge)
	require.NoError(t, echoRelay(rc, 1, 20))

	// A client whose path carries more sends a 1,200-byte payload: its
	// echo is larger than the bridge's side of the session carries.
	undo()
	big := r.dialRelay(t)
	require.Greater(t, big.MaxDatagram(), netcode.MaxPayloadBytes)
	_, err = big.Write(make([]byte, netcode.MaxPayloadBytes))
	require.NoError(t, err)
	big.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, err = big.Read(make([]byte, 1500))
	ce := closeOf(t, err)
	assert.Equal(t, websocket.StatusMessageTooBig, ce.Code)
	assert.Contains(t, ce.Reason, "1200-byte message over the link's limit of 1161 bytes")
}

func (r *rig) serverConns() []*netcode.Conn {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*netcode.Conn(nil), r.conns...)
}

// TestHostilePeers: whatever a WebTransport peer sends or withholds, its
// session ends within its bounds with the bridge's code, and frees its
// slot.
func TestHostilePeers(t *testing.T) {
	r := newRig(t, rigConfig{
		relay: bridge.Config{HandshakeTimeout: 200 * time.Millisecond, IdleTimeout: 300 * time.Millisecond},
		mux:   transport.MuxConfig{IdleTimeout: 300 * time.Millisecond},
	})
	tests := []struct {
		name   string
		mux    bool
		do     func(t *testing.T) *wt.Session
		code   websocket.StatusCode
		reason string
	}{
		{"relay: no token", false, func(t *testing.T) *wt.Session { return r.raw(t, r.relayURL) },
			wsbridge.CodeHandshakeTimeout, "no connect token"},
		{"relay: a short token", false, func(t *testing.T) *wt.Session {
			s := r.raw(t, r.relayURL)
			str, err := s.OpenStreamSync(bridgetest.Ctx(t, 5*time.Second))
			require.NoError(t, err)
			_, err = str.Write([]byte("not a token"))
			require.NoError(t, err)
			require.NoError(t, str.Close())
			return s
		}, wsbridge.CodeInvalidConnectToken, "invalid connect token"},
		{"relay: an empty datagram", false, func(t *testing.T) *wt.Session {
			s := r.rawRelay(t)
			require.NoError(t, s.SendDatagram(nil))
			return s
		}, websocket.StatusPolicyViolation, "empty"},
		{"relay: a datagram over 1200 bytes", false, func(t *testing.T) *wt.Session {
			s := r.rawRelay(t)
			require.NoError(t, s.SendDatagram(make([]byte, 1201)))
			return s
		}, websocket.StatusMessageTooBig, "larger than 1200"},
		{"relay: silent once connected", false, func(t *testing.T) *wt.Session { return r.rawRelay(t) },
			wsbridge.CodeIdleTimeout, "idle"},
		{"transport: silent", true, func(t *testing.T) *wt.Session { return r.raw(t, r.transportURL) },
			wsbridge.CodeIdleTimeout, "idle"},
		{"transport: a datagram over 1300 bytes", true, func(t *testing.T) *wt.Session {
			s := r.raw(t, r.transportURL)
			require.NoError(t, s.SendDatagram(make([]byte, protocol.MaxPacketBytes+1)))
			return s
		}, websocket.StatusMessageTooBig, "larger than 1300"},
		{"transport: garbage datagrams, then silence", true, func(t *testing.T) *wt.Session {
			s := r.raw(t, r.transportURL)
			for i := range 100 {
				require.NoError(t, s.SendDatagram(make([]byte, 1+i)))
			}
			return s
		}, wsbridge.CodeIdleTimeout, "idle"},
		{"transport: streams the peer opens", true, func(t *testing.T) *wt.Session {
			s := r.raw(t, r.transportURL)
			opened := 0
			for ; opened < 100; opened++ {
				str, err := s.OpenStream()
				if err != nil {
					break
				}
				// Flow control holds a peer that writes more than the
				// stream's window: it cannot make the bridge buffer more.
				str.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
				n, _ := str.Write(make([]byte, 64<<10))
				assert.LessOrEqual(t, n, 32<<10, "written past the windows")
			}
			assert.Less(t, opened, 8, "streams opened")
			return s
		}, wsbridge.CodeIdleTimeout, "idle"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := tt.do(t)
			code, reason := ended(t, s)
			assert.Equal(t, tt.code, code)
			assert.Contains(t, reason, tt.reason)
			bridgetest.Eventually(t, func() bool { return r.relay.Sessions() == 0 && r.mux.Sessions() == 0 }, "the slot is freed")
		})
	}
}

// TestCloseWithPeersThatDoNotLeave: Close ends WebTransport sessions whose
// peers keep their QUIC connections open after the session's close (a
// connection of their own, never closed): the bridge closes the connection
// itself when the close's bound passes, so Close returns.
func TestCloseWithPeersThatDoNotLeave(t *testing.T) {
	r := newRig(t, rigConfig{})
	ctx := bridgetest.Ctx(t, 10*time.Second)
	var sessions []*wt.Session
	for _, url := range []string{r.relayURL, r.transportURL} {
		qc, err := quic.DialAddr(ctx, r.srv.Addr().String(), r.rawTLS(), rawQUIC())
		require.NoError(t, err)
		t.Cleanup(func() { qc.CloseWithError(0, "") })
		cc, err := (&wt.Transport{}).NewClientConn(qc)
		require.NoError(t, err)
		_, s, err := cc.Dial(ctx, url, nil)
		require.NoError(t, err)
		sessions = append(sessions, s)
	}
	s := r.rawRelay(t)
	sessions = append(sessions, s)
	bridgetest.Eventually(t, func() bool { return r.relay.Sessions() == 2 && r.mux.Sessions() == 1 }, "sessions open")
	require.NoError(t, r.relay.Close())
	require.NoError(t, r.mux.Close())
	for _, s := range sessions {
		code, _ := ended(t, s)
		assert.Equal(t, websocket.StatusGoingAway, code)
	}
	assert.Zero(t, r.relay.Sessions())
	assert.Zero(t, r.mux.Sessions())
}

// TestConnectionsBounded: QUIC connections, which cost the Server before
// any session does, are bounded: past MaxConnections a new one is closed
// at once, and one that opens no session is closed after SessionWait.
func TestConnectionsBounded(t *testing.T) {
	r := newRig(t, rigConfig{wt: webtransport.Config{MaxConnections: 1, SessionWait: 200 * time.Millisecond}})
	ctx := bridgetest.Ctx(t, 10*time.Second)
	idle, err := quic.DialAddr(ctx, r.srv.Addr().String(), r.rawTLS(), rawQUIC())
	require.NoError(t, err)
	defer idle.CloseWithError(0, "")
	// The second connection is closed at once (or, if it raced the first
	// one's registration, the first is).
	second, err := quic.DialAddr(ctx, r.srv.Addr().String(), r.rawTLS(), rawQUIC())
	if err == nil {
		defer second.CloseWithError(0, "")
	}
	for _, c := range []*quic.Conn{idle, second} {
		if c == nil {
			continue
		}
		select {
		case <-c.Context().Done():
		case <-ctx.Done():
			t.Fatal("a connection outlived SessionWait and the cap")
		}
		cause := context.Cause(c.Context())
		var ae *quic.ApplicationError
		var te *quic.TransportError
		switch {
		case errors.As(cause, &ae):
			assert.Contains(t, []quic.ApplicationErrorCode{0x10d, 0x10e}, ae.ErrorCode, ae.ErrorMessage)
		case errors.As(cause, &te):
			// Closed during its handshake: QUIC hides the application's
			// code until then.
			assert.Equal(t, quic.ApplicationErrorErrorCode, te.ErrorCode)
			assert.True(t, te.Remote)
		default:
			t.Fatalf("not closed by the bridge: %v", cause)
		}
	}
	// Once they are gone, a session is served.
	bridgetest.Eventually(t, func() bool {
		c, err := webtransport.Dial(ctx, r.transportURL, r.opts)
		if err != nil {
			return false
		}
		c.Close()
		return true
	}, "a session once the connections are gone")
}
