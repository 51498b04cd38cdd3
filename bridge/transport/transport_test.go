package transport_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/bridge"
	"github.com/gonetcode/netcode/bridge/internal/bridgetest"
	"github.com/gonetcode/netcode/bridge/internal/wsbridge"
	"github.com/gonetcode/netcode/bridge/transport"
	"github.com/gonetcode/netcode/internal/testing/stacks"
	"github.com/gonetcode/netcode/protocol"
)

func TestTransportEchoUDPAndWebSocket(t *testing.T) {
	s := bridgetest.NewMuxServer(t, 16, transport.MuxConfig{})
	const wsClients = 3
	conns := []*netcode.Conn{s.DialUDP(t)}
	for range wsClients {
		conns = append(conns, s.DialWS(t))
	}
	assert.Equal(t, 1+wsClients, s.L.Stats().Connected)
	assert.Equal(t, wsClients, s.Mux.Sessions())

	// The server sees WebSocket clients at transport addresses, the UDP
	// client at its UDP address.
	bridgetest.Eventually(t, func() bool { return len(s.ServerConns()) == 1+wsClients }, "accepted")
	viaWS := 0
	for _, c := range s.ServerConns() {
		ap := netip.MustParseAddrPort(c.RemoteAddr().String())
		if transport.IsSessionAddr(ap) {
			viaWS++
		} else {
			assert.True(t, ap.Addr().IsLoopback(), "%v", ap)
		}
	}
	assert.Equal(t, wsClients, viaWS)

	// All at once, both ways, byte for byte.
	const n = 300
	errc := make(chan error, len(conns))
	for i, c := range conns {
		go func() { errc <- bridgetest.Echo(t, c, i, n, i == 0) }()
	}
	for range conns {
		require.NoError(t, <-errc)
	}

	// The server writes first too.
	for _, sc := range s.ServerConns() {
		_, err := sc.Write([]byte("hello from the server"))
		require.NoError(t, err)
	}
	buf := make([]byte, netcode.MaxPayloadBytes)
	for _, c := range conns[1:] {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		m, err := c.Read(buf)
		require.NoError(t, err)
		assert.Equal(t, "hello from the server", string(buf[:m]))
	}
}

func TestTransportCloseFreesSlot(t *testing.T) {
	s := bridgetest.NewMuxServer(t, 4, transport.MuxConfig{})
	c := s.DialWS(t)
	require.Equal(t, 1, s.L.Stats().Connected)
	require.Equal(t, 1, s.Mux.Sessions())
	require.NoError(t, c.Close())
	// The disconnect packets went over the WebSocket before it closed.
	bridgetest.Eventually(t, func() bool { return s.L.Stats().Connected == 0 }, "slot freed")
	bridgetest.Eventually(t, func() bool { return s.Mux.Sessions() == 0 }, "session ended")
	// A new client can take the slot.
	c2 := s.DialWS(t)
	require.NoError(t, bridgetest.Echo(t, c2, 1, 10, false))
}

func TestTransportSessionCap(t *testing.T) {
	s := bridgetest.NewMuxServer(t, 4, transport.MuxConfig{MaxSessions: 1})
	c := s.DialWS(t)
	require.NoError(t, bridgetest.Echo(t, c, 0, 5, false))

	// The second session is accepted and closed at once with 1013.
	ws := bridgetest.RawWS(t, s.URL)
	ce := bridgetest.Closed(t, ws, 5*time.Second)
	assert.Equal(t, websocket.StatusTryAgainLater, ce.Code)

	// A netcode client over a refused session fails to connect, saying why.
	d := netcode.Dialer{ListenPacket: transport.ListenPacket(s.URL, nil)}
	_, err := d.DialContext(bridgetest.Ctx(t, 30*time.Second), s.Token(t))
	require.ErrorIs(t, err, bridge.ErrBridgeFull)

	// Once the first leaves, there is room again.
	require.NoError(t, c.Close())
	bridgetest.Eventually(t, func() bool { return s.Mux.Sessions() == 0 }, "session ended")
	c2 := s.DialWS(t)
	require.NoError(t, bridgetest.Echo(t, c2, 1, 5, false))
	assert.Equal(t, 1, s.L.Stats().Connected)
}

func TestTransportBadMessages(t *testing.T) {
	s := bridgetest.NewMuxServer(t, 4, transport.MuxConfig{})

	t.Run("oversize", func(t *testing.T) {
		ws := bridgetest.RawWS(t, s.URL)
		require.NoError(t, ws.Write(bridgetest.Ctx(t, 5*time.Second), websocket.MessageBinary, make([]byte, protocol.MaxPacketBytes+1)))
		ce := bridgetest.Closed(t, ws, 5*time.Second)
		assert.Equal(t, websocket.StatusMessageTooBig, ce.Code)
	})
	t.Run("text", func(t *testing.T) {
		ws := bridgetest.RawWS(t, s.URL)
		require.NoError(t, ws.Write(bridgetest.Ctx(t, 5*time.Second), websocket.MessageText, []byte("hi")))
		ce := bridgetest.Closed(t, ws, 5*time.Second)
		assert.Equal(t, websocket.StatusUnsupportedData, ce.Code)
	})
	t.Run("junk is ignored", func(t *testing.T) {
		ws := bridgetest.RawWS(t, s.URL)
		ctx := bridgetest.Ctx(t, 5*time.Second)
		for i := range 200 {
			b := make([]byte, i*6%(protocol.MaxPacketBytes+1))
			for j := range b {
				b[j] = byte(i * j)
			}
			require.NoError(t, ws.Write(ctx, websocket.MessageBinary, b))
		}
		// The session lives on, and nothing is answered.
		rctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, _, err := ws.Read(rctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
	t.Run("no subprotocol", func(t *testing.T) {
		_, resp, err := websocket.Dial(bridgetest.Ctx(t, 5*time.Second), s.URL, nil)
		require.Error(t, err)
		require.NotNil(t, resp)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	})
	t.Run("cross origin", func(t *testing.T) {
		_, resp, err := websocket.Dial(bridgetest.Ctx(t, 5*time.Second), s.URL, &websocket.DialOptions{
			Subprotocols: []string{transport.Subprotocol},
			HTTPHeader:   http.Header{"Origin": []string{"https://evil.example"}},
		})
		require.Error(t, err)
		require.NotNil(t, resp)
		assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	})
	// The server is unharmed.
	c := s.DialWS(t)
	require.NoError(t, bridgetest.Echo(t, c, 0, 5, false))
}

func TestTransportIdleTimeout(t *testing.T) {
	s := bridgetest.NewMuxServer(t, 4, transport.MuxConfig{IdleTimeout: 400 * time.Millisecond})
	ws := bridgetest.RawWS(t, s.URL)
	ce := bridgetest.Closed(t, ws, 5*time.Second)
	assert.Equal(t, wsbridge.CodeIdleTimeout, ce.Code)
	// A connected client sends keep-alives, which keep its session open.
	c := s.DialWS(t)
	time.Sleep(time.Second)
	require.NoError(t, bridgetest.Echo(t, c, 0, 5, false))
}

func TestTransportListenerClose(t *testing.T) {
	s := bridgetest.NewMuxServer(t, 8, transport.MuxConfig{})
	udp := s.DialUDP(t)
	ws1, ws2 := s.DialWS(t), s.DialWS(t)
	require.Equal(t, 3, s.L.Stats().Connected)

	// Closing the Listener closes the Mux; the clients hear the disconnect.
	require.NoError(t, s.L.Close())
	for _, c := range []*netcode.Conn{udp, ws1, ws2} {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err := c.Read(make([]byte, netcode.MaxPayloadBytes))
		assert.ErrorIs(t, err, io.EOF)
	}
	assert.Equal(t, 0, s.Mux.Sessions())
	assert.ErrorIs(t, s.Mux.Close(), net.ErrClosed)
	// New sessions are refused.
	_, resp, err := websocket.Dial(bridgetest.Ctx(t, 5*time.Second), s.URL, &websocket.DialOptions{
		Subprotocols: []string{transport.Subprotocol},
	})
	require.Error(t, err)
	require.NotNil(t, resp)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
}

func TestMuxPacketConn(t *testing.T) {
	udp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	mux := transport.NewMux(udp, &transport.MuxConfig{})
	defer mux.Close()
	hs := httptest.NewServer(mux.Handler())
	defer hs.Close()
	url := "ws" + strings.TrimPrefix(hs.URL, "http")
	assert.Equal(t, udp.LocalAddr(), mux.LocalAddr())

	// A read deadline.
	require.NoError(t, mux.SetReadDeadline(time.Now().Add(20*time.Millisecond)))
	_, _, err = mux.ReadFrom(make([]byte, 1500))
	var ne net.Error
	require.ErrorAs(t, err, &ne)
	assert.True(t, ne.Timeout())
	require.NoError(t, mux.SetReadDeadline(time.Time{}))

	// UDP both ways.
	peer, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer peer.Close()
	_, err = peer.WriteTo([]byte("udp ping"), udp.LocalAddr())
	require.NoError(t, err)
	buf := make([]byte, 1500)
	n, from, err := mux.ReadFrom(buf)
	require.NoError(t, err)
	assert.Equal(t, "udp ping", string(buf[:n]))
	assert.Equal(t, peer.LocalAddr().String(), from.String())
	_, err = mux.WriteTo([]byte("udp pong"), from)
	require.NoError(t, err)
	peer.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _, err = peer.ReadFrom(buf)
	require.NoError(t, err)
	assert.Equal(t, "udp pong", string(buf[:n]))

	// Two WebSocket clients, told apart by their addresses.
	c1, err := transport.Dial(bridgetest.Ctx(t, 5*time.Second), url, nil)
	require.NoError(t, err)
	defer c1.Close()
	c2, err := transport.Dial(bridgetest.Ctx(t, 5*time.Second), url, nil)
	require.NoError(t, err)
	defer c2.Close()
	server := net.UDPAddrFromAddrPort(netip.MustParseAddrPort(udp.LocalAddr().String()))
	addrs := map[string]net.Addr{}
	for i, c := range []*transport.Conn{c1, c2} {
		msg := fmt.Sprintf("ws ping %d", i)
		_, err = c.WriteTo([]byte(msg), server)
		require.NoError(t, err)
		n, from, err = mux.ReadFrom(buf)
		require.NoError(t, err)
		require.Equal(t, msg, string(buf[:n]))
		ap := netip.MustParseAddrPort(from.String())
		assert.True(t, transport.IsSessionAddr(ap), "%v", ap)
		addrs[msg] = from
	}
	require.Len(t, addrs, 2)
	require.NotEqual(t, addrs["ws ping 0"].String(), addrs["ws ping 1"].String())
	for i, c := range []*transport.Conn{c1, c2} {
		msg := fmt.Sprintf("ws ping %d", i)
		_, err = mux.WriteTo([]byte("pong "+msg), addrs[msg])
		require.NoError(t, err)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, from, err := c.ReadFrom(buf)
		require.NoError(t, err)
		assert.Equal(t, "pong "+msg, string(buf[:n]))
		// Attributed to the address the client wrote to.
		assert.Equal(t, server.String(), from.String())
	}
	// Sizes.
	// (The sentinels are unexported: the errors are *net.OpError of the
	// write with their text.)
	writeFails := func(err error, why string) {
		t.Helper()
		var oe *net.OpError
		require.ErrorAs(t, err, &oe)
		assert.Equal(t, "write", oe.Op)
		assert.ErrorContains(t, err, why)
	}
	_, err = c1.WriteTo(make([]byte, protocol.MaxPacketBytes+1), server)
	writeFails(err, "packet larger than 1300 bytes")
	_, err = c1.WriteTo(nil, server)
	writeFails(err, "empty packet")
	_, err = mux.WriteTo(make([]byte, protocol.MaxPacketBytes+1), addrs["ws ping 0"])
	writeFails(err, "packet larger than 1300 bytes")
	// To a session that never existed: dropped, like UDP.
	_, err = mux.WriteTo([]byte("x"), net.UDPAddrFromAddrPort(netip.MustParseAddrPort("[100::ffff]:1")))
	require.NoError(t, err)

	// Close ends the sessions: the clients' reads fail.
	require.NoError(t, mux.Close())
	c1.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, _, err = c1.ReadFrom(buf)
	require.ErrorIs(t, err, net.ErrClosed)
	_, _, err = mux.ReadFrom(buf)
	require.ErrorIs(t, err, net.ErrClosed)
	require.NoError(t, c1.Close())
	require.ErrorIs(t, c1.Close(), net.ErrClosed)
}

func BenchmarkTransportRoundTrip(b *testing.B) {
	udp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(b, err)
	mux := transport.NewMux(udp, &transport.MuxConfig{})
	defer mux.Close()
	hs := httptest.NewServer(mux.Handler())
	defer hs.Close()
	c, err := transport.Dial(context.Background(), "ws"+strings.TrimPrefix(hs.URL, "http"), nil)
	require.NoError(b, err)
	defer c.Close()
	server := netip.MustParseAddrPort(udp.LocalAddr().String())
	p := make([]byte, 1100)
	buf := make([]byte, 1500)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := c.WriteToUDPAddrPort(p, server); err != nil {
			b.Fatal(err)
		}
		n, from, err := mux.ReadFromUDPAddrPort(buf)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := mux.WriteToUDPAddrPort(buf[:n], from); err != nil {
			b.Fatal(err)
		}
		if _, _, err := c.ReadFromUDPAddrPort(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// fakeUDP is a net.PacketConn without the netip.AddrPort methods whose
// datagrams come from a channel, with any source address.
type fakeUDP struct {
	in     chan fakeDatagram
	out    chan fakeDatagram
	closed chan struct{}
	once   sync.Once
}

type fakeDatagram struct {
	b    []byte
	addr net.Addr
}

func newFakeUDP() *fakeUDP {
	return &fakeUDP{in: make(chan fakeDatagram, 16), out: make(chan fakeDatagram, 16), closed: make(chan struct{})}
}

func (f *fakeUDP) ReadFrom(b []byte) (int, net.Addr, error) {
	select {
	case d := <-f.in:
		return copy(b, d.b), d.addr, nil
	case <-f.closed:
		return 0, nil, net.ErrClosed
	}
}

func (f *fakeUDP) WriteTo(b []byte, addr net.Addr) (int, error) {
	f.out <- fakeDatagram{append([]byte(nil), b...), addr}
	return len(b), nil
}

func (f *fakeUDP) Close() error {
	f.once.Do(func() { close(f.closed) })
	return nil
}

func (f *fakeUDP) LocalAddr() net.Addr {
	return &net.UDPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 40000}
}
func (f *fakeUDP) SetDeadline(time.Time) error      { return nil }
func (f *fakeUDP) SetReadDeadline(time.Time) error  { return nil }
func (f *fakeUDP) SetWriteDeadline(time.Time) error { return nil }

func TestMuxDropsForgedTransportSources(t *testing.T) {
	f := newFakeUDP()
	mux := transport.NewMux(f, &transport.MuxConfig{})
	defer mux.Close()
	forged := &net.UDPAddr{IP: net.ParseIP("100::1"), Port: 1}
	peer := &net.UDPAddr{IP: net.IPv4(198, 51, 100, 7), Port: 5000}
	f.in <- fakeDatagram{[]byte("forged"), forged}
	f.in <- fakeDatagram{[]byte("real"), peer}
	buf := make([]byte, 1500)
	mux.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, from, err := mux.ReadFrom(buf)
	require.NoError(t, err)
	assert.Equal(t, "real", string(buf[:n]))
	assert.Equal(t, peer.String(), from.String())

	// Replies to UDP peers go to the socket; to transport addresses, never.
	_, err = mux.WriteTo([]byte("reply"), from)
	require.NoError(t, err)
	d := <-f.out
	assert.Equal(t, "reply", string(d.b))
	_, err = mux.WriteTo([]byte("to nobody"), forged)
	require.NoError(t, err)
	select {
	case d := <-f.out:
		t.Fatalf("sent %q to %v over UDP", d.b, d.addr)
	default:
	}
}

// BenchmarkTransportNetcodeEcho measures one payload's round trip between a
// netcode client on the WebSocket transport and an echo server on a Mux.
func BenchmarkTransportNetcodeEcho(b *testing.B) {
	s := bridgetest.NewMuxServer(b, 4, transport.MuxConfig{})
	c := s.DialWS(b)
	p := make([]byte, 100)
	buf := make([]byte, netcode.MaxPayloadBytes)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := c.Write(p); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Read(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// newBareMux serves a Mux (without a Listener) over HTTP.
func newBareMux(t testing.TB, cfg transport.MuxConfig) (*transport.Mux, string) {
	t.Helper()
	udp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	mux := transport.NewMux(udp, &cfg)
	hs := httptest.NewServer(mux.Handler())
	t.Cleanup(func() {
		mux.Close()
		hs.Close()
	})
	return mux, "ws" + strings.TrimPrefix(hs.URL, "http")
}

func TestMuxWriteTimeout(t *testing.T) {
	mux, url := newBareMux(t, transport.MuxConfig{WriteTimeout: 200 * time.Millisecond, SendQueue: 4})
	// A peer that sends one message and never reads.
	_, from := peerOf(t, mux, url)
	// Fill its TCP connection: writes never block the caller, the session's
	// writer stalls, and the write timeout ends the session.
	p := make([]byte, protocol.MaxPacketBytes)
	deadline := time.Now().Add(10 * time.Second)
	for mux.Sessions() > 0 {
		require.True(t, time.Now().Before(deadline), "session not ended")
		for range 64 {
			_, err := mux.WriteToUDPAddrPort(p, from)
			require.NoError(t, err)
		}
		time.Sleep(time.Millisecond)
	}
	assert.NotZero(t, mux.Dropped())
}

// TestMuxIdleTimeoutEitherDirection checks that datagrams sent to a peer
// count as activity: a peer that only receives stays connected for many
// idle periods, and a session silent both ways is ended.
func TestMuxIdleTimeoutEitherDirection(t *testing.T) {
	const idle = time.Second
	for _, muxSends := range []bool{true, false} {
		t.Run(fmt.Sprintf("muxSends=%v", muxSends), func(t *testing.T) {
			mux, url := newBareMux(t, transport.MuxConfig{IdleTimeout: idle})
			ws, from := peerOf(t, mux, url)
			if muxSends {
				stop := bridgetest.SendEvery(idle/20, func() error {
					_, err := mux.WriteToUDPAddrPort([]byte("tick"), from)
					return err
				})
				bridgetest.ReadTicks(t, ws, 4*idle, "a peer that only receives")
				stop()
				assert.Equal(t, 1, mux.Sessions())
			}
			ce := bridgetest.Closed(t, ws, 10*idle)
			assert.Equal(t, wsbridge.CodeIdleTimeout, ce.Code, "reason %q", ce.Reason)
			bridgetest.Eventually(t, func() bool { return mux.Sessions() == 0 }, "session not ended")
		})
	}
}

// TestMuxCloseWithStalledPeer checks that Close returns when a peer stops
// reading while its session's writer is blocked and WriteTimeout is
// disabled.
func TestMuxCloseWithStalledPeer(t *testing.T) {
	udp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	mux := transport.NewMux(udp, &transport.MuxConfig{WriteTimeout: -1, IdleTimeout: -1, SendQueue: 16})
	hs := httptest.NewServer(mux.Handler())
	defer hs.Close()
	url := "ws" + strings.TrimPrefix(hs.URL, "http")

	// A peer that sends one message and never reads.
	_, from := peerOf(t, mux, url)

	// Queue large datagrams until the TCP buffers are full and the
	// session's writer is parked in the poller inside a WebSocket write:
	// with a peer that never reads, it stays there.
	p := make([]byte, protocol.MaxPacketBytes)
	for deadline := time.Now().Add(60 * time.Second); !stacks.Blocked("IO wait", "transport.(*muxSession).write"); {
		require.True(t, time.Now().Before(deadline), "the writer never stalled")
		for range 64 {
			_, err := mux.WriteToUDPAddrPort(p, from)
			require.NoError(t, err)
		}
	}

	done := make(chan error, 1)
	go func() { done <- mux.Close() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return with a peer that does not read")
	}
	assert.Equal(t, 0, mux.Sessions())
}

func TestMuxCloseWithBusySessions(t *testing.T) {
	mux, url := newBareMux(t, transport.MuxConfig{})
	var wg sync.WaitGroup
	server := netip.MustParseAddrPort(mux.LocalAddr().String())
	// An echo loop on the Mux.
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 1500)
		for {
			n, from, err := mux.ReadFromUDPAddrPort(buf)
			if err != nil {
				return
			}
			mux.WriteToUDPAddrPort(buf[:n], from)
		}
	}()
	const clients = 16
	ready := make(chan struct{}, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := transport.Dial(context.Background(), url, nil)
			if err != nil {
				ready <- struct{}{}
				return
			}
			defer c.Close()
			buf := make([]byte, 1500)
			msg := []byte(fmt.Sprintf("client %d", i))
			for j := 0; ; j++ {
				if _, err := c.WriteToUDPAddrPort(msg, server); err != nil {
					if j == 0 {
						ready <- struct{}{}
					}
					return
				}
				if _, _, err := c.ReadFromUDPAddrPort(buf); err != nil {
					if j == 0 {
						ready <- struct{}{}
					}
					return
				}
				if j == 0 {
					ready <- struct{}{}
				}
			}
		}()
	}
	for range clients {
		<-ready
	}
	require.NoError(t, mux.Close())
	wg.Wait()
	assert.Equal(t, 0, mux.Sessions())
}

// peerOf opens a raw WebSocket peer on url that sends one message, and
// returns it with the address the Mux gives it, read from the Mux.
func peerOf(t *testing.T, mux *transport.Mux, url string) (*websocket.Conn, netip.AddrPort) {
	t.Helper()
	ws := bridgetest.RawWS(t, url)
	require.NoError(t, ws.Write(bridgetest.Ctx(t, 5*time.Second), websocket.MessageBinary, []byte("hi")))
	require.NoError(t, mux.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, from, err := mux.ReadFromUDPAddrPort(make([]byte, 1500))
	require.NoError(t, err)
	return ws, from
}

// TestMuxWatchdogsOnWheel: a Mux's sessions run their watchdogs on the
// Mux's one timer wheel (one timer each), and the watchdogs work there:
// the idle timeout ends both sessions, which leave nothing armed.
func TestMuxWatchdogsOnWheel(t *testing.T) {
	mux, url := newBareMux(t, transport.MuxConfig{IdleTimeout: 300 * time.Millisecond})
	ws1, _ := peerOf(t, mux, url)
	ws2, _ := peerOf(t, mux, url)
	require.Equal(t, 2, transport.WheelArmed(mux), "each session's watchdog is on the wheel")
	for _, ws := range []*websocket.Conn{ws1, ws2} {
		assert.Equal(t, wsbridge.CodeIdleTimeout, bridgetest.Closed(t, ws, 5*time.Second).Code)
	}
	require.Eventually(t, func() bool { return mux.Sessions() == 0 && transport.WheelArmed(mux) == 0 }, 5*time.Second, time.Millisecond,
		"an ended session left its watchdog armed")
}
