package bridge_test

import (
	"bufio"
	"crypto/rand"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/bridge"
	"github.com/gonetcode/netcode/bridge/internal/bridgetest"
	"github.com/gonetcode/netcode/bridge/transport"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/testing/stacks"
	"github.com/gonetcode/netcode/protocol"
	"github.com/gonetcode/netcode/token"
)

// Hostile WebSocket clients, written by hand: a real HTTP upgrade over a
// plain TCP connection, then frames that declare more than they carry,
// then silence with the connection held open. Whatever such a client
// does, its session ends within a bound, frees its slot and its
// goroutines, and never blocks Close.

// slack is what a bound is allowed on top, for a loaded machine: these
// checks are of liveness (the session ends, Close returns), not of speed.
const slack = 1500 * time.Millisecond

// rawClient is a hand-driven WebSocket client.
type rawClient struct {
	t    testing.TB
	conn net.Conn
	br   *bufio.Reader
}

// upgradeRequest is an HTTP request upgrading to a WebSocket with the
// subprotocol proto.
func upgradeRequest(host, proto string) string {
	return "GET / HTTP/1.1\r\nHost: " + host + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" +
		"Sec-WebSocket-Protocol: " + proto + "\r\n\r\n"
}

// rawDial connects to the ws:// url, sends the upgrade request and then
// pipelined (bytes written in the same write as the request, before the
// response), and reads the response, which must be a 101.
func rawDial(t testing.TB, url, proto string, pipelined []byte) *rawClient {
	t.Helper()
	host := strings.TrimPrefix(url, "ws://")
	conn, err := net.Dial("tcp", host)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	_, err = conn.Write(append([]byte(upgradeRequest(host, proto)), pipelined...))
	require.NoError(t, err)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	return &rawClient{t: t, conn: conn, br: br}
}

// frame returns a masked client frame with the opcode (binary 2, text 1)
// whose header declares declared bytes of payload, carrying payload (all
// or the start of it).
func frame(opcode byte, declared uint64, payload []byte) []byte {
	b := []byte{0x80 | opcode}
	switch {
	case declared < 126:
		b = append(b, 0x80|byte(declared))
	case declared <= 0xffff:
		b = append(b, 0x80|126)
		b = binary.BigEndian.AppendUint16(b, uint16(declared))
	default:
		b = append(b, 0x80|127)
		b = binary.BigEndian.AppendUint64(b, declared)
	}
	mask := [4]byte{0x12, 0x34, 0x56, 0x78}
	b = append(b, mask[:]...)
	for i, c := range payload {
		b = append(b, c^mask[i%4])
	}
	return b
}

// send writes p.
func (c *rawClient) send(p []byte) {
	c.t.Helper()
	_, err := c.conn.Write(p)
	require.NoError(c.t, err)
}

// stall sends the header of a frame declaring 1 GiB and only n bytes of
// it, then nothing more.
func (c *rawClient) stall(opcode byte, n int) {
	c.t.Helper()
	c.send(frame(opcode, 1<<30, make([]byte, n)))
}

// read returns the next frame from the server (unmasked).
func (c *rawClient) read() (opcode byte, payload []byte) {
	c.t.Helper()
	require.NoError(c.t, c.conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	var h [2]byte
	_, err := io.ReadFull(c.br, h[:])
	require.NoError(c.t, err)
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var l [2]byte
		_, err = io.ReadFull(c.br, l[:])
		n = uint64(binary.BigEndian.Uint16(l[:]))
	case 127:
		var l [8]byte
		_, err = io.ReadFull(c.br, l[:])
		n = binary.BigEndian.Uint64(l[:])
	}
	require.NoError(c.t, err)
	require.Less(c.t, n, uint64(1<<16))
	payload = make([]byte, n)
	_, err = io.ReadFull(c.br, payload)
	require.NoError(c.t, err)
	return h[0] & 0x0f, payload
}

// readClose reads frames up to the server's close frame and returns its
// code.
func (c *rawClient) readClose() websocket.StatusCode {
	c.t.Helper()
	for {
		op, p := c.read()
		if op == 8 {
			require.GreaterOrEqual(c.t, len(p), 2)
			return websocket.StatusCode(binary.BigEndian.Uint16(p))
		}
	}
}

// cutWithin checks that the server closes the TCP connection within d
// (the client reads what remains, and then EOF or a reset).
func (c *rawClient) cutWithin(d time.Duration) {
	c.t.Helper()
	require.NoError(c.t, c.conn.SetReadDeadline(time.Now().Add(d)))
	_, err := io.Copy(io.Discard, c.br)
	var ne net.Error
	if err != nil && (!assert.ErrorAs(c.t, err, &ne) || ne.Timeout()) {
		c.t.Fatalf("the connection is still open %v on: %v", d, err)
	}
}

// within polls cond until it holds, and fails if it does not within d.
func within(t testing.TB, d time.Duration, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", msg, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// closesWithin calls closeFn and fails if it has not returned within d.
// The test's cleanup then closes the clients, which unblocks a Close that
// does not return by itself.
func closesWithin(t testing.TB, d time.Duration, closeFn func() error) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = closeFn()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("Close has not returned within %v", d)
	}
}

// noSessionGoroutines checks that no goroutine of a bridge session, or of
// a WebSocket close in progress, is left.
func noSessionGoroutines(t testing.TB) {
	t.Helper()
	within(t, slack, func() bool {
		return stacks.Count("bridge.(*session)") == 0 && stacks.Count("transport.(*muxSession)") == 0 &&
			stacks.Count("wsbridge.(*Gate).refuseOverCap") == 0 && stacks.Count("websocket.(*Conn).Close") == 0
	}, "session goroutines left")
}

// connectRaw opens a relay session with a valid token, by hand, and reads
// the bridge's "connected" message.
func connectRaw(t *testing.T, url string, tok []byte) *rawClient {
	c := rawDial(t, url, bridge.Subprotocol, nil)
	c.send(frame(2, uint64(len(tok)), tok))
	op, msg := c.read()
	require.Equal(t, byte(1), op)
	require.Contains(t, string(msg), `"connected"`)
	return c
}

// TestStalledFrameEndsSession covers the relay and the Mux: a client that
// declares a long frame, sends past the limit (or a text frame) and then
// nothing has its session closed with the code for it, and then, as it
// does not finish the frame or answer the close, its TCP connection cut
// within CloseTimeout (the Mux: MuxEndGrace): the slot and the goroutines
// are freed. On 40ddb1a the close handshake read the rest of the declared
// frame with no deadline: the session held its slot until the client
// closed TCP.
func TestStalledFrameEndsSession(t *testing.T) {
	type target struct {
		sessions func() int
		url      string
		bound    time.Duration
	}
	relay := func(t *testing.T) (target, *testServer) {
		srv := newServer(t, 4, true)
		h, url := newBridge(t, allowOnly(srv))
		return target{h.Sessions, url, bridge.CloseTimeout}, srv
	}
	mux := func(t *testing.T) (target, *testServer) {
		m, url := bridgetest.NewMuxOn(t, "udp4", "127.0.0.1:0", transport.MuxConfig{})
		return target{m.Sessions, url, bridge.MuxEndGrace}, nil
	}
	tests := []struct {
		name  string
		open  func(t *testing.T) (target, *testServer)
		proto string
		token bool // connect first
		op    byte
		n     int
		code  websocket.StatusCode
	}{
		{"relay token 2049 bytes", relay, bridge.Subprotocol, false, 2, token.ConnectTokenBytes + 1, bridge.CodeInvalidConnectToken},
		{"relay token text", relay, bridge.Subprotocol, false, 1, 100, bridge.CodeInvalidConnectToken},
		{"relay connected 1201 bytes", relay, bridge.Subprotocol, true, 2, netcode.MaxPayloadBytes + 1, websocket.StatusMessageTooBig},
		{"relay connected text", relay, bridge.Subprotocol, true, 1, 100, websocket.StatusUnsupportedData},
		{"mux 1301 bytes", mux, transport.Subprotocol, false, 2, protocol.MaxPacketBytes + 1, websocket.StatusMessageTooBig},
		{"mux text", mux, transport.Subprotocol, false, 1, 100, websocket.StatusUnsupportedData},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tg, srv := tt.open(t)
			var c *rawClient
			if tt.token {
				c = connectRaw(t, tg.url, srv.token(t, 30))
			} else {
				c = rawDial(t, tg.url, tt.proto, nil)
			}
			within(t, 5*time.Second, func() bool { return tg.sessions() == 1 }, "session not open")
			c.stall(tt.op, tt.n)
			assert.Equal(t, tt.code, c.readClose())
			start := time.Now()
			c.cutWithin(tg.bound + slack)
			within(t, tg.bound+slack-time.Since(start), func() bool { return tg.sessions() == 0 }, "slot still held")
			noSessionGoroutines(t)
		})
	}
}

// TestCloseWithStalledFrame covers Handler.Close and Mux.Close while a
// client is in the middle of a frame it will never finish: Close returns
// within its bound. On 40ddb1a it blocked until the client closed TCP.
func TestCloseWithStalledFrame(t *testing.T) {
	t.Run("relay", func(t *testing.T) {
		srv := newServer(t, 4, true)
		h, url := newBridge(t, allowOnly(srv))
		token := rawDial(t, url, bridge.Subprotocol, nil)
		token.stall(2, 1000) // within the token's 2048: the bridge reads on
		connected := connectRaw(t, url, srv.token(t, 30))
		connected.stall(2, 1000)
		within(t, 5*time.Second, func() bool {
			return stacks.Blocked("IO wait", "bridge.(*session).readLoop") && stacks.Blocked("IO wait", "bridge.(*session).serve", "wsbridge.ReadMessage")
		}, "sessions not reading the frames")
		closesWithin(t, bridge.CloseTimeout+slack, h.Close)
		assert.Equal(t, 0, h.Sessions())
		noSessionGoroutines(t)
	})
	t.Run("mux", func(t *testing.T) {
		m, url := bridgetest.NewMuxOn(t, "udp4", "127.0.0.1:0", transport.MuxConfig{})
		c := rawDial(t, url, transport.Subprotocol, nil)
		c.stall(2, 1000)
		within(t, 5*time.Second, func() bool { return stacks.Blocked("IO wait", "transport.(*muxSession).readLoop") }, "session not reading the frame")
		closesWithin(t, bridge.MuxEndGrace+slack, m.Close)
		assert.Equal(t, 0, m.Sessions())
		noSessionGoroutines(t)
	})
}

// TestRefusalWithPipelinedFrame covers a session refused for the cap whose
// client pipelines a long frame right after its upgrade request: the
// refusal's close is bounded as any other, and neither it nor Close waits
// for the client. On 40ddb1a the refusal's goroutine (and Close) waited
// until the client closed TCP.
func TestRefusalWithPipelinedFrame(t *testing.T) {
	tests := []struct {
		name  string
		proto string
		full  func(t *testing.T) (url string, close func() error)
	}{
		{"relay", bridge.Subprotocol, func(t *testing.T) (string, func() error) {
			h, url := newBridge(t, bridge.Config{MaxSessions: 1, HandshakeTimeout: time.Hour})
			rawDial(t, url, bridge.Subprotocol, nil)
			// The 101 goes out before the session is counted.
			within(t, 5*time.Second, func() bool { return h.Sessions() == 1 }, "session not open")
			return url, h.Close
		}},
		{"mux", transport.Subprotocol, func(t *testing.T) (string, func() error) {
			m, url := bridgetest.NewMuxOn(t, "udp4", "127.0.0.1:0", transport.MuxConfig{MaxSessions: 1, IdleTimeout: time.Hour})
			rawDial(t, url, transport.Subprotocol, nil)
			within(t, 5*time.Second, func() bool { return m.Sessions() == 1 }, "session not open")
			return url, m.Close
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			url, closeAll := tt.full(t)
			c := rawDial(t, url, tt.proto, frame(2, 1<<30, make([]byte, 100)))
			assert.Equal(t, bridge.CodeBridgeFull, c.readClose())
			c.cutWithin(bridge.CloseTimeout + slack)
			within(t, slack, func() bool { return stacks.Count("wsbridge.(*Gate).refuseOverCap") == 0 }, "refusal goroutine left")

			// And a refusal in progress does not hold Close.
			c = rawDial(t, url, tt.proto, frame(2, 1<<30, make([]byte, 100)))
			assert.Equal(t, bridge.CodeBridgeFull, c.readClose())
			closesWithin(t, bridge.MuxEndGrace+slack, closeAll)
			noSessionGoroutines(t)
		})
	}
}

// TestCloseHandshakeIgnored covers a client that reads the close frame of
// a handshake timeout and never answers it: its slot is freed
// CloseTimeout after the timeout, not the 5 s coder/websocket waits
// (which 40ddb1a did).
func TestCloseHandshakeIgnored(t *testing.T) {
	const hs = 200 * time.Millisecond
	h, url := newBridge(t, bridge.Config{HandshakeTimeout: hs})
	start := time.Now()
	c := rawDial(t, url, bridge.Subprotocol, nil)
	assert.Equal(t, bridge.CodeHandshakeTimeout, c.readClose())
	within(t, hs+bridge.CloseTimeout+slack-time.Since(start), func() bool { return h.Sessions() == 0 }, "slot still held")
	noSessionGoroutines(t)
}

// TestMuxEmptyMessagesAreNotActivity covers a Mux peer that sends only
// empty messages: they are ignored, and its session ends for the idle
// timeout all the same. On 40ddb1a each one counted as activity and kept
// the session forever.
func TestMuxEmptyMessagesAreNotActivity(t *testing.T) {
	const idle = 300 * time.Millisecond
	m, url := bridgetest.NewMuxOn(t, "udp4", "127.0.0.1:0", transport.MuxConfig{IdleTimeout: idle})
	ws, _, err := websocket.Dial(bridgetest.Ctx(t, 5*time.Second), url, &websocket.DialOptions{Subprotocols: []string{transport.Subprotocol}})
	require.NoError(t, err)
	defer ws.CloseNow()
	stop := bridgetest.SendEvery(idle/6, func() error { return ws.Write(bridgetest.Ctx(t, time.Second), websocket.MessageBinary, nil) })
	defer stop()
	ce := bridgetest.Closed(t, ws, idle+5*time.Second)
	assert.Equal(t, bridge.CodeIdleTimeout, ce.Code)
	within(t, bridge.MuxEndGrace+slack, func() bool { return m.Sessions() == 0 }, "slot still held")
}

// TestForgedTokenDialBounded covers a token no server can open (forged:
// sealed with another key) that claims no timeout: the relay gives up on
// it after HandshakeTimeout with 4004, having sent that long of
// connection requests, not DialTimeout's worth (40ddb1a: 4011 after the
// whole DialTimeout, about 323 KB toward the server at the default 30 s).
func TestForgedTokenDialBounded(t *testing.T) {
	const hs = 300 * time.Millisecond
	udp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer udp.Close()
	received := make(chan int, 1)
	go func() {
		n, buf := 0, make([]byte, 2048)
		for {
			m, _, err := udp.ReadFrom(buf)
			if err != nil {
				received <- n
				return
			}
			n += m
		}
	}()
	addr := netip.MustParseAddrPort(udp.LocalAddr().String())
	var key crypto.Key
	_, _ = rand.Read(key[:])
	tok, err := token.Generate(&token.Params{
		ProtocolID:     bridgetest.ProtocolID,
		ClientID:       bridgetest.NextClientID(),
		PrivateKey:     key,
		ServerAddrs:    []netip.AddrPort{addr},
		ExpireSeconds:  300,
		TimeoutSeconds: -1,
	})
	require.NoError(t, err)
	_, url := newBridge(t, bridge.Config{
		AllowedServers:   []netip.AddrPort{addr},
		HandshakeTimeout: hs,
		DialTimeout:      time.Minute,
	})
	ws := dial(t, url)
	require.NoError(t, ws.Write(bridgetest.Ctx(t, time.Second), websocket.MessageBinary, tok))
	ce := bridgetest.Closed(t, ws, hs+5*time.Second)
	assert.Equal(t, bridge.CodeConnectionRequestTimedOut, ce.Code, ce.Reason)
	udp.Close()
	const requestBytes = 1078
	assert.LessOrEqual(t, <-received, (int(hs/(100*time.Millisecond))+2)*requestBytes, "bytes of connection requests")
}
