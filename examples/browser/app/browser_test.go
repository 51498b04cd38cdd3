package app_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/security"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gonetcode/netcode/examples/browser/app"
	"github.com/gonetcode/netcode/internal/testing/browsertest"
	"github.com/gonetcode/netcode/token"
)

// step bounds one group of actions in time.
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

func eval[T any](t *testing.T, ctx context.Context, d time.Duration, script string) T {
	t.Helper()
	defer func(start time.Time) { t.Logf("script %.40q: %v", script, time.Since(start)) }(time.Now())
	sctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Evaluate[T](script, chromedp.EvalAwaitPromise))
	require.NoError(t, err, "script:\n%s", script)
	return v
}

// startTLS makes an App, serves it over HTTPS (so the page uses wss) and
// starts a browser that accepts the test server's certificate. stop ends
// the browser, then the App and the server. Without a browser it skips (or
// fails) before it starts anything.
func startTLS(t *testing.T, cfg app.Config) (a *app.App, hs *httptest.Server, ctx context.Context, stop func()) {
	t.Helper()
	browsertest.Need(t)
	a, err := app.New(cfg)
	require.NoError(t, err)
	hs = httptest.NewUnstartedServer(a)
	// Chromium tries the certificate before it is told to accept it.
	hs.Config.ErrorLog = log.New(io.Discard, "", 0)
	hs.StartTLS()
	start := time.Now()
	ctx, cancel := browsertest.Start(t)
	t.Logf("browser started in %v", time.Since(start))
	stop = func() {
		cancel()
		require.NoError(t, a.Close())
		hs.Close()
	}
	// The certificate is the test server's own: tell the browser to take it.
	step(t, ctx, 10*time.Second, "accept the test certificate", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, security.SetIgnoreCertificateErrors, security.SetIgnoreCertificateErrorsParams{Ignore: true})
		return err
	}))
	return a, hs, ctx, stop
}

// TestBrowser loads the example page over HTTPS in headless Chromium,
// connects through the bridge (wss) to the netcode echo server, and
// exchanges messages, through the page's form and through the module's API.
func TestBrowser(t *testing.T) {
	defer goleak.VerifyNone(t)

	a, hs, ctx, stop := startTLS(t, app.Config{})
	defer stop()
	defer func(start time.Time) { t.Logf("teardown: %v", time.Since(start)) }(time.Now())

	// The page: connect, type a message, see the echo.
	step(t, ctx, 30*time.Second, "page connects",
		chromedp.Navigate(hs.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#status[data-state="connected"]`)),
	)
	status, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID("status")))
	require.NoError(t, err)
	assert.Contains(t, status, "of 64")
	assert.Equal(t, 1, a.Listener.Stats().Connected)

	for i, msg := range []string{"hello, netcode", "second message ✓"} {
		step(t, ctx, 10*time.Second, "echo "+msg,
			chromedp.SendKeys(chromedp.ID("msg"), msg),
			chromedp.Click(chromedp.ID("send")),
			chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf("#log li.echo:nth-of-type(%d)", 2*(i+1)))),
		)
	}
	echoes := eval[[]string](t, ctx, 5*time.Second,
		`[...document.querySelectorAll("#log li.echo")].map(li => li.textContent)`)
	assert.Equal(t, []string{"hello, netcode", "second message ✓"}, echoes)

	// NETCODE_SCREENSHOT=FILE keeps a picture of the page as it is now
	// (docs/getting-started.md lists the tests' variables).
	if p := os.Getenv("NETCODE_SCREENSHOT"); p != "" {
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(p, png, 0o644))
	}

	// The module's API: a second session from the same page, many binary
	// messages of every size, checked byte for byte.
	type result struct {
		ClientIndex, MaxClients, Sent, Received, Bad int
		CloseCode                                    int
		CloseName                                    string
	}
	res := eval[result](t, ctx, 60*time.Second, `(async () => {
		const { connect } = await import("/netcode.js");
		const tok = new Uint8Array(await (await fetch("/token", { method: "POST" })).arrayBuffer());
		const s = await connect("/relay", tok);
		const n = 500, window = 32;
		let received = 0, bad = 0, inflight = 0, wake = null;
		const pattern = (i, size) => {
			const b = new Uint8Array(size);
			b[0] = i & 255; b[1] = i >> 8;
			for (let j = 2; j < size; j++) b[j] = (i * 7 + j) & 255;
			return b;
		};
		const ended = new Promise((_, reject) => { s.onclose = (e) => reject(e); });
		s.onmessage = (p) => {
			const i = p[0] | (p[1] << 8);
			const want = pattern(i, 2 + (i * 37) % 1199);
			if (p.length !== want.length || p.some((v, j) => v !== want[j])) bad++;
			received++; inflight--;
			if (wake) { const w = wake; wake = null; w(); }
		};
		for (let i = 0; i < n; i++) {
			while (inflight >= window) await Promise.race([new Promise((r) => { wake = r; }), ended]);
			s.send(pattern(i, 2 + (i * 37) % 1199));
			inflight++;
		}
		while (received < n) await Promise.race([new Promise((r) => { wake = r; }), ended]);
		const closed = s.closed;
		s.close();
		const err = await closed;
		return { ClientIndex: s.clientIndex, MaxClients: s.maxClients, Sent: n, Received: received,
			Bad: bad, CloseCode: err.code, CloseName: err.name };
	})()`)
	assert.Equal(t, 500, res.Received)
	assert.Zero(t, res.Bad, "payloads that came back different")
	assert.Equal(t, 64, res.MaxClients)
	assert.Equal(t, 1000, res.CloseCode)
	assert.Equal(t, "Closed", res.CloseName)
	// Closing in the browser frees the server's slot; the page's session stays.
	require.Eventually(t, func() bool { return a.Listener.Stats().Connected == 1 }, 5*time.Second, 10*time.Millisecond)

	// Backpressure: sending faster than the WebSocket drains stops at
	// maxBufferedAmount with a NetcodeError, and the session stays open.
	type pressure struct {
		Sent, Buffered, Limit int
		Name, Code, Class     string
		Open                  bool
	}
	bp := eval[pressure](t, ctx, 20*time.Second, `(async () => {
		const { connect } = await import("/netcode.js");
		const tok = new Uint8Array(await (await fetch("/token", { method: "POST" })).arrayBuffer());
		const s = await connect("/relay", tok, { maxBufferedAmount: 65536 });
		let sent = 0, thrown = null;
		for (; sent < 100000; sent++) { // synchronous: nothing drains meanwhile
			try { s.send(new Uint8Array(1200)); } catch (e) { thrown = e; break; }
		}
		const r = { Sent: sent, Buffered: s.bufferedAmount, Limit: s.maxBufferedAmount,
			Name: thrown?.name ?? "", Code: thrown?.code ?? "", Class: thrown?.constructor.name ?? "", Open: s.open };
		const closed = s.closed;
		s.close();
		await closed;
		return r;
	})()`)
	assert.Equal(t, "Backpressure", bp.Name)
	assert.Equal(t, "backpressure", bp.Code)
	assert.Equal(t, "NetcodeError", bp.Class)
	assert.True(t, bp.Open, "session closed by backpressure")
	assert.Equal(t, 65536, bp.Limit)
	assert.Positive(t, bp.Sent)
	assert.LessOrEqual(t, bp.Sent, 65536/1200)
	assert.LessOrEqual(t, bp.Buffered, 65536)
	require.Eventually(t, func() bool { return a.Bridge.Sessions() == 1 }, 5*time.Second, 10*time.Millisecond)

	// Errors reach the browser as NetcodeError with the bridge's codes.
	checkRefusals(t, ctx, `{}`)

	// Sizes are checked in the browser before anything is sent.
	msg := eval[string](t, ctx, 5*time.Second, `(() => {
		try { window.netcodeSession.send(new Uint8Array(1201)); return "sent"; }
		catch (e) { return e.name; }
	})()`)
	assert.Equal(t, "RangeError", msg)

	assert.True(t, eval[bool](t, ctx, 5*time.Second, `location.protocol === "https:"`), "the page is served over https, its relay over wss")

	// The server ends the page's session: the page shows why, and tries to
	// reconnect (which fails: the bridge is closed for good).
	require.Equal(t, 1, a.Bridge.Sessions())
	require.NoError(t, a.Bridge.Close())
	step(t, ctx, 10*time.Second, "page sees the close",
		chromedp.WaitVisible(chromedp.CSS(`#status[data-state="reconnecting"]`)))
	history := eval[[]string](t, ctx, 5*time.Second, `window.netcodeHistory`)
	assert.Contains(t, history, "reconnecting: closed: GoingAway (1001): netcode/bridge: shutting down; reconnecting in 0 s…")
	require.Eventually(t, func() bool { return a.Listener.Stats().Connected == 0 }, 5*time.Second, 10*time.Millisecond)
}

// checkRefusals checks that the relay's refusals of a bad token (4003)
// and of a token for a server the bridge may not dial (4010) reach the
// page's connect as NetcodeError with the bridge's codes and reasons.
// options is the JavaScript of connect's options, in which wt is the
// page's webTransportInfo("/webtransport").
func checkRefusals(t *testing.T, ctx context.Context, options string) {
	t.Helper()
	type failure struct {
		Code                int
		Name, Reason, Class string
	}
	tryConnect := func(tok []byte) failure {
		return eval[failure](t, ctx, 20*time.Second, `(async () => {
			const { connect, webTransportInfo } = await import("/netcode.js");
			const wt = await webTransportInfo("/webtransport");
			const tok = Uint8Array.from(atob("`+base64.StdEncoding.EncodeToString(tok)+`"), (c) => c.charCodeAt(0));
			try {
				const s = await connect("/relay", tok, `+options+`);
				s.close();
				return { Code: 0, Name: "connected over " + s.transport, Reason: "", Class: "" };
			} catch (e) {
				return { Code: e.code ?? -1, Name: e.name, Reason: e.reason ?? String(e), Class: e.constructor.name };
			}
		})()`)
	}
	f := tryConnect(make([]byte, 2048))
	assert.Equal(t, failure{4003, "InvalidConnectToken", "netcode: invalid connect token", "NetcodeError"}, f)

	// A token for a server the bridge may not dial.
	other, err := token.Generate(&token.Params{
		ProtocolID:    app.ProtocolID,
		ClientID:      1,
		PrivateKey:    [32]byte{1}, // any key: the bridge refuses the address before a server sees it
		ServerAddrs:   []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:9")},
		ExpireSeconds: 60,
	})
	require.NoError(t, err)
	f = tryConnect(other)
	assert.Equal(t, 4010, f.Code)
	assert.Equal(t, "ServerNotAllowed", f.Name)
	assert.Contains(t, f.Reason, "127.0.0.1:9")
}

// TestBrowserReconnects: the bridge ends the page's idle session; the page
// fetches a fresh token, reconnects on its own, says so, and echoes again.
func TestBrowserReconnects(t *testing.T) {
	defer goleak.VerifyNone(t)

	a, hs, ctx, stop := startTLS(t, app.Config{IdleTimeout: time.Second})
	defer stop()

	step(t, ctx, 30*time.Second, "page connects",
		chromedp.Navigate(hs.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#status[data-state="connected"]`)),
	)
	status := checkReconnects(t, ctx, a)
	assert.Contains(t, status, "connected over websocket: client")
}

// checkReconnects waits, with the page connected to a bridge whose
// IdleTimeout is short, until the bridge has ended the page's idle session
// and the page has reconnected with a fresh token; it checks what the page
// says and that it echoes, and returns the page's status.
func checkReconnects(t *testing.T, ctx context.Context, a *app.App) string {
	t.Helper()
	first := a.Listener.Stats().ConnectionsOpened
	status := eval[string](t, ctx, 30*time.Second, `new Promise((resolve) => {
		const el = document.getElementById("status");
		const check = () => {
			if (el.dataset.state === "connected" && el.textContent.includes("reconnected")) resolve(el.textContent);
		};
		new MutationObserver(check).observe(el, { attributes: true, childList: true, characterData: true, subtree: true });
		check();
	})`)
	assert.Contains(t, status, "(reconnected 1×)")
	history := eval[[]string](t, ctx, 5*time.Second, `window.netcodeHistory`)
	assert.Contains(t, strings.Join(history, "\n"), "reconnecting: closed: IdleTimeout (4012)")
	assert.Greater(t, a.Listener.Stats().ConnectionsOpened, first, "a new netcode connection, with a fresh token")

	assert.Equal(t, "still there?", formEcho(t, ctx, "echo after reconnecting", "still there?"))
	return status
}

// formEcho types text in the page's form, sends it, and returns the first
// echo the page shows.
func formEcho(t *testing.T, ctx context.Context, what, text string) string {
	t.Helper()
	step(t, ctx, 10*time.Second, what,
		chromedp.SendKeys(chromedp.ID("msg"), text),
		chromedp.Click(chromedp.ID("send")),
		chromedp.WaitVisible(chromedp.CSS("#log li.echo")),
	)
	echo, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("#log li.echo")))
	require.NoError(t, err)
	return echo
}
