package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/gonetcode/netcode/bridge"
)

// bridgeReady, if set, is told the bridge's HTTP address once it listens (tests).
var bridgeReady func(net.Addr)

// addrList is a repeatable host:port flag.
type addrList []netip.AddrPort

func (l *addrList) String() string { return joinAddrs(*l) }

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

func (l *prefixList) String() string {
	s := make([]string, len(*l))
	for i, p := range *l {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

func (l *prefixList) Set(v string) error {
	p, err := netip.ParsePrefix(v)
	if err != nil {
		return err
	}
	*l = append(*l, p.Masked())
	return nil
}

func runBridge(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bridge", "-allow host:port [-allow ...] [-addr host:port] [flags]", stdout, stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "HTTP address to serve the relay on")
	var allow addrList
	fs.Var(&allow, "allow", "netcode server the bridge may dial, as host:port; a host name allows every address it resolves to at start (repeatable)")
	var allowNet prefixList
	fs.Var(&allowNet, "allow-net", "address prefix of servers the bridge may dial, any port (repeatable)")
	path := fs.String("path", "/relay", "URL path of the WebSocket relay; the ES module is served at /netcode.js")
	maxSessions := fs.Int("max-sessions", 0, "sessions open at once (0: the bridge's default, 1024)")
	idle := fs.Duration("idle", bridge.DefaultIdleTimeout, "end a session after this long without a message from the browser (negative: never)")
	var origins stringList
	fs.Var(&origins, "origin", "origin pattern whose pages may connect, besides the bridge's own host (repeatable)")
	verbose := fs.Bool("v", false, "log sessions to stderr")
	certFile := fs.String("tls-cert", "", "TLS certificate file (PEM): serve wss:// and https:// (needs -tls-key)")
	keyFile := fs.String("tls-key", "", "TLS private key file (PEM) of -tls-cert")
	if err := parse(fs, args); err != nil {
		return err
	}
	scheme := "ws"
	var tlsCfg *tls.Config
	if *certFile != "" || *keyFile != "" {
		cert, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			return fmt.Errorf("-tls-cert and -tls-key: %w", err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		scheme = "wss"
	}
	if len(allow) == 0 && len(allowNet) == 0 {
		return errors.New("name the servers it may dial with -allow or -allow-net (it refuses all others)")
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	cfg := bridge.Config{
		AllowedServers: allow,
		MaxSessions:    *maxSessions,
		IdleTimeout:    *idle,
		OriginPatterns: origins,
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
	if *verbose {
		cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	h := bridge.NewHandler(&cfg)
	mux := http.NewServeMux()
	mux.Handle(*path, h)
	mux.Handle("/netcode.js", bridge.JSHandler())
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, TLSConfig: tlsCfg}
	log.Info("netcode bridge serving", "url", scheme+"://"+ln.Addr().String()+*path, "allow", allow.String(), "allow_net", allowNet.String())
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
		h.Close()
		return err
	}
	h.Close() // ends every session with a clean netcode disconnect
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = srv.Shutdown(shutdown)
	if serr := <-done; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	log.Info("netcode bridge stopped")
	return err
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }
