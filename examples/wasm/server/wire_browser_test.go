package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gonetcode/netcode/bridge/transport"
	"github.com/gonetcode/netcode/bridge/webtransport"
	"github.com/gonetcode/netcode/bridge/wire"
	"github.com/gonetcode/netcode/examples/wasm/server"
	"github.com/gonetcode/netcode/internal/testing/browsertest"
)

// TestBrowserWire: the Go client compiled to WebAssembly, in headless
// Chromium, reaches the example's netcode server on plain UDP through the
// wire (package bridge/wire), as a Cute Framework web build reaches its
// server: WebTransport datagrams at https://host/wire/<port> first
// (pinning the development certificate by hash), the WebSocket at the
// same path when asked, and the WebSocket when WebTransport is gone. The
// wire forwards the netcode packets unread; the server sees a UDP client;
// 100 unreliable echoes and a 128 KiB reliable message come back intact.
func TestBrowserWire(t *testing.T) {
	defer goleak.VerifyNone(t)
	ctx, cancel := browsertest.Start(t)
	defer cancel()

	bctx, bcancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer bcancel()
	start := time.Now()
	wasm, wasmExec, err := server.BuildClient(bctx, t.TempDir())
	require.NoError(t, err)
	t.Logf("client built in %v", time.Since(start))

	onMessage, reports := recorder()
	s, err := server.New(server.Config{WASM: wasm, WASMExec: wasmExec, OnMessage: onMessage})
	require.NoError(t, err)
	target := s.UDPAddr()
	w := wire.NewHandler(&wire.Config{Allow: []wire.Range{{Addr: target.Addr(), First: target.Port(), Last: target.Port()}}})
	wts, err := webtransport.NewServer(&webtransport.Config{Wire: w})
	require.NoError(t, err)
	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- wts.Serve(udp) }()

	// The page's origin serves the example (the page, the client, tokens)
	// and the wire's WebSocket path; its /webtransport names the wire.
	var wsURL string
	mux := http.NewServeMux()
	mux.Handle(wire.DefaultPath, w)
	mux.HandleFunc("GET /webtransport", func(rw http.ResponseWriter, r *http.Request) {
		info, err := wts.Info(r)
		if err != nil {
			http.Error(rw, err.Error(), http.StatusServiceUnavailable)
			return
		}
		info.Transport = fmt.Sprint(info.Wire, target.Port()) // where the page's client connects
		rw.Header().Set("Content-Type", "application/json")
		json.NewEncoder(rw).Encode(info)
	})
	mux.HandleFunc("GET /{$}", func(rw http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, r)
		page := bytes.Replace(rec.Body.Bytes(), []byte(`<script src="/wasm_exec.js">`),
			[]byte(`<script>globalThis.netcodeConfig = { count: 100, url: "`+wsURL+`" };</script><script src="/wasm_exec.js">`), 1)
		rw.Header().Set("Content-Type", "text/html")
		rw.Write(page)
	})
	mux.Handle("/", s)
	hs := httptest.NewServer(mux)
	wsURL = fmt.Sprintf("ws%s%s%d", strings.TrimPrefix(hs.URL, "http"), wire.DefaultPath, target.Port())
	defer func() {
		require.NoError(t, w.Close())
		wts.Close()
		<-served
		require.NoError(t, s.Close())
		hs.Close()
	}()

	sessions := uint64(0)
	for _, tc := range []struct {
		name, query, transport string
		fallback               bool
	}{
		{"webtransport", "", "webtransport", false},
		{"websocket", "?transport=websocket", "websocket", false},
		{"fallback", "", "websocket", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.fallback {
				require.NoError(t, wts.Close()) // the info still names it
			}
			step(t, ctx, 60*time.Second, "client loads, connects through the wire and checks 100 echoes",
				chromedp.Navigate(hs.URL+"/"+tc.query),
				chromedp.WaitVisible(chromedp.CSS(`#status[data-state="done"], #status[data-state="error"]`)),
			)
			raw := eval[string](t, ctx, 5*time.Second, `globalThis.netcodeResult`)
			var res struct {
				Sent, Received, Bad        int
				Transport, Fallback, Error string
			}
			require.NoError(t, json.Unmarshal([]byte(raw), &res), raw)
			require.Empty(t, res.Error)
			assert.Equal(t, tc.transport, res.Transport, "fallback: %s", res.Fallback)
			assert.Equal(t, tc.fallback, res.Fallback != "", "why not WebTransport: %q", res.Fallback)
			assert.Equal(t, 100, res.Sent)
			assert.Equal(t, 100, res.Received)
			assert.Zero(t, res.Bad, "echoes that came back different")

			raw = eval[string](t, ctx, 30*time.Second, fmt.Sprintf(`netcodeReliable(%d)`, reliableBytes))
			var rel struct{ Intact bool }
			require.NoError(t, json.Unmarshal([]byte(raw), &rel), raw)
			assert.True(t, rel.Intact, "the 128 KiB reliable message's echo")
			r := serverGot(t, reports, reliableBytes)
			assert.False(t, transport.IsSessionAddr(netip.MustParseAddrPort(r.from.String())),
				"the server saw a UDP client (the wire's socket), not a transport session: %v", r.from)

			assert.Equal(t, "closed", eval[string](t, ctx, 10*time.Second, `netcodeClose()`))
			sessions++
			require.Eventually(t, func() bool { return s.Listener.Stats().Connected == 0 }, 5*time.Second, 10*time.Millisecond, "the slot is free")
			st := w.Stats()
			assert.Equal(t, sessions, st.SessionsOpened, "a wire session per page")
			assert.Positive(t, st.DatagramsToTarget)
		})
	}
	cancel()
}
