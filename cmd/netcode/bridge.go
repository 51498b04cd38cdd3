package main

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/bridge"
	"github.com/gonetcode/netcode/bridge/transport"
	"github.com/gonetcode/netcode/bridge/webtransport"
)

// bridgeReady, if set, is told the bridge's HTTP address once it listens
// (tests); bridgeUDPReady, in transport mode, its echo server's UDP
// address.
var (
	bridgeReady    func(net.Addr)
	bridgeUDPReady func(net.Addr)
)

// addrList is a repeatable host:port flag.
type addrList []netip.AddrPort

func (l *addrList) String() string { return joinValues(*l) }

// Set adds v, an address or a host name with a port: a name adds every
// address it resolves to now.
func (l *addrList) Set(v string) error {
	a, err := resolveAddrs(context.Background(), v)
	if err != nil {
		return err
	}
	*l = append(*l, a...)
	return nil
}

// prefixList is a repeatable address-prefix flag.
type prefixList []netip.Prefix

func (l *prefixList) String() string { return joinValues(*l) }

func (l *prefixList) Set(v string) error {
	p, err := netip.ParsePrefix(v)
	if err != nil {
		return err
	}
	*l = append(*l, p.Masked())
	return nil
}

func runBridge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bridge", "-allow host:port [-allow ...] [-addr host:port] [-webtransport host:port] [flags]\n"+
		"       netcode bridge -mode transport -key KEY [-udp host:port] [-addr host:port] [-webtransport host:port] [flags]\n\n"+
		"Relay mode (the default) relays browser sessions to the netcode servers it may dial.\n"+
		"Transport mode runs a netcode echo server whose socket also serves the end-to-end\n"+
		"encrypted transport: UDP, WebSocket and, with -webtransport, WebTransport clients.", stdout, stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "HTTP address to serve the WebSocket sessions on (and /netcode.js, /webtransport)")
	mode := fs.String("mode", "relay", "relay, or transport (an echo server of its own)")
	var allow addrList
	fs.Var(&allow, "allow", "relay: netcode server the bridge may dial, as host:port; a host name allows every address it resolves to at start (repeatable)")
	var allowNet prefixList
	fs.Var(&allowNet, "allow-net", "relay: address prefix of servers the bridge may dial, any port (repeatable)")
	path := fs.String("path", "", "URL path of the WebSocket sessions (default /relay, or /transport in transport mode)")
	maxSessions := fs.Int("max-sessions", 0, "sessions open at once, WebSocket and WebTransport together (0: the bridge's default, 1024)")
	idle := fs.Duration("idle", bridge.DefaultIdleTimeout, "end a session after this long without a message (negative: never)")
	var origins stringList
	fs.Var(&origins, "origin", "origin pattern whose pages may connect, besides the bridge's own host (repeatable)")
	verbose := fs.Bool("v", false, "log sessions to stderr")
	certFile := fs.String("tls-cert", "", "TLS certificate file (PEM): serve wss:// and https://, and WebTransport with it (needs -tls-key)")
	keyFile := fs.String("tls-key", "", "TLS private key file (PEM) of -tls-cert")
	wtAddr := fs.String("webtransport", "", "UDP address to serve WebTransport (HTTP/3) sessions on too (off if empty); without -tls-cert, with self-signed development certificates pinned by hash, served at /webtransport")
	var devHosts stringList
	fs.Var(&devHosts, "dev-host", "host name or IP address of the WebTransport development certificates (repeatable; default localhost, 127.0.0.1, ::1)")
	udpAddr := fs.String("udp", ":40000", "transport: UDP address of the echo server")
	key := fs.String("key", "", "transport: private key shared with the token backend: hex, base64, or a key file")
	proto := protocolFlag(defaultProtocolID)
	fs.Var(&proto, "protocol", "transport: protocol id (decimal or 0x hex)")
	maxClients := fs.Int("max-clients", 256, "transport: client slots")
	if err := parse(fs, args); err != nil {
		return err
	}
	// Every address is checked before a socket is bound.
	if err := checkAddrs(map[string]string{"-addr": *addr, "-udp": *udpAddr, "-webtransport": *wtAddr}); err != nil {
		return err
	}
	scheme := "ws"
	var tlsCfg *tls.Config
	if *certFile != "" || *keyFile != "" {
		var err error
		if tlsCfg, err = loadCert(*certFile, *keyFile); err != nil {
			return err
		}
		scheme = "wss"
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	var sessLog *slog.Logger
	if *verbose {
		sessLog = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	mux := http.NewServeMux()
	var (
		closeSessions func() error // the Handler's or the Listener's Close
		wtCfg         = webtransport.Config{TLSConfig: tlsCfg, DevHosts: devHosts, Logger: sessLog}
		serving       []any
		wg            sync.WaitGroup
	)
	switch *mode {
	case "relay":
		if len(allow) == 0 && len(allowNet) == 0 {
			return errors.New("name the servers it may dial with -allow or -allow-net (it refuses all others)")
		}
		cfg := bridge.Config{
			AllowedServers: allow,
			MaxSessions:    *maxSessions,
			IdleTimeout:    *idle,
			OriginPatterns: origins,
			Logger:         sessLog,
		}
		if len(allowNet) > 0 {
			nets := allowNet
			cfg.AllowServer = func(a netip.AddrPort) bool {
				for _, p := range nets {
					if p.Contains(a.Addr().Unmap()) {
						return true
					}
				}
				return false
			}
		}
		h := bridge.NewHandler(&cfg)
		if *path == "" {
			*path = "/relay"
		}
		mux.Handle(*path, h)
		mux.Handle("/netcode.js", bridge.JSHandler())
		closeSessions = h.Close
		wtCfg.Relay = h
		serving = append(serving, "allow", allow.String(), "allow_net", allowNet.String())
	case "transport":
		k, err := parseKey(*key, stderr)
		if err != nil {
			return err
		}
		udp, err := net.ListenPacket("udp", *udpAddr)
		if err != nil {
			return fmt.Errorf("-udp: %w", err)
		}
		m := transport.NewMux(udp, &transport.MuxConfig{MaxSessions: *maxSessions, IdleTimeout: *idle, OriginPatterns: origins, Logger: sessLog})
		l, err := netcode.NewListener(m, &netcode.ServerConfig{ProtocolID: uint64(proto), PrivateKey: k, MaxClients: *maxClients})
		if err != nil {
			m.Close()
			return err
		}
		wg.Go(func() { echoServe(l, log, false) })
		defer wg.Wait()
		if *path == "" {
			*path = "/transport"
		}
		mux.Handle(*path, m.Handler())
		closeSessions = l.Close // closes the Mux
		wtCfg.Mux = m
		serving = append(serving, "udp", l.Addr().String(), "protocol", proto.String())
		if bridgeUDPReady != nil {
			bridgeUDPReady(l.Addr())
		}
	default:
		return fmt.Errorf("-mode %q: relay or transport", *mode)
	}
	var wts *webtransport.Server
	if *wtAddr != "" {
		var (
			wtServing []any
			err       error
		)
		if wts, _, wtServing, err = serveWebTransport(&wtCfg, *wtAddr, mux, &wg); err != nil {
			closeSessions()
			return err
		}
		serving = append(serving, wtServing...)
	}
	mux.Handle("/", noPage(*path))
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		closeBridge(closeSessions, wts)
		return fmt.Errorf("-addr: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, TLSConfig: tlsCfg}
	log.Info("netcode bridge serving", append([]any{"mode", *mode, "url", scheme + "://" + ln.Addr().String() + *path}, serving...)...)
	if bridgeReady != nil {
		bridgeReady(ln.Addr())
	}
	done := make(chan error, 1)
	go func() {
		if tlsCfg != nil {
			done <- srv.ServeTLS(ln, "", "") // the certificate is in TLSConfig
			return
		}
		done <- srv.Serve(ln)
	}()
	select {
	case <-ctx.Done():
	case err := <-done:
		closeBridge(closeSessions, wts)
		return err
	}
	closeBridge(closeSessions, wts) // ends every session cleanly (a netcode disconnect, 1001)
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(shutdown)
	if serr := <-done; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	log.Info("netcode bridge stopped")
	return err
}

// closeBridge ends the sessions (WebSocket and WebTransport), then closes
// the WebTransport server, if any.
func closeBridge(closeSessions func() error, wts *webtransport.Server) {
	closeSessions()
	if wts != nil {
		wts.Close()
	}
}

// loadCert returns the TLS configuration of the flags -tls-cert and
// -tls-key: the certificate and key in those PEM files.
func loadCert(certFile, keyFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("-tls-cert and -tls-key: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// serveWebTransport serves cfg's WebTransport sessions on a UDP socket
// bound to addr (the flag -webtransport), in a goroutine of wg, and their
// information at /webtransport on mux. It returns the server, which the
// caller closes, the socket's address, and the attributes that name them
// in the log line of what serves: the address and, with development
// certificates (cfg.TLSConfig nil), the certificates' hashes.
func serveWebTransport(cfg *webtransport.Config, addr string, mux *http.ServeMux, wg *sync.WaitGroup) (*webtransport.Server, net.Addr, []any, error) {
	wts, err := webtransport.NewServer(cfg)
	if err != nil {
		return nil, nil, nil, err
	}
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		wts.Close()
		return nil, nil, nil, fmt.Errorf("-webtransport: %w", err)
	}
	wg.Go(func() { _ = wts.Serve(pc) })
	mux.Handle("/webtransport", wts.InfoHandler())
	serving := []any{"webtransport", pc.LocalAddr().String()}
	if cfg.TLSConfig == nil {
		hashes, _ := wts.CertificateHashes()
		for _, h := range hashes {
			serving = append(serving, "cert_sha256", base64.StdEncoding.EncodeToString(h[:]))
		}
	}
	return wts, pc.LocalAddr(), serving, nil
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// noPage answers what the bridge does not serve (its root among them)
// with 404 and what it does serve: a page and its tokens come from the
// game's own site and backend.
func noPage(sessions string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "404 page not found: netcode bridge serves its sessions at "+sessions+
			" (with /netcode.js and /webtransport), not a page or connect tokens: "+
			"those come from your site and your token backend (package backend; examples/browser has all three)",
			http.StatusNotFound)
	})
}
