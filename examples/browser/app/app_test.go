package app_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gonetcode/netcode/bridge"
	"github.com/gonetcode/netcode/examples/browser/app"
	"github.com/gonetcode/netcode/token"
)

// TestApp checks the example's endpoints without a browser: the page, the
// module, a token for the echo server, and an echo through the relay.
func TestApp(t *testing.T) {
	defer goleak.VerifyNone(t)
	a, err := app.New(app.Config{MaxClients: 4})
	require.NoError(t, err)
	hs := httptest.NewServer(a)
	defer func() {
		require.NoError(t, a.Close())
		hs.Close()
	}()

	get := func(method, path string) (*http.Response, []byte) {
		req, err := http.NewRequest(method, hs.URL+path, nil)
		require.NoError(t, err)
		resp, err := hs.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp, b
	}
	resp, page := get("GET", "/")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, resp.Header.Get("Content-Type"), "text/html")
	assert.Contains(t, string(page), `import { connect, webTransportInfo } from "./netcode.js"`)

	resp, js := get("GET", "/netcode.js")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, bridge.JS(), js)

	resp, _ = get("GET", "/token")
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	resp, _ = get("GET", "/nothing")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)

	resp, tok := get("POST", "/token")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	require.Len(t, tok, token.ConnectTokenBytes)
	ct, err := token.Parse(tok)
	require.NoError(t, err)
	assert.Equal(t, uint64(app.ProtocolID), ct.ProtocolID)
	assert.Equal(t, a.ServerAddr(), ct.ServerAddrs[0])

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http")+"/relay",
		&websocket.DialOptions{Subprotocols: []string{bridge.Subprotocol}})
	require.NoError(t, err)
	defer ws.CloseNow()
	require.NoError(t, ws.Write(ctx, websocket.MessageBinary, tok))
	_, msg, err := ws.Read(ctx)
	require.NoError(t, err)
	var c struct {
		Type       string
		MaxClients int
	}
	require.NoError(t, json.Unmarshal(msg, &c))
	assert.Equal(t, "connected", c.Type)
	assert.Equal(t, 4, c.MaxClients)
	require.NoError(t, ws.Write(ctx, websocket.MessageBinary, []byte("echo?")))
	_, msg, err = ws.Read(ctx)
	require.NoError(t, err)
	assert.Equal(t, "echo?", string(msg))
	require.NoError(t, ws.Close(websocket.StatusNormalClosure, ""))
	require.Eventually(t, func() bool { return a.Listener.Stats().Connected == 0 }, 5*time.Second, 10*time.Millisecond)
}

// TestWebTransportAddr: the address the example prints for WebTransport is
// its socket's, known as soon as New returns (it printed "udp <nil>" when
// it asked the server, whose goroutine had not begun), and nil when off.
func TestWebTransportAddr(t *testing.T) {
	defer goleak.VerifyNone(t)
	tests := []struct {
		name string
		addr string
	}{
		{"on", "127.0.0.1:0"},
		{"off", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := app.New(app.Config{MaxClients: 4, WebTransportAddr: tt.addr})
			require.NoError(t, err)
			defer a.Close()
			got := a.WebTransportAddr()
			if tt.addr == "" {
				assert.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			ap, err := netip.ParseAddrPort(got.String())
			require.NoError(t, err)
			assert.Equal(t, "127.0.0.1", ap.Addr().String())
			assert.NotZero(t, ap.Port())
		})
	}
}
