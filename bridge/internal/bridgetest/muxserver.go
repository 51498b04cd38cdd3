package bridgetest

import (
	"context"
	"net"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/bridge/transport"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/token"
)

// MuxServer is a netcode echo server on a Mux: UDP on loopback and the
// WebSocket transport over HTTP.
type MuxServer struct {
	L    *netcode.Listener
	Mux  *transport.Mux
	HTTP *httptest.Server
	URL  string // the Mux's WebSocket URL
	Key  crypto.Key
	Addr netip.AddrPort

	mu    sync.Mutex
	conns []*netcode.Conn
	wg    sync.WaitGroup
}

// NewMuxServer starts a MuxServer for maxClients clients; the test's end
// closes it.
func NewMuxServer(t testing.TB, maxClients int, cfg transport.MuxConfig) *MuxServer {
	t.Helper()
	return NewMuxServerVia(t, maxClients, cfg, func(m *transport.Mux) net.PacketConn { return m })
}

// NewMuxServerVia is NewMuxServer with the Listener over via(mux).
func NewMuxServerVia(t testing.TB, maxClients int, cfg transport.MuxConfig, via func(*transport.Mux) net.PacketConn) *MuxServer {
	t.Helper()
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	udp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	mux := transport.NewMux(udp, &cfg)
	l, err := netcode.NewListener(via(mux), &netcode.ServerConfig{
		ProtocolID: ProtocolID,
		PrivateKey: key,
		MaxClients: maxClients,
	})
	if err != nil {
		mux.Close()
		require.NoError(t, err)
	}
	hs := httptest.NewServer(mux.Handler())
	s := &MuxServer{
		L:    l,
		Mux:  mux,
		HTTP: hs,
		URL:  "ws" + strings.TrimPrefix(hs.URL, "http"),
		Key:  key,
		Addr: netip.MustParseAddrPort(l.Addr().String()),
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := l.AcceptConn(context.Background())
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				EchoUntilError(c)
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close() // closes the Mux
		hs.Close()
		s.wg.Wait()
	})
	return s
}

// Token mints a connect token for addrs, by default the server's own.
func (s *MuxServer) Token(t testing.TB, addrs ...netip.AddrPort) []byte {
	t.Helper()
	if len(addrs) == 0 {
		addrs = []netip.AddrPort{s.Addr}
	}
	b, err := token.Generate(&token.Params{
		ProtocolID:     ProtocolID,
		ClientID:       NextClientID(),
		PrivateKey:     s.Key,
		ServerAddrs:    addrs,
		ExpireSeconds:  30,
		TimeoutSeconds: 5,
	})
	require.NoError(t, err)
	return b
}

// DialWS connects a netcode client over the WebSocket transport.
func (s *MuxServer) DialWS(t testing.TB) *netcode.Conn {
	t.Helper()
	d := netcode.Dialer{ListenPacket: transport.ListenPacket(s.URL, nil)}
	c, err := d.DialContext(Ctx(t, 10*time.Second), s.Token(t))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// DialUDP connects a netcode client over UDP.
func (s *MuxServer) DialUDP(t testing.TB) *netcode.Conn {
	t.Helper()
	c, err := netcode.DialContext(Ctx(t, 10*time.Second), s.Token(t))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// ServerConns returns the server side of the accepted connections.
func (s *MuxServer) ServerConns() []*netcode.Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*netcode.Conn(nil), s.conns...)
}
