package app_test

import (
	"context"
	"encoding/base64"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gonetcode/netcode/examples/browser/app"
	"github.com/gonetcode/netcode/internal/testing/browsertest"
)

// startWT makes an App that also serves the relay over WebTransport, and
// serves it over plain HTTP on 127.0.0.1: a secure context, so that the
// page may use WebTransport, and one in which the browser trusts nothing
// but what the page pins (the bridge's development certificate, by the
// hash /webtransport gives). stop ends the browser, the App and the
// server. Without a browser it skips (or fails) before it starts anything.
func startWT(t *testing.T, cfg app.Config) (a *app.App, url string, ctx context.Context, stop func()) {
	t.Helper()
	browsertest.Need(t)
	cfg.WebTransportAddr = "127.0.0.1:0"
	a, err := app.New(cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{Handler: a, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	ctx, cancel := browsertest.Start(t)
	stop = func() {
		cancel()
		require.NoError(t, a.Close())
		srv.Close()
		<-done
	}
	return a, "http://" + ln.Addr().String(), ctx, stop
}

// connected waits until the page shows a session and returns its status
// and the transport it says it uses.
func connected(t *testing.T, ctx context.Context, url string) (status, transport string) {
	t.Helper()
	step(t, ctx, 30*time.Second, "page connects",
		chromedp.Navigate(url+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#status[data-state="connected"]`)),
	)
	status = eval[string](t, ctx, 5*time.Second, `document.getElementById("status").textContent`)
	transport = eval[string](t, ctx, 5*time.Second, `document.getElementById("status").dataset.transport`)
	return status, transport
}

// TestBrowserWebTransport: the page connects over WebTransport, pinning
// the bridge's development certificate by hash, and echoes; payloads of
// every size up to the session's limit come back intact through the
// module's API, a larger one is refused in the browser with the datagram
// limit named, and a burst stops at maxBufferedAmount; the relay's refusals reach the page with their codes; and
// when the bridge shuts down the page says why.
func TestBrowserWebTransport(t *testing.T) {
	defer goleak.VerifyNone(t)
	a, url, ctx, stop := startWT(t, app.Config{})
	defer stop()

	status, transport := connected(t, ctx, url)
	assert.Equal(t, "webtransport", transport)
	assert.Contains(t, status, "connected over webtransport: client")
	assert.Equal(t, 1, a.Listener.Stats().Connected)
	assert.Equal(t, 1, a.Bridge.Sessions())

	assert.Equal(t, "over datagrams", formEcho(t, ctx, "echo", "over datagrams"))

	// Every size up to the limit, one at a time (a datagram may be lost
	// even on loopback: each is sent up to three times), checked byte for
	// byte; then one byte over the limit.
	type result struct {
		Transport              string
		MaxPayload             int
		Echoed, Bad, Retries   int
		OverName, OverMessage  string
		Burst                  int
		BurstError             string
		BurstOpen              bool
		CloseCode              int
		CloseName, CloseReason string
	}
	res := eval[result](t, ctx, 60*time.Second, `(async () => {
		const { connect, webTransportInfo } = await import("/netcode.js");
		const wt = await webTransportInfo("/webtransport");
		const tok = new Uint8Array(await (await fetch("/token", { method: "POST" })).arrayBuffer());
		const s = await connect("/relay", tok, { webTransport: wt.relay, transport: "webtransport" });
		const r = { Transport: s.transport, MaxPayload: s.maxPayloadBytes, Echoed: 0, Bad: 0, Retries: 0 };
		let wake = null;
		s.onmessage = (p) => { if (wake) wake(p); };
		const pattern = (size) => {
			const b = new Uint8Array(size);
			for (let j = 0; j < size; j++) b[j] = (size * 7 + j) & 255;
			return b;
		};
		for (let size = 1; size <= s.maxPayloadBytes; size += (size < 1100 ? 37 : 1)) {
			const want = pattern(size);
			for (let attempt = 0; attempt < 3; attempt++) {
				const got = new Promise((res) => { wake = res; setTimeout(() => res(null), 1000); });
				s.send(want);
				const p = await got;
				if (p === null) { r.Retries++; continue; }
				r.Echoed++;
				if (p.length !== size || p.some((v, j) => v !== want[j])) r.Bad++;
				break;
			}
		}
		try { s.send(new Uint8Array(s.maxPayloadBytes + 1)); } catch (e) { r.OverName = e.name; r.OverMessage = e.message; }
		// Backpressure: datagrams written in one go (nothing is sent
		// meanwhile) stop at maxBufferedAmount, and the session stays open.
		const s2 = await connect("/relay", new Uint8Array(await (await fetch("/token", { method: "POST" })).arrayBuffer()),
			{ webTransport: wt.relay, transport: "webtransport", maxBufferedAmount: 65536 });
		for (r.Burst = 0; r.Burst < 100000; r.Burst++) {
			try { s2.send(new Uint8Array(1200)); } catch (e) { r.BurstError = e.name; break; }
		}
		r.BurstOpen = s2.open;
		const closed2 = s2.closed;
		s2.close();
		await closed2;
		const closed = s.closed;
		s.close();
		const err = await closed;
		r.CloseCode = err.code; r.CloseName = err.name; r.CloseReason = err.reason;
		return r;
	})()`)
	t.Logf("WebTransport in the browser: %+v", res)
	assert.Equal(t, "webtransport", res.Transport)
	assert.Equal(t, 1200, res.MaxPayload, "a relay payload fits a datagram on loopback")
	assert.Zero(t, res.Bad, "payloads that came back different")
	assert.Equal(t, "RangeError", res.OverName)
	assert.Contains(t, res.OverMessage, "payload must be 1..1200 bytes, got 1201")
	assert.Equal(t, "Backpressure", res.BurstError)
	assert.Equal(t, 65536/1200, res.Burst, "payloads accepted before maxBufferedAmount")
	assert.True(t, res.BurstOpen, "session closed by backpressure")
	assert.Equal(t, 1000, res.CloseCode)
	assert.Equal(t, "Closed", res.CloseName)
	require.Eventually(t, func() bool { return a.Listener.Stats().Connected == 1 }, 5*time.Second, 10*time.Millisecond)

	// Refusals reach the page as NetcodeError with the bridge's codes,
	// over WebTransport as over WebSocket.
	checkRefusals(t, ctx, `{ webTransport: wt.relay, transport: "webtransport" }`)

	// The bridge shuts down: the page says why, over WebTransport too.
	require.Eventually(t, func() bool { return a.Bridge.Sessions() == 1 }, 5*time.Second, 10*time.Millisecond,
		"the refused sessions and the module's are gone")
	require.NoError(t, a.Bridge.Close())
	step(t, ctx, 10*time.Second, "page sees the close",
		chromedp.WaitVisible(chromedp.CSS(`#status[data-state="reconnecting"]`)))
	history := eval[[]string](t, ctx, 5*time.Second, `window.netcodeHistory`)
	assert.Contains(t, strings.Join(history, "\n"), "reconnecting: closed: GoingAway (1001): netcode/bridge: shutting down")
}

// TestBrowserWebTransportFallsBack: with the bridge's WebTransport
// endpoint gone (its UDP socket closed: the browser's QUIC handshake
// fails), the page connects over WebSocket instead, says so and why, and
// echoes.
func TestBrowserWebTransportFallsBack(t *testing.T) {
	defer goleak.VerifyNone(t)
	a, url, ctx, stop := startWT(t, app.Config{})
	defer stop()
	hashes, err := a.WebTransport.CertificateHashes()
	require.NoError(t, err)
	require.NotEmpty(t, hashes)
	port := a.WebTransport.Addr().Port
	require.NoError(t, a.WebTransport.Close()) // nothing answers on its port now

	// The page, given the endpoint the info named, falls back.
	step(t, ctx, 10*time.Second, "load", chromedp.Navigate(url+"/blank"))
	type result struct{ Transport, Fallback, Echo string }
	res := eval[result](t, ctx, 30*time.Second, `(async () => {
		const { connect } = await import("/netcode.js");
		const tok = new Uint8Array(await (await fetch("/token", { method: "POST" })).arrayBuffer());
		const s = await connect("/relay", tok, { webTransport: {
			url: "https://127.0.0.1:`+strconv.Itoa(port)+`/relay",
			serverCertificateHashes: [{ algorithm: "sha-256", value: Uint8Array.from(atob("`+base64.StdEncoding.EncodeToString(hashes[0][:])+`"), (c) => c.charCodeAt(0)) }],
		} });
		const echo = new Promise((res) => { s.onmessage = (p) => res(new TextDecoder().decode(p)); });
		s.send(new TextEncoder().encode("fell back"));
		const r = { Transport: s.transport, Fallback: String(s.fallback?.message ?? ""), Echo: await echo };
		s.close();
		await s.closed;
		return r;
	})()`)
	assert.Equal(t, "websocket", res.Transport)
	assert.NotEmpty(t, res.Fallback, "Session.fallback says why not WebTransport")
	assert.Equal(t, "fell back", res.Echo)

	// transport: "webtransport" refuses to fall back.
	refused := eval[string](t, ctx, 30*time.Second, `(async () => {
		const { connect } = await import("/netcode.js");
		const tok = new Uint8Array(await (await fetch("/token", { method: "POST" })).arrayBuffer());
		try {
			const s = await connect("/relay", tok, { transport: "webtransport", webTransport: "https://127.0.0.1:`+strconv.Itoa(port)+`/relay" });
			s.close();
			return "connected over " + s.transport;
		} catch (e) { return e.constructor.name; }
	})()`)
	assert.NotEqual(t, "NetcodeError", refused, "a failed handshake is not the bridge's refusal")
	assert.NotContains(t, refused, "connected")
}

// TestBrowserWebTransportReconnects: the bridge ends the page's idle
// WebTransport session with IdleTimeout; the page says so, fetches a
// fresh token and reconnects, over WebTransport again, and echoes.
func TestBrowserWebTransportReconnects(t *testing.T) {
	defer goleak.VerifyNone(t)
	a, url, ctx, stop := startWT(t, app.Config{IdleTimeout: time.Second})
	defer stop()

	_, transport := connected(t, ctx, url)
	require.Equal(t, "webtransport", transport)
	status := checkReconnects(t, ctx, a)
	assert.Contains(t, status, "connected over webtransport: client")
}
