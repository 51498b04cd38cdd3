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
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"

	"github.com/gonetcode/netcode/bridge/webtransport"
	"github.com/gonetcode/netcode/bridge/wire"
	"github.com/gonetcode/netcode/metrics"
)

// wireReady, if set, is told the wire's TCP and UDP addresses once they
// listen (tests); wireACMEClient, if set, is the HTTP client of the ACME
// directory (tests: one that trusts a local test CA).
var (
	wireReady      func(tcp, udp net.Addr)
	wireACMEClient *http.Client
)

// rangeList is a repeatable wire target flag.
type rangeList []wire.Range

func (l *rangeList) String() string { return joinValues(*l) }

func (l *rangeList) Set(v string) error {
	r, err := wire.ParseRange(v)
	if err != nil {
		return err
	}
	*l = append(*l, r)
	return nil
}

// wireFlags are the wire command's settings, checked before any socket is
// bound.
type wireFlags struct {
	addr, wtAddr, metricsAddr string
	allow                     rangeList
	origins, devHosts         stringList
	certFile, keyFile         string
	acmeDomains               stringList
	acmeDir, acmeCache        string
	acmeEmail, acmeHTTP       string
	cfg                       wire.Config
	verbose                   bool
}

func runWire(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("wire", "-allow host:port[-port] [-allow ...] [-addr :443] [-tls-cert FILE -tls-key FILE | -acme-domain NAME] [flags]\n\n"+
		"Serves the datagram wire Cute Framework's web builds (cf_client_web_wire) and netcode's\n"+
		"browser clients dial: https://HOST/wire/<port>, WebTransport datagrams on UDP and the\n"+
		"WebSocket fallback on TCP at the same URL, each session 1:1 to the allowed UDP target\n"+
		"<port> names. It forwards datagrams unchanged and never reads them.", stdout, stderr)
	var f wireFlags
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8080", "TCP address of the WebSocket sessions (and /webtransport): HTTPS with a certificate")
	fs.StringVar(&f.wtAddr, "webtransport", "", "UDP address of the WebTransport sessions (default: -addr's, on UDP; \"off\": none)")
	fs.Var(&f.allow, "allow", "UDP target sessions may reach: IP:port or IP:first-last; a session's port picks the first range holding it (repeatable; none refuses all)")
	fs.Var(&f.origins, "origin", "origin pattern whose pages may connect, besides the wire's own host (repeatable)")
	fs.StringVar(&f.certFile, "tls-cert", "", "TLS certificate file (PEM) browsers trust (needs -tls-key)")
	fs.StringVar(&f.keyFile, "tls-key", "", "TLS private key file (PEM) of -tls-cert")
	fs.Var(&f.acmeDomains, "acme-domain", "host name to get certificates for from an ACME CA (Let's Encrypt), automatically (repeatable)")
	fs.StringVar(&f.acmeDir, "acme-directory", autocert.DefaultACMEDirectory, "ACME directory URL of the CA")
	fs.StringVar(&f.acmeCache, "acme-cache", "", "directory keeping the ACME account and certificates (default: the user cache directory's netcode-acme)")
	fs.StringVar(&f.acmeEmail, "acme-email", "", "contact address for the ACME account (optional)")
	fs.StringVar(&f.acmeHTTP, "acme-http", "", "TCP address to answer ACME http-01 challenges on, such as :80 (default: none; tls-alpn-01 on -addr, which must then be reachable on port 443)")
	fs.Var(&f.devHosts, "dev-host", "without a certificate: host name or IP address of the WebTransport development certificates (repeatable; default localhost, 127.0.0.1, ::1)")
	fs.IntVar(&f.cfg.MaxSessions, "max-sessions", 0, "sessions open at once, WebSocket and WebTransport together (0: 1024)")
	fs.IntVar(&f.cfg.MaxSessionsPerSource, "max-per-source", 0, "sessions open at once from one IPv4 address or IPv6 /64 (0: 16)")
	fs.DurationVar(&f.cfg.IdleTimeout, "idle", 30*time.Second, "end a session after this long without a datagram either way")
	fs.DurationVar(&f.cfg.WriteTimeout, "write-timeout", 10*time.Second, "end a WebSocket session whose browser takes no message for this long")
	fs.IntVar(&f.cfg.MaxDatagram, "max-datagram", 0, "largest datagram in bytes (0: the UDP maximum; WebTransport: also the QUIC path's)")
	fs.IntVar(&f.cfg.MaxDatagramsPerSecond, "rate", 1000, "datagrams a second a session may send to its target (past a second's burst; the rest is dropped)")
	fs.StringVar(&f.metricsAddr, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics (off if empty)")
	fs.BoolVar(&f.verbose, "v", false, "log sessions and refusals to stderr")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	return f.run(ctx, stderr)
}

// check validates the flags, before anything is bound.
func (f *wireFlags) check() error {
	switch {
	case len(f.allow) == 0:
		return errors.New("name the UDP targets sessions may reach with -allow (it refuses all others)")
	case (f.certFile == "") != (f.keyFile == ""):
		return errors.New("-tls-cert and -tls-key go together")
	case f.certFile != "" && len(f.acmeDomains) > 0:
		return errors.New("-tls-cert and -acme-domain: one source of certificates")
	case len(f.acmeDomains) == 0 && (f.acmeHTTP != "" || f.acmeEmail != "" || f.acmeCache != ""):
		return errors.New("-acme-http, -acme-email and -acme-cache need -acme-domain")
	case len(f.devHosts) > 0 && (f.certFile != "" || len(f.acmeDomains) > 0):
		return errors.New("-dev-host is for development certificates, without -tls-cert or -acme-domain")
	case f.cfg.MaxSessions < 0, f.cfg.MaxSessionsPerSource < 0:
		return errors.New("-max-sessions and -max-per-source: 0 (the default) or more")
	case f.cfg.IdleTimeout <= 0:
		return errors.New("-idle must be positive: an idle session would hold its slot for ever")
	case f.cfg.WriteTimeout <= 0:
		return errors.New("-write-timeout must be positive")
	case f.cfg.MaxDatagram < 0 || f.cfg.MaxDatagram > wire.MaxUDP6:
		return fmt.Errorf("-max-datagram: 0 (the UDP maximum) to %d", wire.MaxUDP6)
	case f.cfg.MaxDatagramsPerSecond <= 0:
		return errors.New("-rate must be positive")
	}
	for _, d := range f.acmeDomains {
		if d == "" || strings.ContainsAny(d, ":/ ") || net.ParseIP(d) != nil {
			return fmt.Errorf("-acme-domain %q: a host name", d)
		}
	}
	for _, a := range []struct{ flag, v string }{{"-addr", f.addr}, {"-webtransport", f.wtAddr}, {"-metrics", f.metricsAddr}, {"-acme-http", f.acmeHTTP}} {
		if a.v == "" || a.v == "off" && a.flag == "-webtransport" {
			continue
		}
		if _, _, err := net.SplitHostPort(a.v); err != nil {
			return fmt.Errorf("%s %q: %w", a.flag, a.v, err)
		}
	}
	return nil
}

// tlsConfig returns the certificates: from files, from ACME (with the
// handler of http-01 challenges), or nil for development ones.
func (f *wireFlags) tlsConfig() (*tls.Config, http.Handler, error) {
	switch {
	case f.certFile != "":
		cfg, err := loadCert(f.certFile, f.keyFile)
		return cfg, nil, err
	case len(f.acmeDomains) > 0:
		cache := f.acmeCache
		if cache == "" {
			dir, err := os.UserCacheDir()
			if err != nil {
				return nil, nil, fmt.Errorf("-acme-cache: %w", err)
			}
			cache = filepath.Join(dir, "netcode-acme")
		}
		m := &autocert.Manager{
			Prompt:     autocert.AcceptTOS,
			HostPolicy: autocert.HostWhitelist(f.acmeDomains...),
			Cache:      autocert.DirCache(cache),
			Email:      f.acmeEmail,
			Client:     &acme.Client{DirectoryURL: f.acmeDir, HTTPClient: wireACMEClient},
		}
		return m.TLSConfig(), m.HTTPHandler(nil), nil
	}
	return nil, nil, nil
}

func (f *wireFlags) run(ctx context.Context, stderr io.Writer) error {
	tlsCfg, challenges, err := f.tlsConfig()
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	if f.verbose {
		f.cfg.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	f.cfg.Allow = f.allow
	f.cfg.OriginPatterns = f.origins
	w := wire.NewHandler(&f.cfg)
	defer w.Close()
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return err
	}
	defer ln.Close()
	var wg sync.WaitGroup
	defer wg.Wait()
	mux := http.NewServeMux()
	mux.Handle(wire.DefaultPath, w)
	serving := []any{"allow", f.allow.String()}
	var udpAddr net.Addr
	if f.wtAddr != "off" {
		wtAddr := f.wtAddr
		if wtAddr == "" {
			wtAddr = ln.Addr().String()
		}
		var (
			wts       *webtransport.Server
			wtServing []any
		)
		wts, udpAddr, wtServing, err = serveWebTransport(&webtransport.Config{Wire: w, TLSConfig: tlsCfg, DevHosts: f.devHosts, Logger: f.cfg.Logger}, wtAddr, mux, &wg)
		if err != nil {
			return err
		}
		defer wts.Close()
		serving = append(serving, wtServing...)
	}
	web := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, TLSConfig: tlsCfg}
	servers := []*http.Server{web}
	done := make(chan error, 3)
	scheme := "ws"
	if tlsCfg != nil {
		scheme = "wss"
		wg.Go(func() { done <- web.ServeTLS(ln, "", "") }) // the certificates are in TLSConfig
	} else {
		wg.Go(func() { done <- web.Serve(ln) })
	}
	if challenges != nil && f.acmeHTTP != "" {
		hl, err := net.Listen("tcp", f.acmeHTTP)
		if err != nil {
			web.Close()
			return err
		}
		s := &http.Server{Handler: challenges, ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, s)
		wg.Go(func() { done <- s.Serve(hl) })
	}
	if f.metricsAddr != "" {
		reg := prometheus.NewRegistry()
		reg.MustRegister(metrics.NewWireCollector(w, nil), collectors.NewGoCollector(),
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		ml, err := net.Listen("tcp", f.metricsAddr)
		if err != nil {
			for _, s := range servers {
				s.Close()
			}
			return err
		}
		m := http.NewServeMux()
		m.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		s := &http.Server{Handler: m, ReadHeaderTimeout: 10 * time.Second}
		servers = append(servers, s)
		wg.Go(func() { done <- s.Serve(ml) })
		serving = append(serving, "metrics", "http://"+ml.Addr().String()+"/metrics")
	}
	log.Info("netcode wire serving", append([]any{"url", scheme + "://" + ln.Addr().String() + wire.DefaultPath + "<port>"}, serving...)...)
	if wireReady != nil {
		wireReady(ln.Addr(), udpAddr)
	}
	select {
	case <-ctx.Done():
		err = nil
	case err = <-done:
	}
	w.Close() // ends every session cleanly (1001)
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, s := range servers {
		if serr := s.Shutdown(shutdown); serr != nil && err == nil {
			err = serr
		}
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	log.Info("netcode wire stopped")
	return err
}
