package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/bridge/transport"
	"github.com/gonetcode/netcode/bridge/webtransport"
	"github.com/gonetcode/netcode/bridge/wire"
	"github.com/gonetcode/netcode/internal/devcert"
	"github.com/gonetcode/netcode/internal/testing/loopback"
)

// TestWireCommandFlags: bad flags are refused before any socket is bound
// (the -addr given is taken already, and the error is still the flag's).
func TestWireCommandFlags(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	addr := taken.Addr().String()
	tests := []struct {
		args []string
		want string
	}{
		{nil, "-allow"},
		{[]string{"-allow", "game.example:5601"}, "IP address"},
		{[]string{"-allow", "127.0.0.1:0"}, "1 to 65535"},
		{[]string{"-allow", "127.0.0.1:9-8"}, "ends before it starts"},
		{[]string{"-allow", "127.0.0.1:1", "-tls-cert", "c.pem"}, "-tls-cert and -tls-key"},
		{[]string{"-allow", "127.0.0.1:1", "-tls-cert", "c", "-tls-key", "k", "-acme-domain", "a.example"}, "one source of certificates"},
		{[]string{"-allow", "127.0.0.1:1", "-acme-domain", "10.0.0.1"}, "a host name"},
		{[]string{"-allow", "127.0.0.1:1", "-acme-http", ":80"}, "need -acme-domain"},
		{[]string{"-allow", "127.0.0.1:1", "-idle", "0s"}, "-idle"},
		{[]string{"-allow", "127.0.0.1:1", "-rate", "0"}, "-rate"},
		{[]string{"-allow", "127.0.0.1:1", "-max-datagram", "70000"}, "-max-datagram"},
		{[]string{"-allow", "127.0.0.1:1", "-max-sessions", "-1"}, "-max-sessions"},
		{[]string{"-allow", "127.0.0.1:1", "-metrics", "nowhere"}, "-metrics"},
	}
	for _, tt := range tests {
		code, _, errs := cli(t, append([]string{"wire", "-addr", addr}, tt.args...)...)
		assert.NotZero(t, code, "%v", tt.args)
		assert.Contains(t, errs, tt.want, "%v", tt.args)
		assert.NotContains(t, errs, "address already in use", "%v: a socket was bound first", tt.args)
	}
}

// runningWire is a wire command running in the background.
type runningWire struct {
	tcp, udp net.Addr
	stderr   lockedBuffer
	stop     func() int // ends the command, returns its exit code
}

func startWire(t *testing.T, args ...string) *runningWire {
	t.Helper()
	ready := make(chan [2]net.Addr, 1)
	wireReady = func(tcp, udp net.Addr) { ready <- [2]net.Addr{tcp, udp} }
	t.Cleanup(func() { wireReady = nil })
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningWire{}
	done := make(chan int, 1)
	go func() { done <- run(ctx, append([]string{"wire"}, args...), io.Discard, &r.stderr) }()
	select {
	case a := <-ready:
		r.tcp, r.udp = a[0], a[1]
	case code := <-done:
		cancel()
		t.Fatalf("wire exited with %d: %s", code, r.stderr.String())
	}
	var code *int
	r.stop = func() int {
		if code == nil {
			cancel()
			select {
			case c := <-done:
				code = &c
			case <-time.After(10 * time.Second):
				t.Fatal("wire did not stop")
			}
		}
		return *code
	}
	t.Cleanup(func() { r.stop() })
	return r
}

// serveForWire runs serve on IPv4 loopback and returns its UDP address and
// a maker of tokens for it.
func serveForWire(t *testing.T) (net.Addr, func() []byte) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := startServe(t, ctx, loopback.Families[0], "-drain", "0s")
	t.Cleanup(func() {
		cancel()
		<-s.done
	})
	return s.udp, func() []byte {
		code, tok, errs := cli(t, "token", "-key", s.keyFile, "-server", s.udp.String())
		require.Equal(t, 0, code, errs)
		return []byte(tok)
	}
}

// wireEcho connects a netcode client through the wire (dialer) and
// checks echoes of a few payloads.
func wireEcho(t *testing.T, d netcode.Dialer, tok []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := d.DialContext(ctx, tok)
	require.NoError(t, err)
	defer c.Close()
	buf := make([]byte, netcode.MaxPayloadBytes)
	for _, p := range []string{"one", "two", "three"} {
		_, err := c.Write([]byte(p))
		require.NoError(t, err)
		require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
		n, err := c.Read(buf)
		require.NoError(t, err)
		assert.Equal(t, p, string(buf[:n]))
	}
}

// TestWireCommand runs serve and wire (development certificates) and a
// netcode client through the wire over WebSocket and over WebTransport
// (the certificate pinned from /webtransport); /metrics counts them.
func TestWireCommand(t *testing.T) {
	udp, token := serveForWire(t)
	metricsLn, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	metricsAddr := metricsLn.Addr().String()
	metricsLn.Close()
	w := startWire(t, "-addr", "127.0.0.1:0", "-allow", udp.String(), "-metrics", metricsAddr, "-v")
	port := udp.(*net.UDPAddr).Port
	wsURL := fmt.Sprintf("ws://%s%s%d", w.tcp, wire.DefaultPath, port)
	wireEcho(t, netcode.Dialer{ListenPacket: transport.ListenPacket(wsURL, nil)}, token())

	info, opts := webtransportInfo(t, "ws", w.tcp, nil)
	require.NotEmpty(t, info.Wire)
	wireEcho(t, netcode.Dialer{ListenPacket: webtransport.ListenPacket(fmt.Sprint(info.Wire, port), opts)}, token())

	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Contains(t, string(body), "netcode_wire_sessions_opened_total 2")
	assert.Contains(t, string(body), `netcode_wire_refused_total{reason="not_allowed"} 0`)
	assert.Equal(t, 0, w.stop(), w.stderr.String())
	assert.Contains(t, w.stderr.String(), "netcode wire serving")
}

// TestWireCommandACME: with -acme-domain, the wire gets its certificate
// from a real ACME server, Pebble (Let's Encrypt's test CA, Debian's
// package pebble), run on loopback by the test: the first TLS handshake
// orders it, Pebble validates the domain (tls-alpn-01, on the wire's own
// port) and issues it, and then a netcode client through the wire, over
// WebSocket (wss) and WebTransport, trusts it by Pebble's root, as a
// browser trusts Let's Encrypt's.
func TestWireCommandACME(t *testing.T) {
	pebble, err := exec.LookPath("pebble")
	var dnsSrv string
	if err == nil {
		// pebble-challtestsrv, of the same package, answers Pebble's DNS
		// queries: every name is 127.0.0.1, as a real name would be the
		// wire's public address.
		dnsSrv, err = exec.LookPath("pebble-challtestsrv")
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI installs pebble (.ci/acme-deps.sh): %v", err)
		}
		t.Skipf("no pebble (Debian's package pebble, Let's Encrypt's test ACME server) on this machine: %v", err)
	}
	udp, token := serveForWire(t)
	dir := t.TempDir()
	// Pebble's own HTTPS certificate, which the wire's ACME client trusts.
	acmeCert, err := devcert.New("127.0.0.1")
	require.NoError(t, err)
	certFile, keyFile := filepath.Join(dir, "pebble.pem"), filepath.Join(dir, "pebble.key")
	require.NoError(t, os.WriteFile(certFile, acmeCert.CertPEM, 0o600))
	require.NoError(t, os.WriteFile(keyFile, acmeCert.KeyPEM, 0o600))
	acmeAddr, mgmtAddr, httpAddr, dnsMgmt := freeTCP(t), freeTCP(t), freeTCP(t), freeTCP(t)
	dnsLn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	require.NoError(t, err)
	dnsAddr := dnsLn.LocalAddr().String()
	dnsLn.Close()
	dns := exec.Command(dnsSrv, "-dns01", dnsAddr, "-defaultIPv4", "127.0.0.1", "-defaultIPv6", "",
		"-http01", "", "-https01", "", "-tlsalpn01", "", "-management", dnsMgmt)
	var dlog lockedBuffer
	dns.Stdout, dns.Stderr = &dlog, &dlog
	require.NoError(t, dns.Start())
	defer func() {
		dns.Process.Kill()
		dns.Wait()
		if t.Failed() {
			t.Logf("pebble-challtestsrv's log:\n%s", dlog.String())
		}
	}()
	wireACMEClient = &http.Client{Transport: &http.Transport{TLSClientConfig: acmeCert.ClientConfig()}}
	defer func() { wireACMEClient = nil }()

	w := startWire(t, "-addr", "127.0.0.1:0", "-allow", udp.String(), "-acme-domain", acmeDomain,
		"-acme-directory", "https://"+acmeAddr+"/dir", "-acme-cache", filepath.Join(dir, "cache"))
	wirePort := w.tcp.(*net.TCPAddr).Port

	cfg, _ := json.Marshal(map[string]any{"pebble": map[string]any{
		"listenAddress":                  acmeAddr,
		"managementListenAddress":        mgmtAddr,
		"certificate":                    certFile,
		"privateKey":                     keyFile,
		"httpPort":                       portOf(httpAddr),
		"tlsPort":                        wirePort,
		"ocspResponderURL":               "",
		"externalAccountBindingRequired": false,
	}})
	cfgFile := filepath.Join(dir, "pebble.json")
	require.NoError(t, os.WriteFile(cfgFile, cfg, 0o600))
	cmd := exec.Command(pebble, "-config", cfgFile, "-dnsserver", dnsAddr)
	cmd.Env = append(os.Environ(), "PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0")
	var plog lockedBuffer
	cmd.Stdout, cmd.Stderr = &plog, &plog
	require.NoError(t, cmd.Start())
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("pebble's log:\n%s", plog.String())
		}
	}()
	// Pebble's root, from its management interface, once it serves.
	var root []byte
	require.Eventually(t, func() bool {
		resp, err := wireACMEClient.Get("https://" + mgmtAddr + "/roots/0")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		root, err = io.ReadAll(resp.Body)
		return err == nil && resp.StatusCode == http.StatusOK
	}, 10*time.Second, 20*time.Millisecond, "pebble serves")
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(root), "pebble's root: %s", root)
	// The client reaches 127.0.0.1 and asks for the domain (SNI), as a
	// browser that resolved it would.
	trust := &tls.Config{RootCAs: pool, ServerName: acmeDomain}

	port := udp.(*net.UDPAddr).Port
	wss := fmt.Sprintf("wss://127.0.0.1:%d%s%d", wirePort, wire.DefaultPath, port)
	wireEcho(t, netcode.Dialer{ListenPacket: transport.ListenPacket(wss, &transport.Options{
		DialOptions: &websocket.DialOptions{HTTPClient: &http.Client{Transport: &http.Transport{TLSClientConfig: trust}}},
	})}, token())
	wt := fmt.Sprintf("https://127.0.0.1:%d%s%d", wirePort, wire.DefaultPath, port)
	wireEcho(t, netcode.Dialer{ListenPacket: webtransport.ListenPacket(wt, &webtransport.Options{TLSConfig: trust})}, token())
	assert.Contains(t, plog.String(), "Issued certificate", "pebble issued it")
	assert.Equal(t, 0, w.stop(), w.stderr.String())
}

// acmeDomain is the name the ACME test's certificate is for.
const acmeDomain = "wire.test"

func freeTCP(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

func portOf(addr string) int {
	_, p, _ := net.SplitHostPort(addr)
	var n int
	fmt.Sscan(p, &n)
	return n
}
