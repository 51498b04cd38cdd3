package webtransport

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/quic-go/quic-go"
	"github.com/quic-go/quic-go/http3"
	wt "github.com/quic-go/webtransport-go"

	"github.com/gonetcode/netcode/bridge"
	"github.com/gonetcode/netcode/bridge/internal/wsbridge"
	"github.com/gonetcode/netcode/bridge/transport"
	"github.com/gonetcode/netcode/bridge/wire"
)

// Default paths of a Server's sessions.
const (
	DefaultRelayPath     = "/relay"
	DefaultTransportPath = "/transport"
)

// Config configures a Server. It needs a Relay, a Mux or a Wire, or
// several.
type Config struct {
	// Relay, if set, is the relay whose sessions the Server serves at
	// RelayPath: they count towards its MaxSessions with its WebSocket
	// ones, obey its allow-list and timeouts, and end with its Close.
	Relay *bridge.Handler
	// RelayPath is the URL path of relay sessions; "" means "/relay".
	RelayPath string
	// Mux, if set, is the transport Mux whose sessions the Server serves
	// at TransportPath: its netcode Listener sees them as it sees its
	// WebSocket peers, under its MaxSessions, timeouts and Close.
	Mux *transport.Mux
	// TransportPath is the URL path of transport sessions; "" means
	// "/transport".
	TransportPath string
	// Wire, if set, is the wire whose sessions the Server serves under
	// WirePath (at WirePath + "<port>"): admitted by its own rules (the
	// allowed targets, its caps per source and in total), under its
	// timeouts and Close, beside its WebSocket ones.
	Wire *wire.Handler
	// WirePath is the URL path prefix of wire sessions; "" means
	// "/wire/".
	WirePath string

	// TLSConfig is the production setting: a certificate browsers trust
	// (its Certificates or GetCertificate), as on the site's HTTPS server.
	// The Server serves HTTP/3 with a copy. Nil means development
	// certificates instead (see DevHosts).
	TLSConfig *tls.Config
	// DevHosts are the host names and IP addresses of the development
	// certificates: self-signed ECDSA P-256 ones, valid DevValidity, that
	// pages pin by their SHA-256 hash (serverCertificateHashes, from
	// CertificateHashes or InfoHandler) and that the Server rotates; nil
	// means "localhost", "127.0.0.1" and "::1". Only when TLSConfig is nil.
	DevHosts []string
	// DevValidity is how long each development certificate is valid:
	// at most 14 days (browsers refuse a longer one by hash), at least 3
	// hours; 0 means 13 days. The Server makes a new one every third of
	// it and serves it from a third later, so a hash fetched at any time
	// stays good for a third at least.
	DevValidity time.Duration

	// MaxConnections caps the QUIC connections open at once, sessions or
	// not. 0 means twice the Relay's and the Mux's MaxSessions together.
	// A connection carries one session and ends with it; one that has not
	// opened a session within SessionWait is closed. A new connection that
	// finds the cap reached closes the oldest connection still waiting for
	// its session, and is closed at once only when every connection
	// carries a session: so connections that open no session, however
	// often their client renews them, never keep out one that opens its
	// session at once (see the package documentation).
	MaxConnections int
	// SessionWait is how long a QUIC connection may stay open without a
	// session (none yet, or a request that was not one); 0 means 10 s.
	// Under pressure (half of MaxConnections waiting for their session),
	// a new connection waits a second at most.
	SessionWait time.Duration
	// MaxWaitingPerSource caps the connections without a session from one
	// IP address while half of MaxConnections wait for theirs (under
	// pressure); past it, a new one from there closes that address's
	// oldest. Without pressure an address may have more waiting, as many
	// players behind one NAT connecting at once do. 0 means 8.
	MaxWaitingPerSource int

	// Logger receives debug records of connections that fail; nil is
	// silent. The sessions log through their Handler's or Mux's.
	Logger *slog.Logger
}

// Server serves WebTransport sessions of the relay and of the transport
// over HTTP/3 (QUIC) on a UDP socket; see the package documentation.
type Server struct {
	cfg   Config
	log   *slog.Logger
	tls   *tls.Config
	dev   *devCerts // nil with Config.TLSConfig
	h3    *http3.Server
	wt    *wt.Server
	relay wsbridge.Host
	mux   wsbridge.Host
	wire  wsbridge.Host

	// Lock order: mu is a leaf.
	mu     sync.Mutex
	ln     *quic.EarlyListener
	addr   *net.UDPAddr
	closed bool
	adm    *admission     // the QUIC connections held (admit.go)
	wg     sync.WaitGroup // Serve's accept loop and its connections
	// begun is closed once Serve has its socket (addr is set), has
	// failed, or Close was called: Info waits for it, so that a page
	// asking just after the Server was started (go Serve) is not told it
	// does not serve. endBegin closes it, once.
	begun    chan struct{}
	endBegin func()
}

// connKey is the request context's key of its QUIC connection.
type connKey struct{}

// NewServer returns a Server for cfg; Serve starts it.
func NewServer(cfg *Config) (*Server, error) {
	if cfg == nil || (cfg.Relay == nil && cfg.Mux == nil && cfg.Wire == nil) {
		return nil, errors.New("netcode/bridge: a WebTransport server needs a Relay, a Mux or a Wire")
	}
	s := &Server{cfg: *cfg, log: cfg.Logger, begun: make(chan struct{})}
	s.endBegin = sync.OnceFunc(func() { close(s.begun) })
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.cfg.RelayPath == "" {
		s.cfg.RelayPath = DefaultRelayPath
	}
	if s.cfg.TransportPath == "" {
		s.cfg.TransportPath = DefaultTransportPath
	}
	if s.cfg.WirePath == "" {
		s.cfg.WirePath = wire.DefaultPath
	}
	if s.cfg.SessionWait <= 0 {
		s.cfg.SessionWait = defaultSessionWait
	}
	if cfg.TLSConfig != nil {
		s.tls = cfg.TLSConfig.Clone()
	} else {
		hosts := cfg.DevHosts
		if len(hosts) == 0 {
			hosts = []string{"localhost", "127.0.0.1", "::1"}
		}
		dev, err := newDevCerts(hosts, cfg.DevValidity)
		if err != nil {
			return nil, err
		}
		s.dev = dev
		s.tls = &tls.Config{GetCertificate: dev.getCertificate}
	}
	s.tls.MinVersion = tls.VersionTLS13
	mux := http.NewServeMux()
	caps := 0
	if cfg.Relay != nil {
		s.relay = wsbridge.HostOf(cfg.Relay)
		caps += s.relay.Gate().Max
		mux.HandleFunc(s.cfg.RelayPath, func(w http.ResponseWriter, r *http.Request) { s.serveSession(w, r, s.relay) })
	}
	if cfg.Mux != nil {
		s.mux = wsbridge.HostOf(cfg.Mux)
		caps += s.mux.Gate().Max
		mux.HandleFunc(s.cfg.TransportPath, func(w http.ResponseWriter, r *http.Request) { s.serveSession(w, r, s.mux) })
	}
	if cfg.Wire != nil {
		s.wire = wsbridge.HostOf(cfg.Wire)
		caps += s.wire.Gate().Max
		mux.HandleFunc(s.cfg.WirePath, func(w http.ResponseWriter, r *http.Request) { s.serveSession(w, r, s.wire) })
	}
	if s.cfg.MaxConnections <= 0 {
		s.cfg.MaxConnections = 2 * caps
	}
	if s.cfg.MaxWaitingPerSource <= 0 {
		s.cfg.MaxWaitingPerSource = defaultWaitingPerSource
	}
	s.adm = newAdmission(s.cfg.MaxConnections, s.cfg.MaxWaitingPerSource, s.cfg.SessionWait)
	s.h3 = &http3.Server{
		Handler:   mux,
		TLSConfig: http3.ConfigureTLSConfig(s.tls),
		ConnContext: func(ctx context.Context, c *quic.Conn) context.Context {
			return context.WithValue(ctx, connKey{}, c)
		},
	}
	// Origins are checked per path, by the host's own patterns.
	s.wt = &wt.Server{H3: s.h3, CheckOrigin: func(*http.Request) bool { return true }}
	return s, nil
}

// QUIC application error codes of connections the Server closes itself.
const (
	codeTooMany   quic.ApplicationErrorCode = 0x10d // MaxConnections of sessions, or MaxWaitingPerSource, reached
	codeNoSession quic.ApplicationErrorCode = 0x10e // no session within SessionWait, or the oldest waiting when the cap was reached
)

// defaultSessionWait is Config.SessionWait's default.
const defaultSessionWait = 10 * time.Second

// quicConfig bounds what one QUIC connection can make the Server hold: a
// client may open the streams a session needs (its CONNECT request and,
// for the relay, the token's stream; HTTP/3's control and QPACK streams)
// and little more, each with small flow-control windows (a token is 2 KiB;
// everything else travels in datagrams).
func quicConfig() *quic.Config {
	c := &quic.Config{
		EnableDatagrams:                  true,
		EnableStreamResetPartialDelivery: true,
		MaxIncomingStreams:               4,
		MaxIncomingUniStreams:            4,
		InitialStreamReceiveWindow:       8 << 10,
		MaxStreamReceiveWindow:           8 << 10,
		InitialConnectionReceiveWindow:   32 << 10,
		MaxConnectionReceiveWindow:       32 << 10,
		MaxIdleTimeout:                   30 * time.Second,
		HandshakeIdleTimeout:             5 * time.Second,
	}
	if configureQUIC != nil {
		configureQUIC(c)
	}
	return c
}

// configureQUIC, if set (by tests), changes every QUIC configuration of
// the package, the server's and the clients'.
var configureQUIC func(*quic.Config)

// Serve serves HTTP/3 on conn (a UDP socket, which the Server owns from
// now on) until Close, and then returns http.ErrServerClosed; or until the
// socket fails, with its error.
func (s *Server) Serve(conn net.PacketConn) error {
	ln, err := quic.ListenEarly(conn, s.h3.TLSConfig, quicConfig())
	if err != nil {
		s.endBegin()
		return err
	}
	s.mu.Lock()
	if s.closed || s.ln != nil {
		s.mu.Unlock()
		ln.Close()
		conn.Close()
		return http.ErrServerClosed
	}
	s.ln = ln
	s.addr, _ = conn.LocalAddr().(*net.UDPAddr)
	s.wg.Add(1)
	s.mu.Unlock()
	s.endBegin()
	defer s.wg.Done()
	defer conn.Close()
	for {
		c, err := ln.Accept(context.Background())
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return http.ErrServerClosed
			}
			return err
		}
		s.wg.Add(1)
		go s.serveConn(c)
	}
}

// ListenAndServe listens on the UDP address addr and serves it.
func (s *Server) ListenAndServe(addr string) error {
	conn, err := net.ListenPacket("udp", addr)
	if err != nil {
		return err
	}
	return s.Serve(conn)
}

// serveConn serves one QUIC connection until it ends, as admission
// (admit.go) says: at once if it is refused, after its wait if no session
// came, or when a newer connection needs its place while it waits.
func (s *Server) serveConn(c *quic.Conn) {
	defer s.wg.Done()
	st, evicted, wait := s.adm.admit(c, sourceOf(c))
	if evicted != nil {
		_ = evicted.conn.CloseWithError(codeNoSession, "netcode/bridge: no session (a newer connection took its place)")
	}
	if st == nil {
		_ = c.CloseWithError(codeTooMany, "netcode/bridge: too many connections")
		return
	}
	defer s.adm.leave(st)
	timer := time.AfterFunc(wait, func() {
		if s.adm.expire(st) {
			_ = c.CloseWithError(codeNoSession, "netcode/bridge: no session")
		}
	})
	defer timer.Stop()
	if err := s.wt.ServeQUICConn(c); err != nil && !errors.Is(err, http.ErrServerClosed) {
		s.log.Debug("netcode/bridge: WebTransport connection failed", "remote", c.RemoteAddr().String(), "err", err)
	}
}

// claimSession takes the one session of r's QUIC connection, for a
// handler of any mode served on the Server, before it upgrades r: false
// if r is not on a connection the Server admitted, or its connection had
// its session already or is closing (admission). A handler that gets
// false answers 400 and opens nothing.
func (s *Server) claimSession(r *http.Request) (*quic.Conn, bool) {
	conn, _ := r.Context().Value(connKey{}).(*quic.Conn)
	if conn == nil {
		return nil, false
	}
	return conn, s.adm.claim(conn)
}

// Addr returns the UDP address the Server serves, once Serve has begun;
// nil before.
func (s *Server) Addr() *net.UDPAddr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// Close closes every QUIC connection (their sessions end as their
// clients' connections were lost: close the Handler or Mux first for a
// clean end with 1001) and the socket, and waits for the Server's
// goroutines to exit.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	ln := s.ln
	s.mu.Unlock()
	s.endBegin()
	err := s.wt.Close()
	if ln != nil {
		ln.Close()
	}
	s.wg.Wait()
	return err
}

// serveSession admits a WebTransport session through host's gate, as the
// host admits its WebSocket ones, and starts it.
func (s *Server) serveSession(w http.ResponseWriter, r *http.Request, host wsbridge.Host) {
	if r.Method != http.MethodConnect {
		http.Error(w, "netcode/bridge: a WebTransport session (extended CONNECT) required", http.StatusBadRequest)
		return
	}
	if a, ok := host.(wsbridge.Admitter); ok {
		s.serveAdmitted(w, r, a)
		return
	}
	g := host.Gate()
	if !originAllowed(r, g.Accept.OriginPatterns) {
		http.Error(w, "netcode/bridge: origin not allowed", http.StatusForbidden)
		return
	}
	conn, ok := s.claimSession(r)
	if !ok {
		// One session a connection: it ends with the session.
		http.Error(w, "netcode/bridge: one session per connection", http.StatusBadRequest)
		return
	}
	release, err := g.Enter()
	switch err {
	case wsbridge.ErrClosed:
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	case wsbridge.ErrFull:
		defer release()
		s.refuse(w, r, g, conn)
		return
	}
	sess, err := s.wt.Upgrade(w, r)
	if err != nil {
		release()
		s.log.Debug("netcode/bridge: WebTransport upgrade failed", "remote", r.RemoteAddr, "err", err)
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	l := newLink(sess, conn)
	l.page = r.Header.Get("Origin") != ""
	if !g.Start(func() { host.Start(l, r.RemoteAddr, release) }) {
		wsbridge.CloseLink(l, websocket.StatusGoingAway, wsbridge.ErrClosed.Error())
		release()
	}
}

// refuse turns a session away for the cap: in the session's own terms
// (opened, then closed at once with 1013, try again later), or with HTTP
// 503 when many refusals are in progress; both say so by
// the header Netcode-Bridge-Refused: full.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, g *wsbridge.Gate, conn *quic.Conn) {
	upgrade, done := g.Refusal()
	defer done()
	if !upgrade {
		wsbridge.RefuseHTTP(w)
		return
	}
	w.Header().Set(wsbridge.RefusedHeader, "full")
	sess, err := s.wt.Upgrade(w, r)
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	l := newLink(sess, conn)
	l.page = r.Header.Get("Origin") != ""
	wsbridge.CloseLink(l, wsbridge.CodeFull, wsbridge.ErrFull.Error())
}

// originAllowed reports whether the page of r's Origin may open a session:
// no Origin (not a browser), the same host name as the request's (a page
// of the bridge's own HTTPS server, whatever its port), or a host that
// matches one of patterns (as for the WebSocket sessions: path.Match, no
// case).
func originAllowed(r *http.Request, patterns []string) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	if strings.EqualFold(u.Hostname(), hostname(r.Host)) {
		return true
	}
	for _, p := range patterns {
		if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(u.Host)); ok {
			return true
		}
	}
	return false
}

func hostname(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.Trim(hostport, "[]")
}

// CertificateHashes returns the SHA-256 hashes of the development
// certificates a page should pin (serverCertificateHashes): the one served
// and the next one. It returns nil with a production Config.TLSConfig.
func (s *Server) CertificateHashes() ([][32]byte, error) {
	if s.dev == nil {
		return nil, nil
	}
	return s.dev.hashes()
}

// Info is what InfoHandler serves, as JSON: where a page opens its
// sessions, and the certificates it pins in development.
type Info struct {
	// Relay and Transport are the https:// URLs of the sessions, on the
	// host the page asked for (its own) and the Server's UDP port; empty
	// when the Server has no Relay or Mux.
	Relay     string `json:"relay,omitempty"`
	Transport string `json:"transport,omitempty"`
	// Wire is the https:// URL prefix of wire sessions: a page appends
	// the target port. Empty when the Server has no Wire.
	Wire string `json:"wire,omitempty"`
	// ServerCertificateHashes is the option of the WebTransport
	// constructor, with each value in base64: empty with a production
	// certificate.
	ServerCertificateHashes []CertificateHash `json:"serverCertificateHashes,omitempty"`
}

// CertificateHash is one of Info's serverCertificateHashes.
type CertificateHash struct {
	Algorithm string `json:"algorithm"` // "sha-256"
	Value     string `json:"value"`     // the hash, in standard base64
}

// Info returns the Info for a page served to r: the URLs name r's host.
// Until Serve has begun (a program starts it in a goroutine beside its
// HTTPS server, so a page may ask first), Info waits for it, as a
// connection to a bound socket waits to be accepted, or until r's context
// ends. It fails if Close was called, or Serve failed, before Serve began.
func (s *Server) Info(r *http.Request) (Info, error) {
	var info Info
	select {
	case <-s.begun:
	case <-r.Context().Done():
	}
	addr := s.Addr()
	if addr == nil {
		return info, errors.New("netcode/bridge: the WebTransport server is not serving")
	}
	host := net.JoinHostPort(hostname(r.Host), strconv.Itoa(addr.Port))
	if s.relay != nil {
		info.Relay = "https://" + host + s.cfg.RelayPath
	}
	if s.mux != nil {
		info.Transport = "https://" + host + s.cfg.TransportPath
	}
	if s.wire != nil {
		info.Wire = "https://" + host + s.cfg.WirePath
	}
	hashes, err := s.CertificateHashes()
	if err != nil {
		return info, err
	}
	for _, h := range hashes {
		info.ServerCertificateHashes = append(info.ServerCertificateHashes,
			CertificateHash{Algorithm: "sha-256", Value: base64.StdEncoding.EncodeToString(h[:])})
	}
	return info, nil
}

// InfoHandler serves a page's Info as JSON (Cache-Control: no-store, for
// the hashes rotate), to mount on the site's HTTPS server beside the
// page, for example at "/webtransport".
func (s *Server) InfoHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, err := s.Info(r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(info)
	})
}
