package netcode_test

import (
	"context"
	"net"
	"net/http/httptest"
	"net/netip"
	"os"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/bridge"
	"github.com/gonetcode/netcode/bridge/transport"
	"github.com/gonetcode/netcode/bridge/webtransport"
	"github.com/gonetcode/netcode/cute"
	"github.com/gonetcode/netcode/reliable"
	"github.com/stretchr/testify/require"
)

// inventoryDocs are the package docs that list their package's goroutines,
// by the function each runs, in a block that follows a line naming
// TestGoroutineInventory: one goroutine a line, a tab, then the function
// (package.(*Type).method) and what it does.
var inventoryDocs = []string{"doc.go", "internal/engine/doc.go", "bridge/doc.go", "bridge/transport/doc.go", "bridge/webtransport/doc.go", "reliable/doc.go", "cute/doc.go"}

// documentedGoroutines reads the lists of inventoryDocs.
func documentedGoroutines(t *testing.T) map[string]bool {
	t.Helper()
	entry := regexp.MustCompile(`^//\t([a-z]+\.[\w().*]+)\s`)
	doc := make(map[string]bool)
	for _, f := range inventoryDocs {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		in, n := false, 0
		for _, line := range strings.Split(string(b), "\n") {
			switch {
			case strings.Contains(line, "TestGoroutineInventory"):
				in = true
			case in && (line == "//" && n > 0 || !strings.HasPrefix(line, "//")):
				in = false
			case in:
				if m := entry.FindStringSubmatch(line); m != nil {
					doc[m[1]] = true
					n++
				}
			}
		}
		require.NotZero(t, n, "%s lists no goroutine", f)
	}
	return doc
}

// closure matches the suffix of a function literal's name.
var closure = regexp.MustCompile(`\.(func|gowrap)\d+(\.\d+)*$`)

// methodValue matches the suffix of a method value's wrapper (a timer's
// callback given as dc.fire runs as dc.fire-fm).
var methodValue = regexp.MustCompile(`-fm$`)

// runningGoroutines returns, for every goroutine of the module's library
// code (not started by a test), the function it runs: the outermost of its
// frames in the module that is not a function literal, named as
// package.(*Type).method; and how many run each.
func runningGoroutines() map[string]int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	const module = "github.com/gonetcode/netcode"
	got := make(map[string]int)
	for _, g := range strings.Split(string(buf), "\n\n") {
		lines := strings.Split(strings.TrimSpace(g), "\n")
		type frame struct{ fn, file string }
		var frames []frame
		byTest := false
		for i := 1; i+1 < len(lines); i += 2 {
			fn, file := lines[i], strings.TrimSpace(lines[i+1])
			if strings.HasPrefix(fn, "created by ") {
				byTest = strings.Contains(file, "_test.go") || strings.Contains(fn, "testing.")
				break
			}
			if j := strings.LastIndex(fn, "("); j > 0 {
				fn = fn[:j]
			}
			fn = methodValue.ReplaceAllString(fn, "")
			frames = append(frames, frame{fn, file})
		}
		if byTest {
			continue
		}
		for _, f := range slices.Backward(frames) {
			if !strings.HasPrefix(f.fn, module) || strings.Contains(f.file, "_test.go") || closure.MatchString(f.fn) {
				continue
			}
			name := f.fn[strings.LastIndex(f.fn[:strings.Index(f.fn+".(", ".(")], "/")+1:]
			got[name]++
			break
		}
	}
	return got
}

// TestGoroutineInventory starts a Listener with a client dialed to it, a
// relay session, a transport session (a Mux and its client), a reliable
// Session and Cute's Listener and client, and checks that every goroutine
// they run is one their package docs list: a goroutine nobody documented
// fails the test. Timer callbacks count as they run: the test looks for a
// while, as callbacks come and go, and holds a dialed Conn's write turn
// until its timer's callback is seen waiting for it.
func TestGoroutineInventory(t *testing.T) {
	doc := documentedGoroutines(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	// A Listener, a dialed Conn, and a reliable Session on each side of
	// another.
	l := listen(t, "udp4", "127.0.0.1:0", nil)
	cli, _ := pair(t, l)
	defer cli.Close()
	rcfg := &reliable.Config{Channels: []reliable.ChannelConfig{{Kind: reliable.ReliableOrdered}}}
	rc, rs := pair(t, l, withClientID(4))
	sc, err := reliable.NewSession(rc, rcfg)
	require.NoError(t, err)
	defer sc.Close()
	ss, err := reliable.NewSession(rs, rcfg)
	require.NoError(t, err)
	defer ss.Close()

	// A relay session.
	relay := bridge.NewHandler(&bridge.Config{AllowedServers: []netip.AddrPort{netip.MustParseAddrPort(l.Addr().String())}})
	hs := httptest.NewServer(relay)
	defer hs.Close()
	defer relay.Close()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(hs.URL, "http"), &websocket.DialOptions{Subprotocols: []string{bridge.Subprotocol}})
	require.NoError(t, err)
	defer ws.CloseNow()
	require.NoError(t, ws.Write(ctx, websocket.MessageBinary, mint(t, l.Addr(), withClientID(2))))
	typ, _, err := ws.Read(ctx)
	require.NoError(t, err)
	require.Equal(t, websocket.MessageText, typ, "connected")

	// A transport session: a Listener over a Mux, a client over WebSocket.
	udp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	mux := transport.NewMux(udp, nil)
	ml, err := netcode.NewListener(mux, &netcode.ServerConfig{ProtocolID: testProtocolID, PrivateKey: testKey, MaxClients: 4})
	require.NoError(t, err)
	defer ml.Close()
	go func() {
		for {
			c, err := ml.Accept()
			if err != nil {
				return
			}
			go echoUntilError(c)
		}
	}()
	ms := httptest.NewServer(mux.Handler())
	defer ms.Close()
	d := netcode.Dialer{ListenPacket: transport.ListenPacket("ws"+strings.TrimPrefix(ms.URL, "http"), nil)}
	wc, err := d.DialContext(ctx, mint(t, udp.LocalAddr(), withClientID(3)))
	require.NoError(t, err)
	defer wc.Close()

	// WebTransport: a relay session and a transport session, Go clients
	// through a Server to the relay and the Mux above.
	wts, err := webtransport.NewServer(&webtransport.Config{Relay: relay, Mux: mux})
	require.NoError(t, err)
	wudp, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- wts.Serve(wudp) }()
	defer func() { wts.Close(); <-served }()
	require.Eventually(t, func() bool { return wts.Addr() != nil }, 5*time.Second, time.Millisecond)
	hashes, err := wts.CertificateHashes()
	require.NoError(t, err)
	wopts := &webtransport.Options{CertificateHashes: hashes}
	wrc, err := webtransport.DialRelay(ctx, "https://"+wts.Addr().String()+"/relay", mint(t, l.Addr(), withClientID(6)), wopts)
	require.NoError(t, err)
	defer wrc.Close()
	wd := netcode.Dialer{ListenPacket: webtransport.ListenPacket("https://"+wts.Addr().String()+"/transport", wopts)}
	wtc, err := wd.DialContext(ctx, mint(t, udp.LocalAddr(), withClientID(7)))
	require.NoError(t, err)
	defer wtc.Close()

	// A Cute Listener and a Conn dialed to it.
	pk, sk := cute.GenerateKeyPair()
	cl, err := cute.Listen("udp4", "127.0.0.1:0", &cute.ServerConfig{PublicKey: pk, SecretKey: sk})
	require.NoError(t, err)
	defer cl.Close()
	ctok, err := cute.GenerateToken(&cute.TokenParams{ClientID: 5, SecretKey: sk, ServerAddrs: []netip.AddrPort{netip.MustParseAddrPort(cl.Addr().String())}})
	require.NoError(t, err)
	cc, err := cute.DialContext(ctx, ctok)
	require.NoError(t, err)
	defer cc.Close()

	// Take the inventory over a while, timer callbacks included as they
	// run; with cli's write turn held, its keep-alive timer's callback
	// (due within 100 ms) waits in it, seen for sure.
	got := make(map[string]int)
	look := func() {
		for fn, n := range runningGoroutines() {
			got[fn] = max(got[fn], n)
		}
	}
	release := netcode.HoldWriteTurn(cli)
	for deadline := time.Now().Add(10 * time.Second); got[dueCallback] == 0 && time.Now().Before(deadline); {
		look()
		time.Sleep(time.Millisecond)
	}
	release()
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); {
		look()
		time.Sleep(time.Millisecond)
	}
	t.Logf("goroutines: %v", got)
	for fn := range got {
		if !doc[fn] {
			t.Errorf("goroutine running %s is not in its package's documented list", fn)
		}
	}
	for _, must := range []string{dueCallback, "netcode.(*dialConn).readLoop", "bridge.(*session).serve", "transport.(*Mux).readUDP", "transport.(*muxSession).serve", "reliable.(*conn).readLoop", "cute.(*Listener).updater", "cute.(*dialConn).readLoop", "webtransport.(*Server).serveConn", "webtransport.(*client).reader"} {
		require.Contains(t, got, must, "the inventory misses a goroutine it should see")
	}
}

// dueCallback is how a dialed Conn's timer callback (engine.Due's) shows.
const dueCallback = "engine.(*Due).fire"
