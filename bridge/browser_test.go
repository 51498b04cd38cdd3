package bridge_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/bridge"
	"github.com/gonetcode/netcode/bridge/internal/bridgetest"
	"github.com/gonetcode/netcode/bridge/transport"
	"github.com/gonetcode/netcode/bridge/webtransport"
	"github.com/gonetcode/netcode/internal/testing/browsertest"
)

// TestBrowserSeesRefusal checks, in headless Chromium, what a page's
// WebSocket sees of a refusal for MaxSessions, in both modes: the session
// opens, agreeing to the subprotocol offered (the Mux to ".full" when
// offered, which is how a Go client in the browser, DialTransport, tells
// at once that it is refused), and closes at once with 1013 and
// ErrBridgeFull as the reason. A page on netcode.js over WebTransport
// gets the same code and reason.
func TestBrowserSeesRefusal(t *testing.T) {
	ctx, cancel := browsertest.Start(t)
	defer cancel()

	srv := newServer(t, 4, true)
	cfg := allowOnly(srv)
	cfg.MaxSessions = 1
	relay := bridge.NewHandler(&cfg)
	defer relay.Close()
	ms := bridgetest.NewMuxServer(t, 4, transport.MuxConfig{MaxSessions: 1})
	ms.DialWS(t) // the Mux is full

	wts, err := webtransport.NewServer(&webtransport.Config{Relay: relay})
	require.NoError(t, err)
	udp, err := net.ListenPacket("udp", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan struct{})
	go func() {
		defer close(served)
		wts.Serve(udp)
	}()
	defer func() {
		wts.Close()
		<-served
	}()

	mux := http.NewServeMux()
	mux.Handle("/relay", relay)
	mux.Handle("/transport", ms.Mux.Handler())
	mux.Handle("/webtransport", wts.InfoHandler())
	mux.Handle("/netcode.js", bridge.JSHandler())
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<!doctype html><title>refusal</title>"))
	})
	hs := httptest.NewServer(mux)
	defer hs.Close()
	wsURL := "ws" + strings.TrimPrefix(hs.URL, "http")
	open(t, wsURL+"/relay", srv.token(t, 5)) // the relay is full

	nctx, ncancel := context.WithTimeout(ctx, 30*time.Second)
	defer ncancel()
	require.NoError(t, chromedp.Do(nctx, chromedp.Navigate(hs.URL+"/")))

	full := transport.Subprotocol + ".full"
	tests := []struct {
		name, path string
		offer      []string
		agreed     string
	}{
		{"relay", "/relay", []string{bridge.Subprotocol}, bridge.Subprotocol},
		{"transport", "/transport", []string{transport.Subprotocol}, transport.Subprotocol},
		{"transport, offering full", "/transport", []string{transport.Subprotocol, full}, full},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			script := `new Promise((resolve) => {
  const ws = new WebSocket(` + jsString(wsURL+tt.path) + `, ` + jsJSON(tt.offer) + `);
  let opened = false, protocol = null;
  ws.onopen = () => { opened = true; protocol = ws.protocol; };
  ws.onclose = (ev) => resolve(JSON.stringify({opened, protocol, code: ev.code, reason: ev.reason}));
})`
			sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
			defer scancel()
			raw, err := chromedp.Run(sctx, chromedp.Evaluate[string](script, chromedp.EvalAwaitPromise))
			require.NoError(t, err)
			var got struct {
				Opened   bool
				Protocol string
				Code     int
				Reason   string
			}
			require.NoError(t, json.Unmarshal([]byte(raw), &got), raw)
			assert.True(t, got.Opened, "the refusal opens, so that the browser gets the close code")
			assert.Equal(t, tt.agreed, got.Protocol)
			assert.Equal(t, int(bridge.CodeBridgeFull), got.Code)
			assert.Equal(t, bridge.ErrBridgeFull.Error(), got.Reason)
		})
	}

	// Over WebTransport, the page (netcode.js, which pins the bridge's
	// development certificate by hash) reads the same refusal.
	t.Run("relay over WebTransport", func(t *testing.T) {
		sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
		defer scancel()
		raw, err := chromedp.Run(sctx, chromedp.Evaluate[string](`(async () => {
  const { connect, webTransportInfo } = await import("/netcode.js");
  const wt = await webTransportInfo("/webtransport");
  try {
    await connect(`+jsString(wsURL+"/relay")+`, new Uint8Array(2048), { webTransport: wt.relay, transport: "webtransport" });
    return JSON.stringify({ class: "connected" });
  } catch (e) {
    return JSON.stringify({ class: e.constructor.name, code: e.code, name: e.name, reason: e.reason });
  }
})()`, chromedp.EvalAwaitPromise))
		require.NoError(t, err)
		var got struct {
			Class, Name, Reason string
			Code                int
		}
		require.NoError(t, json.Unmarshal([]byte(raw), &got), raw)
		assert.Equal(t, "NetcodeError", got.Class)
		assert.Equal(t, int(bridge.CodeBridgeFull), got.Code)
		assert.Equal(t, "TryAgainLater", got.Name)
		assert.Equal(t, bridge.ErrBridgeFull.Error(), got.Reason)
	})
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string { return jsJSON(s) }

// jsJSON writes v as a JavaScript literal.
func jsJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
