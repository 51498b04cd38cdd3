package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/bridge"
	"github.com/gonetcode/netcode/examples/wasm/server"
	"github.com/gonetcode/netcode/internal/browsertest"
)

func eval[T any](t *testing.T, ctx context.Context, d time.Duration, script string) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Evaluate[T](script, chromedp.EvalAwaitPromise))
	require.NoError(t, err, "script:\n%s", script)
	return v
}

func step(t *testing.T, ctx context.Context, d time.Duration, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	defer func(start time.Time) { t.Logf("%s: %v", what, time.Since(start)) }(time.Now())
	sctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		status, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("status")?.textContent ?? ""`))
		t.Fatalf("%s: %v (page status: %q)", what, err, status)
	}
}

// TestWASMClientInBrowser loads the Go client compiled to WebAssembly in
// headless Chromium; it connects end to end encrypted through the Mux's
// WebSocket transport, while a UDP client uses the same server.
func TestWASMClientInBrowser(t *testing.T) {
	defer goleak.VerifyNone(t)

	ctx, cancel := browsertest.Start(t)
	defer cancel()

	start := time.Now()
	bctx, bcancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer bcancel()
	wasm, wasmExec, err := server.BuildClient(bctx, t.TempDir())
	require.NoError(t, err)
	t.Logf("client built in %v (%d bytes)", time.Since(start), len(wasm))

	s, err := server.New(server.Config{WASM: wasm, WASMExec: wasmExec})
	require.NoError(t, err)
	hs := httptest.NewServer(s)
	defer func() {
		require.NoError(t, s.Close())
		hs.Close()
	}()

	step(t, ctx, 60*time.Second, "client loads, connects and checks 100 echoes",
		chromedp.Navigate(hs.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#status[data-state="done"], #status[data-state="error"]`)),
	)
	raw := eval[string](t, ctx, 5*time.Second, `globalThis.netcodeResult`)
	var res struct {
		ClientIndex, MaxClients, Sent, Received, Bad int
		Error                                        string
	}
	require.NoError(t, json.Unmarshal([]byte(raw), &res), raw)
	require.Empty(t, res.Error)
	assert.Equal(t, 100, res.Sent)
	assert.Equal(t, 100, res.Received)
	assert.Zero(t, res.Bad, "echoes that came back different")
	assert.Equal(t, 64, res.MaxClients)
	assert.Equal(t, 1, s.Listener.Stats().Connected)
	assert.Equal(t, 1, s.Mux.Sessions())

	// A UDP client at the same time.
	resp, err := http.Post(hs.URL+"/token", "", nil)
	require.NoError(t, err)
	tok, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	dctx, dcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer dcancel()
	udp, err := netcode.DialContext(dctx, tok)
	require.NoError(t, err)
	defer udp.Close()
	require.Equal(t, 2, s.Listener.Stats().Connected)
	assert.False(t, bridge.IsTransportAddr(netip.MustParseAddrPort(udp.LocalAddr().String())))

	// The browser's echoes, through the module's API and the page's form.
	got := eval[string](t, ctx, 10*time.Second, `netcodeEcho("hello, wasm ✓")`)
	assert.Equal(t, "hello, wasm ✓", got)
	step(t, ctx, 10*time.Second, "form echo",
		chromedp.SendKeys(chromedp.ID("msg"), "typed in the page"),
		chromedp.Click(chromedp.ID("send")),
		chromedp.WaitVisible(chromedp.CSS(`#log li.echo`)),
	)
	text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#log li.echo`)))
	require.NoError(t, err)
	assert.Equal(t, "typed in the page", text)

	_, err = udp.Write([]byte("over udp"))
	require.NoError(t, err)
	udp.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, netcode.MaxPayloadBytes)
	n, err := udp.Read(buf)
	require.NoError(t, err)
	assert.Equal(t, "over udp", string(buf[:n]))

	// Closing in the browser frees the server's slot at once.
	assert.Equal(t, "closed", eval[string](t, ctx, 10*time.Second, `netcodeClose()`))
	require.Eventually(t, func() bool { return s.Listener.Stats().Connected == 1 }, 5*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return s.Mux.Sessions() == 0 }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, udp.Close())
	cancel()
}
