//go:build linux

package app_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/bridge/webtransport"
	"github.com/gonetcode/netcode/bridge/wire"
	"github.com/gonetcode/netcode/internal/testing/browsertest"
	"github.com/gonetcode/netcode/internal/testing/lossnet"
)

// wireLossPort is where the wire listens inside the namespace, TCP and
// UDP: one URL for both transports.
const wireLossPort = "4434"

// TestBrowserWireUnderLoss is TestBrowserUnderLoss for the wire (package
// bridge/wire): in the same network namespace and lossy link (2% loss
// each way, 30 ms round trip), a Chromium page speaks the wire contract
// itself, WebSocket and WebTransport datagrams at once to
// https://10.77.0.2:4434/wire/<port>, sending a 100-byte datagram every
// 100 ms through the wire to a UDP echo server on the namespace's
// loopback, and the test reports the same table. It runs for 5 s
// (NETCODE_LOSS_DURATION changes that), under the same opt-in
// (NETCODE_LOSS_TEST=1; CI=true always runs it). It asserts what loss
// must not change: the WebSocket delivers every datagram; WebTransport's
// are datagrams, some of which the link loses.
func TestBrowserWireUnderLoss(t *testing.T) {
	browsertest.Need(t)
	ci := os.Getenv("CI") == "true"
	if os.Getenv("NETCODE_LOSS_TEST") != "1" && !ci {
		t.Skip("opt-in: NETCODE_LOSS_TEST=1 runs it (root or sudo -n, iproute2 and /dev/net/tun); CI=true always does")
	}
	if !lossnet.Enter(t, lossyLink, ci) {
		return
	}
	duration := lossDuration(t, 5*time.Second)

	// The game server: a UDP echo on the namespace's loopback.
	echo, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	echoDone := make(chan struct{})
	go func() {
		defer close(echoDone)
		buf := make([]byte, 2048)
		for {
			n, from, err := echo.ReadFromUDPAddrPort(buf)
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err == nil {
				echo.WriteToUDPAddrPort(buf[:n], from)
			}
		}
	}()
	defer func() {
		echo.Close()
		<-echoDone
	}()
	target := echo.LocalAddr().(*net.UDPAddr).AddrPort()

	w := wire.NewHandler(&wire.Config{
		Allow:          []wire.Range{{Addr: target.Addr(), First: target.Port(), Last: target.Port()}},
		OriginPatterns: []string{"127.0.0.1:*"},
	})
	defer w.Close()
	wts, err := webtransport.NewServer(&webtransport.Config{Wire: w, DevHosts: []string{lossnet.Peer}})
	require.NoError(t, err)
	udp, err := net.ListenPacket("udp4", net.JoinHostPort(lossnet.Local, wireLossPort))
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- wts.Serve(udp) }()
	defer func() {
		w.Close()
		wts.Close()
		<-served
	}()
	hashes, err := wts.CertificateHashes()
	require.NoError(t, err)
	var pins []string
	for _, h := range hashes {
		pins = append(pins, `{ algorithm: "sha-256", value: Uint8Array.from(atob("`+base64.StdEncoding.EncodeToString(h[:])+`"), (c) => c.charCodeAt(0)) }`)
	}
	mux := http.NewServeMux()
	mux.Handle(wire.DefaultPath, w)
	serve(t, "tcp", net.JoinHostPort(lossnet.Local, wireLossPort), mux)

	// The page comes from loopback, unimpaired, a secure context; it
	// reaches the wire across the lossy link.
	page := http.NewServeMux()
	page.HandleFunc("GET /wireloss", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.Write([]byte("<!doctype html><title>wire loss</title>"))
	})
	pageURL := serve(t, "tcp", "127.0.0.1:0", page)
	lossy := net.JoinHostPort(lossnet.Peer, wireLossPort) + wire.DefaultPath + fmt.Sprint(target.Port())

	ctx, cancel := browsertest.Start(t)
	defer cancel()
	step(t, ctx, 30*time.Second, "load the page", chromedp.Navigate(pageURL+"/wireloss"))

	runs := eval[[]lossRun](t, ctx, duration+time.Minute, `(async () => {
		`+lossMeasureJS(duration)+`
		// The wire's client side: one datagram a message, both ways.
		const open = (transport) => async () => {
			if (transport === "webtransport") {
				const wt = new WebTransport("https://`+lossy+`", { serverCertificateHashes: [`+strings.Join(pins, ", ")+`] });
				await wt.ready;
				const w = wt.datagrams.writable.getWriter();
				const s = { transport, send: (b) => { w.write(b); }, close: () => wt.close(), onmessage: null };
				(async () => {
					const r = wt.datagrams.readable.getReader();
					for (;;) { const { value, done } = await r.read(); if (done) return; if (s.onmessage) s.onmessage(value); }
				})();
				return s;
			}
			const ws = new WebSocket("ws://`+lossy+`");
			ws.binaryType = "arraybuffer";
			await new Promise((ok, no) => { ws.onopen = ok; ws.onerror = () => no(new Error("WebSocket failed")); });
			const s = { transport, send: (b) => ws.send(b), close: () => ws.close(), onmessage: null };
			ws.onmessage = (ev) => { if (s.onmessage) s.onmessage(new Uint8Array(ev.data)); };
			return s;
		};
		return Promise.all([measure("WebSocket", open("websocket")), measure("WebTransport", open("webtransport"))]);
	})()`)
	for r, st := range lossReport(t, fmt.Sprintf("the wire: %v at 10 Hz through %s", duration, lossnet.Impairment), runs) {
		if r.Name == "WebSocket" {
			assert.Equal(t, len(r.Sent), st.echoed, "WebSocket (TCP) lost an echo")
		} else {
			assert.Positive(t, st.echoed)
		}
	}
	assert.Equal(t, uint64(2), w.Stats().SessionsOpened, "a wire session per transport")
}
