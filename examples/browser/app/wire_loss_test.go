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
	duration := 5 * time.Second
	if s := os.Getenv("NETCODE_LOSS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		require.NoError(t, err, "NETCODE_LOSS_DURATION")
		duration = d
	}

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

	type run struct {
		Name, Transport string
		Sent            []float64 // when datagram i was sent, ms
		Echoed          []float64 // when its echo arrived, ms; -1 if it did not
		Error           string
	}
	runs := eval[[]run](t, ctx, duration+time.Minute, `(async () => {
		const sleep = (ms) => new Promise((r) => setTimeout(r, Math.max(0, ms)));
		const messages = `+fmt.Sprint(int(duration/(100*time.Millisecond)))+`;
		// The wire's client side: one datagram a message, both ways.
		const open = async (transport) => {
			if (transport === "webtransport") {
				const wt = new WebTransport("https://`+lossy+`", { serverCertificateHashes: [`+strings.Join(pins, ", ")+`] });
				await wt.ready;
				const w = wt.datagrams.writable.getWriter();
				return {
					send: (b) => { w.write(b); },
					start: (fn) => { (async () => { const r = wt.datagrams.readable.getReader();
						for (;;) { const { value, done } = await r.read(); if (done) return; fn(value); } })(); },
					close: () => wt.close(),
				};
			}
			const ws = new WebSocket("ws://`+lossy+`");
			ws.binaryType = "arraybuffer";
			await new Promise((ok, no) => { ws.onopen = ok; ws.onerror = () => no(new Error("WebSocket failed")); });
			return { send: (b) => ws.send(b), start: (fn) => { ws.onmessage = (ev) => fn(new Uint8Array(ev.data)); }, close: () => ws.close() };
		};
		const measure = async (name, transport) => {
			const r = { Name: name, Transport: transport, Sent: [], Echoed: [], Error: "" };
			try {
				const s = await open(transport);
				s.start((p) => {
					const i = new DataView(p.buffer, p.byteOffset, p.byteLength).getUint32(0);
					if (i < messages && r.Echoed[i] < 0) r.Echoed[i] = performance.now();
				});
				const start = performance.now();
				for (let i = 0; i < messages; i++) {
					await sleep(start + 100 * i - performance.now());
					const b = new Uint8Array(100);
					new DataView(b.buffer).setUint32(0, i);
					r.Echoed.push(-1);
					r.Sent.push(performance.now());
					s.send(b);
				}
				await sleep(3000); // for the last echoes
				s.close();
			} catch (e) {
				r.Error = String(e);
			}
			return r;
		};
		return Promise.all([measure("WebSocket", "websocket"), measure("WebTransport", "webtransport")]);
	})()`)

	report := []string{
		fmt.Sprintf("the wire: %v at 10 Hz through %s", duration, lossnet.Impairment),
		"| Transport | Echoed | min | p50 | p99 | max | Late (> RTT + 10 ms) | Held behind an earlier echo | Longest stall |",
		"| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
	}
	rtt := 2 * lossyLink.Delay
	for _, r := range runs {
		require.Empty(t, r.Error, "%s", r.Name)
		st := lossStats(r.Sent, r.Echoed, rtt, rtt+10*time.Millisecond)
		report = append(report, fmt.Sprintf("| %s | %d of %d | %.1f ms | %.1f ms | %.1f ms | %.1f ms | %d | %d | %.0f ms |",
			r.Name, st.echoed, len(r.Sent), st.minLatency, st.p50, st.p99, st.max, st.late, st.held, st.stall))
		if r.Name == "WebSocket" {
			assert.Equal(t, len(r.Sent), st.echoed, "WebSocket (TCP) lost an echo")
		} else {
			assert.Positive(t, st.echoed)
		}
	}
	st := w.Stats()
	assert.Equal(t, uint64(2), st.SessionsOpened, "a wire session per transport")
	t.Log("\n" + strings.Join(report, "\n"))
}
