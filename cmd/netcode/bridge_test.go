package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/bridge"
	"github.com/gonetcode/netcode/bridge/transport"
	"github.com/gonetcode/netcode/bridge/webtransport"
	"github.com/gonetcode/netcode/internal/devcert"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBridgeCommand runs serve and bridge, then plays a browser's part over
// the relay: token first, the connected message, then payloads both ways;
// over plain WebSocket and, with -tls-cert and -tls-key, over wss with a
// certificate made in the test.
func TestBridgeCommand(t *testing.T) {
	cert, err := devcert.New("127.0.0.1")
	require.NoError(t, err)
	dir := t.TempDir()
	certFile, certKey := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	require.NoError(t, os.WriteFile(certFile, cert.CertPEM, 0o600))
	require.NoError(t, os.WriteFile(certKey, cert.KeyPEM, 0o600))

	code, _, errs := cli(t, "bridge", "-allow", "127.0.0.1:1", "-tls-cert", certFile)
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, "-tls-cert and -tls-key")

	for _, tc := range []struct {
		scheme string
		args   []string
		client *http.Client
	}{
		{"ws", nil, nil},
		{"wss", []string{"-tls-cert", certFile, "-tls-key", certKey},
			&http.Client{Transport: &http.Transport{TLSClientConfig: cert.ClientConfig()}}},
	} {
		t.Run(tc.scheme, func(t *testing.T) { bridgeCommand(t, tc.scheme, tc.args, tc.client) })
	}
}

func bridgeCommand(t *testing.T, scheme string, bridgeArgs []string, client *http.Client) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	code, _, errs := cli(t, "keygen", "-o", keyFile)
	require.Equal(t, 0, code, errs)

	code, _, errs = cli(t, "bridge", "-addr", "127.0.0.1:0")
	require.Equal(t, 1, code, "a bridge with no allowed server is refused")
	assert.Contains(t, errs, "-allow")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	udpReady, httpReady := make(chan net.Addr, 1), make(chan net.Addr, 1)
	serveReady = func(a net.Addr) { udpReady <- a }
	bridgeReady = func(a net.Addr) { httpReady <- a }
	defer func() { serveReady, bridgeReady = nil, nil }()
	serveDone, bridgeDone := make(chan int), make(chan int)
	var serr, berr bytes.Buffer
	go func() {
		serveDone <- run(ctx, []string{"serve", "-addr", "127.0.0.1:0", "-key", keyFile}, &bytes.Buffer{}, &serr)
	}()
	udp := <-udpReady
	go func() {
		bridgeDone <- run(ctx, append([]string{"bridge", "-addr", "127.0.0.1:0", "-allow", udp.String(), "-v", "-webtransport", "127.0.0.1:0"}, bridgeArgs...), &bytes.Buffer{}, &berr)
	}()
	web := <-httpReady

	code, tok, errs := cli(t, "token", "-key", keyFile, "-server", udp.String())
	require.Equal(t, 0, code, errs)
	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer dcancel()
	ws, _, err := websocket.Dial(dctx, scheme+"://"+web.String()+"/relay",
		&websocket.DialOptions{Subprotocols: []string{bridge.Subprotocol}, HTTPClient: client})
	require.NoError(t, err)
	defer ws.CloseNow()
	require.NoError(t, ws.Write(dctx, websocket.MessageBinary, []byte(tok)))
	typ, msg, err := ws.Read(dctx)
	require.NoError(t, err)
	assert.Equal(t, websocket.MessageText, typ)
	assert.Contains(t, string(msg), `"type":"connected"`)
	for _, p := range []string{"one", "two", "three"} {
		require.NoError(t, ws.Write(dctx, websocket.MessageBinary, []byte(p)))
		typ, got, err := ws.Read(dctx)
		require.NoError(t, err)
		assert.Equal(t, websocket.MessageBinary, typ)
		assert.Equal(t, p, string(got))
	}
	require.NoError(t, ws.Close(websocket.StatusNormalClosure, ""))

	// The bridge serves no page: its root says so, and where sessions are.
	httpScheme := map[string]string{"ws": "http", "wss": "https"}[scheme]
	hc := client
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Get(httpScheme + "://" + web.String() + "/")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Contains(t, string(body), "netcode bridge serves its sessions at /relay")

	// The same relay over WebTransport: the page's /webtransport says where
	// and, in development (no -tls-cert), which certificates to pin.
	code, tok, errs = cli(t, "token", "-key", keyFile, "-server", udp.String())
	require.Equal(t, 0, code, errs)
	info, opts := webtransportInfo(t, scheme, web, client)
	rc, err := webtransport.DialRelay(dctx, info.Relay, []byte(tok), opts)
	require.NoError(t, err)
	defer rc.Close()
	for _, p := range []string{"four", "five"} {
		_, err := rc.Write([]byte(p))
		require.NoError(t, err)
		buf := make([]byte, 100)
		rc.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := rc.Read(buf)
		require.NoError(t, err)
		assert.Equal(t, p, string(buf[:n]))
	}
	require.NoError(t, rc.Close())

	cancel()
	var codes []int
	for _, done := range []chan int{bridgeDone, serveDone} {
		select {
		case code := <-done:
			codes = append(codes, code)
		case <-time.After(10 * time.Second):
			t.Fatal("command did not stop")
		}
	}
	// Both commands have returned: their logs are safe to read.
	assert.Equal(t, []int{0, 0}, codes, berr.String()+serr.String())
	assert.Contains(t, berr.String(), "netcode bridge serving")
	assert.Contains(t, berr.String(), "url="+scheme+"://")
}

// webtransportInfo fetches the bridge's /webtransport, and returns it with
// the Options that trust its certificate: pinned by hash in development,
// or the test's production certificate (client).
func webtransportInfo(t *testing.T, scheme string, web net.Addr, client *http.Client) (webtransport.Info, *webtransport.Options) {
	t.Helper()
	httpScheme := map[string]string{"ws": "http", "wss": "https"}[scheme]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := webtransport.FetchInfo(ctx, client, httpScheme+"://"+web.String()+"/webtransport")
	require.NoError(t, err)
	hashes, err := info.Hashes()
	require.NoError(t, err)
	opts := &webtransport.Options{CertificateHashes: hashes}
	if scheme == "wss" {
		require.Empty(t, hashes, "a production certificate is not pinned")
		opts.TLSConfig = client.Transport.(*http.Transport).TLSClientConfig
	} else {
		require.Len(t, hashes, 2)
	}
	return info, opts
}

// TestBridgeCommandTransport runs bridge in transport mode: an echo server
// whose socket serves UDP, WebSocket and WebTransport clients at once.
func TestBridgeCommandTransport(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "key")
	code, _, errs := cli(t, "keygen", "-o", keyFile)
	require.Equal(t, 0, code, errs)
	code, _, errs = cli(t, "bridge", "-mode", "transport")
	require.Equal(t, 1, code, "transport mode needs a key")
	assert.Contains(t, errs, "key")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	udpReady, httpReady := make(chan net.Addr, 1), make(chan net.Addr, 1)
	bridgeUDPReady = func(a net.Addr) { udpReady <- a }
	bridgeReady = func(a net.Addr) { httpReady <- a }
	defer func() { bridgeUDPReady, bridgeReady = nil, nil }()
	done := make(chan int)
	var berr bytes.Buffer
	go func() {
		done <- run(ctx, []string{"bridge", "-mode", "transport", "-key", keyFile, "-udp", "127.0.0.1:0",
			"-addr", "127.0.0.1:0", "-webtransport", "127.0.0.1:0"}, &bytes.Buffer{}, &berr)
	}()
	udp, web := <-udpReady, <-httpReady
	info, opts := webtransportInfo(t, "ws", web, nil)
	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer dcancel()
	dialers := map[string]*netcode.Dialer{
		"udp":          {},
		"websocket":    {ListenPacket: transport.ListenPacket("ws://"+web.String()+"/transport", nil)},
		"webtransport": {ListenPacket: webtransport.ListenPacket(info.Transport, opts)},
	}
	for name, d := range dialers {
		code, tok, errs := cli(t, "token", "-key", keyFile, "-server", udp.String())
		require.Equal(t, 0, code, errs)
		c, err := d.DialContext(dctx, []byte(tok))
		require.NoError(t, err, name)
		_, err = c.Write([]byte(name))
		require.NoError(t, err)
		buf := make([]byte, 100)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := c.Read(buf)
		require.NoError(t, err, name)
		assert.Equal(t, name, string(buf[:n]))
		require.NoError(t, c.Close())
	}
	cancel()
	select {
	case code := <-done:
		assert.Equal(t, 0, code, berr.String())
	case <-time.After(10 * time.Second):
		t.Fatal("bridge did not stop")
	}
}
