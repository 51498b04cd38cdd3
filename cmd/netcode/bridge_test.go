package main

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/gonetcode/netcode/bridge"
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
		bridgeDone <- run(ctx, append([]string{"bridge", "-addr", "127.0.0.1:0", "-allow", udp.String(), "-v"}, bridgeArgs...), &bytes.Buffer{}, &berr)
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
