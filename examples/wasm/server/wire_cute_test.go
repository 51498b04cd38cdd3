package server_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode/cute"
)

// wirePage is a page whose script is the client side of the wire
// contract and nothing else: wireOpen(url, hashes, webSocketOnly) opens
// WebTransport datagrams at url (pinning the hashes), or, if that fails
// or is not wanted, a WebSocket on the same host, port and path, and
// wirePump(out) sends the datagrams out (base64) and returns those that
// arrived since the last call.
const wirePage = `<!doctype html><title>wire</title><script>
const b64 = (u8) => { let s = ""; for (const v of u8) s += String.fromCharCode(v); return btoa(s); };
const bytes = (s) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0));
let wireIn = [], wireSend = null;
globalThis.wireOpen = async (url, hashes, webSocketOnly) => {
	let why = "";
	if (!webSocketOnly) {
		try {
			const wt = new WebTransport(url, { serverCertificateHashes: hashes.map((h) => ({ algorithm: "sha-256", value: bytes(h) })) });
			await Promise.race([wt.ready, new Promise((_, no) => setTimeout(() => no(new Error("WebTransport: no answer in 5 s")), 5000))]);
			const w = wt.datagrams.writable.getWriter();
			wireSend = (p) => { w.write(p); };
			(async () => {
				const r = wt.datagrams.readable.getReader();
				for (;;) { const { value, done } = await r.read(); if (done) return; wireIn.push(b64(value)); }
			})();
			return { transport: "webtransport", why };
		} catch (e) { why = String(e); }
	}
	// https becomes wss; a page served over plain http (as this test's) uses ws.
	const ws = new WebSocket(url.replace(/^https:/, location.protocol === "https:" ? "wss:" : "ws:"));
	ws.binaryType = "arraybuffer";
	await new Promise((ok, no) => { ws.onopen = ok; ws.onerror = () => no(new Error("WebSocket failed")); });
	ws.onmessage = (ev) => wireIn.push(b64(new Uint8Array(ev.data)));
	wireSend = (p) => ws.send(p);
	return { transport: "websocket", why };
};
globalThis.wirePump = (out) => { for (const s of out) wireSend(bytes(s)); const got = wireIn; wireIn = []; return got; };
</script>`

// samePort listens on TCP and UDP on the same port of 127.0.0.1, so that
// the WebSocket and WebTransport URLs of the wire are one.
func samePort(t *testing.T) (net.Listener, net.PacketConn) {
	t.Helper()
	for range 20 {
		tcp, err := net.Listen("tcp4", "127.0.0.1:0")
		require.NoError(t, err)
		udp, err := net.ListenPacket("udp4", tcp.Addr().String())
		if err == nil {
			return tcp, udp
		}
		tcp.Close()
	}
	t.Fatal("no port free on both TCP and UDP")
	return nil, nil
}

// cuteServer is a Cute server (package cute) on UDP whose own address, as
// tokens list it, is a placeholder: the address of the socket through
// which this test hands its client's datagrams to the page.
type cuteServer struct {
	l      *cute.Listener
	addr   netip.AddrPort // where it listens: the wire's target
	shim   *net.UDPConn   // the placeholder address: the client's only peer
	public cute.PublicKey
	secret cute.SecretKey
}

func newCuteServer(t *testing.T) *cuteServer {
	t.Helper()
	cs := &cuteServer{}
	cs.public, cs.secret = cute.GenerateKeyPair()
	var err error
	cs.shim, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	cs.l, err = cute.Listen("udp4", "127.0.0.1:0", &cute.ServerConfig{
		ApplicationID: 0xc0ffee, PublicKey: cs.public, SecretKey: cs.secret,
		PublicAddr: cs.shim.LocalAddr().String(),
	})
	require.NoError(t, err)
	cs.addr = netip.MustParseAddrPort(cs.l.Addr().String())
	return cs
}

// close stops the server (before the test's goroutine check).
func (cs *cuteServer) close() {
	cs.l.Close()
	cs.shim.Close()
}

// session loads the wire page, opens the wire at url, and runs a Cute
// session through it: package cute's client sends to the placeholder
// address, whose datagrams this test pumps into the page and out of it.
func (cs *cuteServer) session(t *testing.T, ctx context.Context, origin, url string, hashes [][32]byte,
	webSocketOnly bool, wantTransport string, fallback bool) {
	step(t, ctx, 30*time.Second, "load the wire page", chromedp.Navigate(origin+"/wire.html"))
	pins := make([]string, len(hashes))
	for i, h := range hashes {
		pins[i] = base64.StdEncoding.EncodeToString(h[:])
	}
	opened := eval[struct{ Transport, Why string }](t, ctx, 15*time.Second,
		fmt.Sprintf(`wireOpen(%s, %s, %t)`, jsonOf(url), jsonOf(pins), webSocketOnly))
	assert.Equal(t, wantTransport, opened.Transport, "why not WebTransport: %s", opened.Why)
	assert.Equal(t, fallback, opened.Why != "", "why not WebTransport: %q", opened.Why)

	tok, err := cute.GenerateToken(&cute.TokenParams{
		ApplicationID: 0xc0ffee, ClientID: uint64(time.Now().UnixNano()), SecretKey: cs.secret,
		ServerAddrs: []netip.AddrPort{netip.MustParseAddrPort(cs.shim.LocalAddr().String())}, ExpireSeconds: 30,
	})
	require.NoError(t, err)

	// The pump: the client's datagrams into the page, the page's back to
	// the client, in one DevTools call a round.
	pctx, stop := context.WithCancel(ctx)
	pumped := make(chan error, 1)
	go func() { pumped <- cs.pump(pctx) }()
	defer func() {
		stop()
		if err := <-pumped; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("pump: %v", err)
		}
	}()

	dctx, dcancel := context.WithTimeout(ctx, 15*time.Second)
	defer dcancel()
	accepted := make(chan *cute.Conn, 1)
	go func() {
		c, err := cs.l.AcceptConn(dctx)
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()
	c, err := cute.DialContext(dctx, tok)
	require.NoError(t, err)
	defer c.Close()
	sc, ok := <-accepted
	require.True(t, ok, "the Cute server accepted the client")
	defer sc.Close()
	buf := make([]byte, 2048)
	for i, p := range []string{"cute", "in chromium", "through the wire", string(make([]byte, 1000))} {
		_, err := c.Write([]byte(p))
		require.NoError(t, err)
		require.NoError(t, sc.SetReadDeadline(time.Now().Add(5*time.Second)))
		n, err := sc.Read(buf)
		require.NoError(t, err, "message %d at the server", i)
		require.Equal(t, p, string(buf[:n]))
		_, err = sc.Write(buf[:n])
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
		n, err = c.Read(buf)
		require.NoError(t, err, "echo %d at the client", i)
		assert.Equal(t, p, string(buf[:n]))
	}
}

// pump moves datagrams between the placeholder socket and the page until
// ctx ends.
func (cs *cuteServer) pump(ctx context.Context) error {
	var client netip.AddrPort
	buf := make([]byte, 2048)
	for ctx.Err() == nil {
		var out []string
		cs.shim.SetReadDeadline(time.Now().Add(2 * time.Millisecond))
		for len(out) < 64 {
			n, from, err := cs.shim.ReadFromUDPAddrPort(buf)
			if err != nil {
				if !errors.Is(err, os.ErrDeadlineExceeded) {
					return err
				}
				break
			}
			client = from
			out = append(out, base64.StdEncoding.EncodeToString(buf[:n]))
		}
		if out == nil {
			out = []string{}
		}
		in, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`wirePump(`+jsonOf(out)+`)`))
		if err != nil {
			return err
		}
		for _, s := range in {
			p, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return err
			}
			if client.IsValid() {
				cs.shim.WriteToUDPAddrPort(p, client)
			}
		}
	}
	return ctx.Err()
}

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
