package webtransport_test

import (
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

	"github.com/quic-go/quic-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/bridge/internal/bridgetest"
	"github.com/gonetcode/netcode/bridge/transport"
	"github.com/gonetcode/netcode/bridge/webtransport"
	"github.com/gonetcode/netcode/bridge/wire"
	"github.com/gonetcode/netcode/cute"
)

// wireRig is a netcode echo server on UDP and a wire in front of it:
// WebTransport at https://.../wire/<port>, WebSocket at ws://.../wire/<port>.
type wireRig struct {
	server *bridgetest.MuxServer
	wire   *wire.Handler
	srv    *webtransport.Server
	wt, ws string // the URLs of the server's port
	opts   *webtransport.Options
	raw    *rig // for raw sessions: its TLS and QUIC settings
}

func newWireRig(t testing.TB, cfg wire.Config, wc webtransport.Config) *wireRig {
	t.Helper()
	r := &wireRig{server: bridgetest.NewMuxServer(t, 16, transport.MuxConfig{}), raw: &rig{}}
	addr := r.server.Addr
	if cfg.Allow == nil {
		cfg.Allow = []wire.Range{{Addr: addr.Addr(), First: addr.Port(), Last: addr.Port()}}
	}
	r.wire = wire.NewHandler(&cfg)
	wc.Wire = r.wire
	var err error
	r.srv, err = webtransport.NewServer(&wc)
	require.NoError(t, err)
	udp := bridgetest.ListenLoopback(t, "udp4", "127.0.0.1:0")
	served := make(chan error, 1)
	go func() { served <- r.srv.Serve(udp) }()
	mux := http.NewServeMux()
	mux.Handle(wire.DefaultPath, r.wire)
	hs := httptest.NewServer(mux)
	t.Cleanup(func() {
		r.wire.Close()
		require.NoError(t, r.srv.Close())
		require.ErrorIs(t, <-served, http.ErrServerClosed)
		hs.Close()
	})
	bridgetest.Eventually(t, func() bool { return r.srv.Addr() != nil }, "the server serves")
	hashes, err := r.srv.CertificateHashes()
	require.NoError(t, err)
	r.opts = &webtransport.Options{CertificateHashes: hashes}
	r.wt = fmt.Sprintf("https://%s%s%d", r.srv.Addr(), wire.DefaultPath, addr.Port())
	r.ws = fmt.Sprintf("ws%s%s%d", strings.TrimPrefix(hs.URL, "http"), wire.DefaultPath, addr.Port())
	return r
}

// TestWireNetcodeSession: a netcode client carried by the wire, over
// WebTransport datagrams and over the WebSocket fallback, to a netcode
// server on plain UDP that sees it as any UDP client; the wire only
// forwards datagrams.
func TestWireNetcodeSession(t *testing.T) {
	r := newWireRig(t, wire.Config{}, webtransport.Config{})
	for _, tt := range []struct {
		name   string
		dialer func() netcode.Dialer
		lossy  bool
	}{
		{"webtransport", func() netcode.Dialer {
			return netcode.Dialer{ListenPacket: webtransport.ListenPacket(r.wt, r.opts)}
		}, true},
		{"websocket", func() netcode.Dialer {
			return netcode.Dialer{ListenPacket: transport.ListenPacket(r.ws, nil)}
		}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.dialer()
			c, err := d.DialContext(bridgetest.Ctx(t, 10*time.Second), r.server.Token(t))
			require.NoError(t, err)
			defer c.Close()
			require.NoError(t, bridgetest.Echo(t, c, 1, 50, tt.lossy))
		})
	}
	st := r.wire.Stats()
	assert.Equal(t, uint64(2), st.SessionsOpened)
	assert.Positive(t, st.DatagramsToTarget)
	assert.Positive(t, st.DatagramsToBrowser)
}

// TestWireRefusalsOverWebTransport: a WebTransport session to a port
// outside the allowlist, or past the cap per source, ends at once with
// the wire's code, as a browser reads it; nothing reaches the server.
func TestWireRefusalsOverWebTransport(t *testing.T) {
	r := newWireRig(t, wire.Config{MaxSessionsPerSource: 1}, webtransport.Config{})
	sent := r.server.L.Stats().PacketsReceived
	other := fmt.Sprintf("https://%s%s%d", r.srv.Addr(), wire.DefaultPath, r.server.Addr.Port()+1)
	code, reason := ended(t, r.raw.raw(t, other))
	assert.Equal(t, wire.CodeTargetNotAllowed, code)
	assert.Contains(t, reason, wire.ErrTargetNotAllowed.Error())

	first := r.raw.raw(t, r.wt)
	code, _ = ended(t, r.raw.raw(t, r.wt))
	assert.Equal(t, wire.CodeSourceFull, code)
	first.CloseWithError(0, "")
	bridgetest.Eventually(t, func() bool { return r.wire.Sessions() == 0 }, "the session ended")
	st := r.wire.Stats()
	assert.Equal(t, uint64(1), st.RefusedNotAllowed)
	assert.Equal(t, uint64(1), st.RefusedSourceFull)
	assert.Equal(t, sent, r.server.L.Stats().PacketsReceived, "nothing reached the server")
}

// TestWireNotHeld: neither idle QUIC connections nor idle sessions hold
// the wire's caps: a connection that opens no session is closed after
// SessionWait, one past MaxConnections at once, and a session that carries
// nothing ends with 4012 after IdleTimeout; then a session is served.
func TestWireNotHeld(t *testing.T) {
	r := newWireRig(t, wire.Config{MaxSessions: 1, IdleTimeout: 300 * time.Millisecond},
		webtransport.Config{MaxConnections: 2, SessionWait: 200 * time.Millisecond})
	ctx := bridgetest.Ctx(t, 10*time.Second)
	var idle []*quic.Conn
	for range 3 {
		c, err := quic.DialAddr(ctx, r.srv.Addr().String(), r.raw.rawTLS(), rawQUIC())
		if err == nil {
			idle = append(idle, c)
			defer c.CloseWithError(0, "")
		}
	}
	for _, c := range idle {
		select {
		case <-c.Context().Done():
		case <-ctx.Done():
			t.Fatal("an idle QUIC connection was held")
		}
	}
	sess := r.raw.raw(t, r.wt)
	code, _ := ended(t, sess)
	assert.Equal(t, wire.CodeIdleTimeout, code, "an idle session ends")
	bridgetest.Eventually(t, func() bool { return r.wire.Sessions() == 0 }, "its slot is free")
	d := netcode.Dialer{ListenPacket: webtransport.ListenPacket(r.wt, r.opts)}
	c, err := d.DialContext(ctx, r.server.Token(t))
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, bridgetest.Echo(t, c, 2, 5, true))
}

// wireShim is a test client of the wire contract, in Go: a UDP socket on
// loopback whose datagrams it carries over one wire session (WebTransport
// datagrams or WebSocket messages) and whose session's datagrams it
// returns to the last sender. A UDP game client pointed at it runs through
// the wire as a web build's would.
type wireShim struct {
	udp  *net.UDPConn
	pc   net.PacketConn // the wire session: a webtransport.Conn or transport.Conn
	peer atomic.Pointer[netip.AddrPort]
	wg   sync.WaitGroup
}

func newWireShim(t testing.TB, udp *net.UDPConn, pc net.PacketConn) *wireShim {
	t.Helper()
	s := &wireShim{udp: udp, pc: pc}
	s.wg.Go(s.up)
	s.wg.Go(func() {
		buf := make([]byte, 2048)
		for {
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if p := s.peer.Load(); p != nil {
				s.udp.WriteToUDPAddrPort(buf[:n], *p)
			}
		}
	})
	t.Cleanup(func() {
		pc.Close()
		s.udp.Close()
		s.wg.Wait()
	})
	return s
}

func (s *wireShim) up() {
	buf := make([]byte, 2048)
	for {
		n, from, err := s.udp.ReadFromUDPAddrPort(buf)
		if err != nil {
			return
		}
		s.peer.Store(&from)
		if _, err := s.pc.WriteTo(buf[:n], nil); err != nil {
			return
		}
	}
}

// TestWireCuteSession: a Cute Protocol session (package cute's client and
// server) through the wire, over WebTransport datagrams and over the
// WebSocket fallback. The token lists a placeholder address (the shim's,
// as a web build's lists 127.0.0.1:<port>), which the server is told is
// its own (ServerConfig.PublicAddr): the client never reaches the server
// but through the wire, and the wire forwards the Cute packets unread.
func TestWireCuteSession(t *testing.T) {
	pub, sec := cute.GenerateKeyPair()
	for _, transportName := range []string{"webtransport", "websocket"} {
		t.Run(transportName, func(t *testing.T) {
			ctx := bridgetest.Ctx(t, 20*time.Second)
			// The shim's socket first: its address is the token's.
			var pc net.PacketConn
			shimUDP := bridgetest.ListenLoopback(t, "udp4", "127.0.0.1:0")
			placeholder := netip.MustParseAddrPort(shimUDP.LocalAddr().String())
			srv, err := cute.Listen("udp4", "127.0.0.1:0", &cute.ServerConfig{
				ApplicationID: 0x5eed, PublicKey: pub, SecretKey: sec, PublicAddr: placeholder.String(),
			})
			require.NoError(t, err)
			defer srv.Close()
			target := netip.MustParseAddrPort(srv.Addr().String())
			w := wire.NewHandler(&wire.Config{Allow: []wire.Range{{Addr: target.Addr(), First: target.Port(), Last: target.Port()}}})
			defer w.Close()
			wts, err := webtransport.NewServer(&webtransport.Config{Wire: w})
			require.NoError(t, err)
			udp := bridgetest.ListenLoopback(t, "udp4", "127.0.0.1:0")
			served := make(chan error, 1)
			go func() { served <- wts.Serve(udp) }()
			defer func() {
				w.Close()
				wts.Close()
				<-served
			}()
			bridgetest.Eventually(t, func() bool { return wts.Addr() != nil }, "serving")
			switch transportName {
			case "webtransport":
				hashes, err := wts.CertificateHashes()
				require.NoError(t, err)
				pc, err = webtransport.Dial(ctx, fmt.Sprintf("https://%s%s%d", wts.Addr(), wire.DefaultPath, target.Port()),
					&webtransport.Options{CertificateHashes: hashes})
				require.NoError(t, err)
			case "websocket":
				mux := http.NewServeMux()
				mux.Handle(wire.DefaultPath, w)
				hs := httptest.NewServer(mux)
				defer hs.Close()
				pc, err = transport.Dial(ctx, fmt.Sprintf("ws%s%s%d", strings.TrimPrefix(hs.URL, "http"), wire.DefaultPath, target.Port()), nil)
				require.NoError(t, err)
			}
			newWireShim(t, shimUDP, pc)
			tok, err := cute.GenerateToken(&cute.TokenParams{
				ApplicationID: 0x5eed, ClientID: bridgetest.NextClientID(), SecretKey: sec,
				ServerAddrs: []netip.AddrPort{placeholder}, ExpireSeconds: 30,
			})
			require.NoError(t, err)
			accepted := make(chan *cute.Conn, 1)
			go func() {
				c, err := srv.AcceptConn(ctx)
				if err == nil {
					accepted <- c
				}
				close(accepted)
			}()
			c, err := cute.DialContext(ctx, tok)
			require.NoError(t, err)
			defer c.Close()
			sc, ok := <-accepted
			require.True(t, ok, "the server accepted the client")
			defer sc.Close()
			buf := make([]byte, 2048)
			for i, p := range []string{"cute", "over", "the wire"} {
				_, err := c.Write([]byte(p))
				require.NoError(t, err)
				require.NoError(t, sc.SetReadDeadline(time.Now().Add(5*time.Second)))
				n, err := sc.Read(buf)
				require.NoError(t, err, "message %d", i)
				require.Equal(t, p, string(buf[:n]))
				_, err = sc.Write(buf[:n])
				require.NoError(t, err)
				require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
				n, err = c.Read(buf)
				require.NoError(t, err)
				assert.Equal(t, p, string(buf[:n]))
			}
			assert.Positive(t, w.Stats().DatagramsToTarget)
		})
	}
}
