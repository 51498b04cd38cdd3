package webtransport_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/gonetcode/netcode/bridge/transport"
	"github.com/gonetcode/netcode/bridge/webtransport"
	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/devcert"
	"github.com/gonetcode/netcode/token"
)

// rig is a netcode echo server whose Listener reads a Mux (UDP and the
// WebSocket transport), a relay in front of it, and a WebTransport Server
// serving both, all on one network's loopback.
type rig struct {
	l     *netcode.Listener
	mux   *transport.Mux
	relay *bridge.Handler
	srv   *webtransport.Server
	ws    string // the Mux's WebSocket URL
	wsr   string // the relay's WebSocket URL
	key   crypto.Key
	addr  netip.AddrPort // the server's UDP address
	opts  *webtransport.Options

	relayURL, transportURL string

	mu    sync.Mutex
	conns []*netcode.Conn
}

type rigConfig struct {
	network string // "udp4" (the default) or "udp6"
	relay   bridge.Config
	mux     transport.MuxConfig
	tls     *tls.Config // production: a certificate; nil: development ones
	wt      webtransport.Config
}

func loopback(network string) string {
	if network == "udp6" {
		return "[::1]:0"
	}
	return "127.0.0.1:0"
}

func newRig(t testing.TB, rc rigConfig) *rig {
	t.Helper()
	if rc.network == "" {
		rc.network = "udp4"
	}
	key, err := crypto.GenerateKey()
	require.NoError(t, err)
	r := &rig{key: key}
	r.mux = transport.NewMux(bridgetest.ListenLoopback(t, rc.network, loopback(rc.network)), &rc.mux)
	r.l, err = netcode.NewListener(r.mux, &netcode.ServerConfig{ProtocolID: bridgetest.ProtocolID, PrivateKey: key, MaxClients: 64})
	require.NoError(t, err)
	r.addr = netip.MustParseAddrPort(r.l.Addr().String())
	rc.relay.AllowedServers = append(rc.relay.AllowedServers, r.addr)
	r.relay = bridge.NewHandler(&rc.relay)
	rc.wt.Relay, rc.wt.Mux, rc.wt.TLSConfig = r.relay, r.mux, rc.tls
	r.srv, err = webtransport.NewServer(&rc.wt)
	require.NoError(t, err)
	udp := bridgetest.ListenLoopback(t, rc.network, loopback(rc.network))
	served := make(chan error, 1)
	go func() { served <- r.srv.Serve(udp) }()
	hm := httptest.NewServer(r.mux.Handler())
	hr := httptest.NewServer(r.relay)
	r.ws = "ws" + strings.TrimPrefix(hm.URL, "http")
	r.wsr = "ws" + strings.TrimPrefix(hr.URL, "http")
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := r.l.AcceptConn(context.Background())
			if err != nil {
				return
			}
			r.mu.Lock()
			r.conns = append(r.conns, c)
			r.mu.Unlock()
			wg.Go(func() { bridgetest.EchoUntilError(c) })
		}
	})
	t.Cleanup(func() {
		r.relay.Close()
		r.l.Close() // closes the Mux
		require.NoError(t, r.srv.Close())
		require.ErrorIs(t, <-served, http.ErrServerClosed)
		hm.Close()
		hr.Close()
		wg.Wait()
	})
	bridgetest.Eventually(t, func() bool { return r.srv.Addr() != nil }, "the server serves")
	hashes, err := r.srv.CertificateHashes()
	require.NoError(t, err)
	if rc.tls == nil {
		require.Len(t, hashes, 2)
	} else {
		require.Empty(t, hashes)
	}
	r.opts = &webtransport.Options{CertificateHashes: hashes}
	host := net.JoinHostPort(r.srv.Addr().IP.String(), fmt.Sprint(r.srv.Addr().Port))
	r.relayURL = "https://" + host + webtransport.DefaultRelayPath
	r.transportURL = "https://" + host + webtransport.DefaultTransportPath
	return r
}

func (r *rig) token(t testing.TB) []byte {
	t.Helper()
	b, err := token.Generate(&token.Params{
		ProtocolID:     bridgetest.ProtocolID,
		ClientID:       bridgetest.NextClientID(),
		PrivateKey:     r.key,
		ServerAddrs:    []netip.AddrPort{r.addr},
		ExpireSeconds:  30,
		TimeoutSeconds: 5,
	})
	require.NoError(t, err)
	return b
}

// dialTransport connects a netcode client over WebTransport.
func (r *rig) dialTransport(t testing.TB) *netcode.Conn {
	t.Helper()
	d := netcode.Dialer{ListenPacket: webtransport.ListenPacket(r.transportURL, r.opts)}
	c, err := d.DialContext(bridgetest.Ctx(t, 10*time.Second), r.token(t))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func (r *rig) dialRelay(t testing.TB) *webtransport.RelayConn {
	t.Helper()
	c, err := webtransport.DialRelay(bridgetest.Ctx(t, 10*time.Second), r.relayURL, r.token(t), r.opts)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// echoRelay sends n payloads one at a time over a relay session and checks
// each echo; sizes cycle through 1..1200 as the session's datagrams allow.
func echoRelay(c *webtransport.RelayConn, client, n int) error {
	buf := make([]byte, 1500)
	for i := range n {
		p := bridgetest.Payload(client, i)
		if len(p) > c.MaxDatagram() {
			p = p[:c.MaxDatagram()]
		}
		if _, err := c.Write(p); err != nil {
			return fmt.Errorf("client %d write %d: %w", client, i, err)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		m, err := c.Read(buf)
		if err != nil {
			return fmt.Errorf("client %d read %d: %w", client, i, err)
		}
		if !bytes.Equal(buf[:m], p) {
			return fmt.Errorf("client %d message %d: echo differs", client, i)
		}
	}
	return nil
}

// TestEndToEnd: Go WebTransport clients through the bridge to a real
// netcode Listener, over real UDP on IPv4 and IPv6, in both modes; in
// transport mode the one Listener serves UDP, WebSocket and WebTransport
// clients at once, and every payload size the session carries.
func TestEndToEnd(t *testing.T) {
	for _, network := range []string{"udp4", "udp6"} {
		t.Run(network, func(t *testing.T) {
			r := newRig(t, rigConfig{network: network})
			var wg sync.WaitGroup
			errs := make(chan error, 16)
			for i := range 3 {
				wt := r.dialTransport(t)
				wg.Go(func() { errs <- bridgetest.Echo(t, wt, i, 200, false) })
				rc := r.dialRelay(t)
				assert.Equal(t, 64, rc.MaxClients())
				wg.Go(func() { errs <- echoRelay(rc, 10+i, 200) })
			}
			udp, err := netcode.DialContext(bridgetest.Ctx(t, 10*time.Second), r.token(t))
			require.NoError(t, err)
			defer udp.Close()
			wg.Go(func() { errs <- bridgetest.Echo(t, udp, 20, 100, true) })
			wsd := netcode.Dialer{ListenPacket: transport.ListenPacket(r.ws, nil)}
			ws, err := wsd.DialContext(bridgetest.Ctx(t, 10*time.Second), r.token(t))
			require.NoError(t, err)
			defer ws.Close()
			wg.Go(func() { errs <- bridgetest.Echo(t, ws, 21, 100, false) })
			assert.Equal(t, 4, r.mux.Sessions(), "3 WebTransport and 1 WebSocket sessions in the Mux")
			assert.Equal(t, 3, r.relay.Sessions(), "3 WebTransport sessions in the relay")
			wg.Wait()
			close(errs)
			for err := range errs {
				require.NoError(t, err)
			}
		})
	}
}

// closeOf waits for the session behind err to end and returns its close.
func closeOf(t testing.TB, err error) websocket.CloseError {
	t.Helper()
	var ce websocket.CloseError
	require.True(t, errors.As(err, &ce), "want a close, got %v", err)
	return ce
}

// TestInfo: the page's Info names the sessions on the host it asked for
// and the Server's UDP port, and pins the development certificates by the
// hashes the Server serves.
func TestInfo(t *testing.T) {
	r := newRig(t, rigConfig{})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "https://game.example:8443/webtransport", nil)
	r.srv.InfoHandler().ServeHTTP(rec, req)
	require.Equal(t, 200, rec.Code)
	assert.Equal(t, "no-store", rec.Header().Get("Cache-Control"))
	var info webtransport.Info
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &info))
	port := fmt.Sprint(r.srv.Addr().Port)
	assert.Equal(t, "https://game.example:"+port+"/relay", info.Relay)
	assert.Equal(t, "https://game.example:"+port+"/transport", info.Transport)
	require.Len(t, info.ServerCertificateHashes, 2)
	for i, h := range info.ServerCertificateHashes {
		assert.Equal(t, "sha-256", h.Algorithm)
		assert.Equal(t, base64.StdEncoding.EncodeToString(r.opts.CertificateHashes[i][:]), h.Value)
	}
}

// TestProductionCertificate: with a certificate of its own (one the client
// trusts by its roots, as a browser trusts a site's), the Server pins
// nothing, and clients verify it as any TLS client does.
func TestProductionCertificate(t *testing.T) {
	cert, err := devcert.New("127.0.0.1")
	require.NoError(t, err)
	r := newRig(t, rigConfig{tls: &tls.Config{Certificates: []tls.Certificate{cert.TLS}}})
	rec := httptest.NewRecorder()
	r.srv.InfoHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/webtransport", nil))
	assert.NotContains(t, rec.Body.String(), "serverCertificateHashes")

	_, err = webtransport.Dial(bridgetest.Ctx(t, 5*time.Second), r.transportURL, nil)
	require.Error(t, err, "a certificate the system does not trust")
	r.opts = &webtransport.Options{TLSConfig: cert.ClientConfig()}
	require.NoError(t, bridgetest.Echo(t, r.dialTransport(t), 1, 10, false))
	require.NoError(t, echoRelay(r.dialRelay(t), 2, 10))
}
