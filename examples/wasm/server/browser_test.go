package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
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
	"github.com/gonetcode/netcode/bridge/transport"
	"github.com/gonetcode/netcode/examples/wasm/server"
	"github.com/gonetcode/netcode/examples/wasm/wire"
	"github.com/gonetcode/netcode/internal/testing/browsertest"
	"github.com/gonetcode/netcode/reliable"
)

// reliableBytes is the size of the reliable message of the tests: far
// over one netcode packet.
const reliableBytes = 128 << 10

// received is a message as the server's OnMessage saw it.
type received struct {
	from    net.Addr
	channel int
	n       int
	sum     [sha256.Size]byte
}

// recorder returns an OnMessage that reports every reliable message on
// the channel it returns (dropping them past 16 unread).
func recorder() (func(net.Addr, int, []byte), <-chan received) {
	c := make(chan received, 16)
	return func(from net.Addr, channel int, msg []byte) {
		if channel != wire.Reliable {
			return
		}
		select {
		case c <- received{from: from, channel: channel, n: len(msg), sum: sha256.Sum256(msg)}:
		default:
		}
	}, c
}

// serverGot waits for the server's record of the next reliable message
// and checks that it is n bytes of wire.Pattern.
func serverGot(t *testing.T, c <-chan received, n int) received {
	t.Helper()
	select {
	case r := <-c:
		assert.Equal(t, wire.Reliable, r.channel)
		assert.Equal(t, n, r.n, "bytes the server received")
		assert.Equal(t, sha256.Sum256(wire.Pattern(n)), r.sum, "SHA-256 of what the server received")
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not report the reliable message")
		return received{}
	}
}

// dialSession gets a connect token from the example's endpoint at url,
// connects over UDP and starts a session with the example's channels.
func dialSession(t *testing.T, url string) *reliable.Session {
	t.Helper()
	resp, err := http.Post(url+"/token", "", nil)
	require.NoError(t, err)
	tok, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := netcode.DialContext(ctx, tok)
	require.NoError(t, err)
	sess, err := reliable.NewSession(conn, wire.Config())
	if err != nil {
		conn.Close()
		require.NoError(t, err)
	}
	return sess
}

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
// headless Chromium; it connects end to end encrypted through the Mux,
// over WebTransport (pinning the server's development certificate by
// hash) and then over the WebSocket transport, and runs a reliable
// session, while a UDP client uses the same server. Unreliable messages of every size up to 1200 bytes, and
// a reliable message of 128 KiB, come back intact, and the server received
// the reliable message intact.
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

	onMessage, reports := recorder()
	s, err := server.New(server.Config{WASM: wasm, WASMExec: wasmExec, OnMessage: onMessage, WebTransportAddr: "127.0.0.1:0"})
	require.NoError(t, err)
	hs := httptest.NewServer(s)
	defer func() {
		require.NoError(t, s.Close())
		hs.Close()
	}()

	// A UDP client all along.
	udp := dialSession(t, hs.URL)
	defer udp.Close()
	require.Equal(t, 1, s.Listener.Stats().Connected)
	assert.False(t, transport.IsSessionAddr(netip.MustParseAddrPort(udp.LocalAddr().String())))

	// The page uses WebTransport by default (the browser has it, the
	// server serves it), the WebSocket when asked.
	for _, tc := range []struct{ name, query string }{
		{"webtransport", ""},
		{"websocket", "?transport=websocket"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkPage(t, ctx, s, hs.URL+"/"+tc.query, tc.name, false, reports)
		})
	}
	// With the WebTransport endpoint gone (its socket closed; the info
	// still names it), the client falls back to the WebSocket and says why.
	t.Run("fallback", func(t *testing.T) {
		require.NoError(t, s.WebTransport.Close())
		checkPage(t, ctx, s, hs.URL+"/", "websocket", true, reports)
	})

	// The UDP client's unreliable echo.
	uch := udp.Channel(wire.Unreliable)
	require.NoError(t, uch.Send([]byte("over udp")))
	require.NoError(t, uch.SetReadDeadline(time.Now().Add(5*time.Second)))
	buf := make([]byte, wire.MaxUnreliableMessage)
	n, err := uch.Receive(buf)
	require.NoError(t, err)
	assert.Equal(t, "over udp", string(buf[:n]))
	require.NoError(t, udp.Close())
	cancel()
}

// checkPage loads the page at url, which connects over transport (after
// failing with WebTransport, if fallback), and checks its echoes,
// unreliable and reliable, and its close.
func checkPage(t *testing.T, ctx context.Context, s *server.Server, url, transportName string, fallback bool, reports <-chan received) {
	step(t, ctx, 60*time.Second, "client loads, connects and checks 100 echoes",
		chromedp.Navigate(url),
		chromedp.WaitVisible(chromedp.CSS(`#status[data-state="done"], #status[data-state="error"]`)),
	)
	raw := eval[string](t, ctx, 5*time.Second, `globalThis.netcodeResult`)
	var res struct {
		ClientIndex, MaxClients, Sent, Received, Bad int
		Transport, Fallback, Error                   string
	}
	require.NoError(t, json.Unmarshal([]byte(raw), &res), raw)
	require.Empty(t, res.Error)
	assert.Equal(t, transportName, res.Transport, "fallback: %s", res.Fallback)
	if fallback {
		assert.NotEmpty(t, res.Fallback, "why not WebTransport")
	} else {
		assert.Empty(t, res.Fallback)
	}
	assert.Equal(t, 100, res.Sent)
	assert.Equal(t, 100, res.Received)
	assert.Zero(t, res.Bad, "echoes that came back different")
	assert.Equal(t, 64, res.MaxClients)
	assert.Equal(t, 2, s.Listener.Stats().Connected)
	assert.Equal(t, 1, s.Mux.Sessions())

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

	// A reliable message of 128 KiB from the browser: the server gets it
	// whole, and its echo comes back byte for byte.
	raw = eval[string](t, ctx, 20*time.Second, fmt.Sprintf(`netcodeReliable(%d)`, reliableBytes))
	var rel struct {
		Bytes, EchoBytes int
		SHA256           string
		Intact           bool
		Millis           int64
	}
	require.NoError(t, json.Unmarshal([]byte(raw), &rel), raw)
	t.Logf("reliable %d-byte message echoed in the browser in %d ms over %s", rel.Bytes, rel.Millis, transportName)
	want := sha256.Sum256(wire.Pattern(reliableBytes))
	assert.Equal(t, reliableBytes, rel.Bytes)
	assert.Equal(t, reliableBytes, rel.EchoBytes)
	assert.Equal(t, hex.EncodeToString(want[:]), rel.SHA256, "the page sent another message")
	assert.True(t, rel.Intact, "the echo differs from the message")
	r := serverGot(t, reports, reliableBytes)
	assert.True(t, transport.IsSessionAddr(netip.MustParseAddrPort(r.from.String())), "it came over the Mux's %s transport: %v", transportName, r.from)

	// The same through the page's button.
	step(t, ctx, 20*time.Second, "reliable button",
		chromedp.Click(chromedp.ID("reliable")),
		chromedp.WaitVisible(chromedp.CSS(`#log li.reliable, #log li.error`)),
	)
	text, err = chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`#log li:last-child`)))
	require.NoError(t, err)
	assert.Contains(t, text, fmt.Sprintf("%d bytes sent reliably, echoed intact", reliableBytes))
	serverGot(t, reports, reliableBytes)

	// Closing in the browser frees the server's slot at once.
	assert.Equal(t, "closed", eval[string](t, ctx, 10*time.Second, `netcodeClose()`))
	require.Eventually(t, func() bool { return s.Listener.Stats().Connected == 1 }, 5*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return s.Mux.Sessions() == 0 }, 5*time.Second, 10*time.Millisecond)
}

// TestReliableEchoOverUDP runs the example's session over UDP, IPv4 and
// IPv6, without a browser: a reliable message of 128 KiB and unreliable
// ones reach the server intact and come back byte for byte.
func TestReliableEchoOverUDP(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, tc := range []struct{ name, addr string }{
		{"IPv4", "127.0.0.1:0"},
		{"IPv6", "[::1]:0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "IPv6" {
				pc, err := net.ListenPacket("udp6", "[::1]:0")
				if err != nil {
					t.Skipf("no IPv6 loopback: %v", err)
				}
				pc.Close()
			}
			onMessage, reports := recorder()
			s, err := server.New(server.Config{UDPAddr: tc.addr, OnMessage: onMessage})
			require.NoError(t, err)
			hs := httptest.NewServer(s)
			defer func() {
				require.NoError(t, s.Close())
				hs.Close()
			}()
			sess := dialSession(t, hs.URL)
			defer sess.Close()

			rch := sess.Channel(wire.Reliable)
			require.NoError(t, rch.SetReadDeadline(time.Now().Add(10*time.Second)))
			msg := wire.Pattern(reliableBytes)
			require.NoError(t, rch.Send(msg))
			buf := make([]byte, wire.MaxReliableMessage)
			n, err := rch.Receive(buf)
			require.NoError(t, err)
			assert.Equal(t, msg, buf[:n], "the echo differs from the message")
			r := serverGot(t, reports, reliableBytes)
			assert.False(t, transport.IsSessionAddr(netip.MustParseAddrPort(r.from.String())))

			uch := sess.Channel(wire.Unreliable)
			require.NoError(t, uch.SetReadDeadline(time.Now().Add(5*time.Second)))
			for _, size := range []int{1, netcode.MaxPayloadBytes, wire.MaxUnreliableMessage} {
				p := wire.Pattern(size)
				require.NoError(t, uch.Send(p))
				n, err := uch.Receive(buf)
				require.NoError(t, err)
				assert.Equal(t, p, buf[:n], "unreliable echo of %d bytes", size)
			}
			require.NoError(t, sess.Close())
		})
	}
}

// TestWebTransportAddr: the address the example prints for WebTransport is
// its socket's, known as soon as New returns (it printed "udp <nil>" when
// it asked the server, whose goroutine had not begun), and nil when off.
func TestWebTransportAddr(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, wt := range []string{"127.0.0.1:0", ""} {
		s, err := server.New(server.Config{UDPAddr: "127.0.0.1:0", WebTransportAddr: wt})
		require.NoError(t, err)
		got := s.WebTransportAddr()
		if wt == "" {
			assert.Nil(t, got)
		} else if assert.NotNil(t, got) {
			ap, err := netip.ParseAddrPort(got.String())
			require.NoError(t, err)
			assert.NotZero(t, ap.Port())
		}
		require.NoError(t, s.Close())
	}
}
