package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
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

// TestBrowserWire: Chromium pages speak the wire contract (package
// bridge/wire) as a Cute Framework web build does, WebTransport datagrams
// at https://127.0.0.1:P/wire/<port> first (the development certificate
// pinned by hash), and the WebSocket on the same host, port and path when
// asked or when WebTransport is gone, and carry real protocol sessions
// through the wire to servers on plain UDP in this process:
//
//   - netcode: the Go client compiled to WebAssembly, to the example's
//     netcode server, which sees a UDP client; 100 unreliable echoes and a
//     128 KiB reliable message come back intact;
//   - Cute: a page whose script is only the wire's client side, carrying
//     the datagrams of package cute's client (in this process, reaching
//     the page through the DevTools protocol) to package cute's server,
//     with the token's placeholder address; messages come back intact.
//
// (The page is served over plain HTTP on 127.0.0.1, a secure context
// without a certificate, so its WebSocket is ws:// where a deployed page's
// is wss://.)
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
	cs := newCuteServer(t)
	defer cs.close()
	w := wire.NewHandler(&wire.Config{Allow: []wire.Range{
		{Addr: target.Addr(), First: target.Port(), Last: target.Port()},
		{Addr: cs.addr.Addr(), First: cs.addr.Port(), Last: cs.addr.Port()},
	}})
	wts, err := webtransport.NewServer(&webtransport.Config{Wire: w})
	require.NoError(t, err)
	tcp, udp := samePort(t)
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
	mux.HandleFunc("GET /wire.html", func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/html")
		rw.Write([]byte(wirePage))
	})
	mux.Handle("/", s)
	hs := httptest.NewUnstartedServer(mux)
	hs.Listener.Close()
	hs.Listener = tcp
	hs.Start()
	wsURL = fmt.Sprintf("ws%s%s%d", strings.TrimPrefix(hs.URL, "http"), wire.DefaultPath, target.Port())
	defer func() {
		require.NoError(t, w.Close())
		wts.Close()
		<-served
		require.NoError(t, s.Close())
		hs.Close()
	}()

	sessions := uint64(0)
	wtClosed := false
	hashes, err := wts.CertificateHashes()
	require.NoError(t, err)
	cuteURL := fmt.Sprintf("https://%s%s%d", tcp.Addr(), wire.DefaultPath, cs.addr.Port())
	for _, tc := range []struct {
		name, query, transport string
		fallback               bool
	}{
		{"netcode/webtransport", "", "webtransport", false},
		{"netcode/websocket", "?transport=websocket", "websocket", false},
		{"cute/webtransport", "", "webtransport", false},
		{"cute/websocket", "websocket", "websocket", false},
		{"netcode/fallback", "", "websocket", true},
		{"cute/fallback", "", "websocket", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.fallback && !wtClosed {
				require.NoError(t, wts.Close()) // the pages still name it
				wtClosed = true
			}
			if strings.HasPrefix(tc.name, "cute/") {
				cs.session(t, ctx, hs.URL, cuteURL, hashes, tc.query == "websocket", tc.transport, tc.fallback)
				sessions++
				require.Eventually(t, func() bool { return w.Stats().SessionsOpened == sessions }, 5*time.Second, 10*time.Millisecond, "a wire session per page")
				return
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
