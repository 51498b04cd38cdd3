package bridge

import (
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/gonetcode/netcode/bridge/internal/wsbridge"

	"github.com/coder/websocket"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/internal/timerwheel"
)

// Subprotocol is the WebSocket subprotocol of the relay. A request that does
// not offer it is refused with HTTP 400 before the upgrade.
const Subprotocol = "netcode.relay.v1"

// Config configures a Handler. The zero value refuses every token: name the
// servers the bridge may dial in AllowedServers or AllowServer.
type Config struct {
	// AllowedServers lists the server addresses the bridge may dial. Every
	// address in a token must be allowed (by this list or by AllowServer),
	// or the session is refused with close code 4010 before anything is
	// sent to any server. IPv4-mapped IPv6 addresses match their IPv4 form.
	AllowedServers []netip.AddrPort
	// AllowServer, if set, is asked about the token addresses that are not
	// in AllowedServers (for example to allow a prefix or a port range). It
	// must be safe for concurrent use.
	AllowServer func(netip.AddrPort) bool
	// MaxSessions caps the sessions open at once, from the upgrade until
	// the end; 0 means 1024. Past it, the bridge accepts the
	// WebSocket and closes it at once with 1013 (try again later), or, when
	// many refusals are already in progress, answers HTTP 503.
	MaxSessions int
	// HandshakeTimeout is how long the browser has to send its connect
	// token after the upgrade, and then how long the token's servers have
	// to answer the connection request (the dial fails with
	// close code 4004 past it). A server answers only a
	// token it can open: a forged token costs this long of connection
	// requests (10 a second, about 1 KB each), whatever timeout its public
	// part claims. 0 means 5 s.
	HandshakeTimeout time.Duration
	// DialTimeout bounds the netcode handshake with the servers, on top of
	// the protocol's own timeouts; 0 means 30 s.
	DialTimeout time.Duration
	// IdleTimeout ends a connected session when nothing has been relayed in
	// either direction for this long: no message from the browser and no
	// payload from the server to the browser. The netcode connection itself
	// is kept alive by the bridge (its keep-alives are not relayed), so
	// this is what notices a session where neither side says anything; a
	// browser that only receives stays connected, and one that stops
	// reading is noticed by WriteTimeout. 0 means DefaultIdleTimeout (30 s),
	// negative disables it.
	IdleTimeout time.Duration
	// WriteTimeout ends a session whose browser does not take a message
	// within this long (a stalled TCP connection); 0 means
	// 10 s, negative disables it.
	WriteTimeout time.Duration
	// Dialer dials the servers; nil means a netcode.Dialer whose
	// SocketBuffer is Config.SocketBuffer (a UDP socket per session). The
	// Handler dials with a copy, whose RequestTimeout, if 0, is
	// HandshakeTimeout.
	Dialer *netcode.Dialer
	// SocketBuffer is the receive and send buffer size in bytes that each
	// session's UDP socket asks for, when Dialer is nil (a Dialer given
	// has its own SocketBuffer); 0 means 256 KiB. With
	// thousands of sessions, the netcode default of 4 MiB each would let
	// the kernel hold gigabytes.
	SocketBuffer int
	// OriginPatterns lists the origins, besides the request's own host,
	// whose pages may open sessions, as in websocket.AcceptOptions (host
	// patterns matched with path.Match, for example "game.example.com" or
	// "*.example.com"). Cross-origin requests are refused by default.
	OriginPatterns []string
	// Logger receives a debug record for every session's start and end;
	// nil is silent.
	Logger *slog.Logger
}

// Handler is the relay: an http.Handler that serves WebSocket sessions (see
// the package documentation). Make one with NewHandler; Close ends every
// session.
type Handler struct {
	hostHook // what package bridge/webtransport starts its sessions through

	cfg     Config
	allowed map[netip.AddrPort]struct{}
	dialer  *netcode.Dialer
	log     *slog.Logger
	gate    wsbridge.Gate // admission, shared with the transport's Mux
	period  time.Duration // how often a session's watchdog checks
	// wheel runs the keep-alive and timeout timers of every session's
	// netcode Conn, instead of a runtime timer each: one wake-up a tick
	// for all of them, and a keep-alive that a payload sent within the
	// tick makes unnecessary is not sent.
	wheel *timerwheel.Wheel

	// Lock order: the gate's lock, then mu, then a session's.
	mu       sync.Mutex
	sessions map[*session]struct{}
}

// NewHandler returns a relay with the given configuration; nil is the
// zero Config, which refuses every token.
func NewHandler(config *Config) *Handler {
	var cfg Config
	if config != nil {
		cfg = *config
	}
	wsbridge.SetDefaults(&cfg.MaxSessions, &cfg.IdleTimeout, &cfg.WriteTimeout)
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = defaultHandshakeTimeout
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = defaultDialTimeout
	}
	h := &Handler{
		cfg:      cfg,
		allowed:  make(map[netip.AddrPort]struct{}, len(cfg.AllowedServers)),
		dialer:   cfg.Dialer,
		log:      cfg.Logger,
		sessions: make(map[*session]struct{}),
		wheel:    timerwheel.New(0),
	}
	for _, a := range cfg.AllowedServers {
		h.allowed[canon(a)] = struct{}{}
	}
	if h.dialer == nil {
		sb := cfg.SocketBuffer
		if sb <= 0 {
			sb = wsbridge.DefaultSocketBuffer
		}
		h.dialer = &netcode.Dialer{Socket: netcode.SocketConfig{Buffer: sb}}
	} else {
		d := *h.dialer // the caller's stays as it is
		h.dialer = &d
	}
	if h.dialer.RequestTimeout == 0 {
		// A forged token makes the dial send requests that no server
		// answers: for this long, not for the whole DialTimeout.
		h.dialer.RequestTimeout = cfg.HandshakeTimeout
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.hostHook = hostHook{H: (*relayHost)(h)}
	h.gate.Init("relay", Subprotocol, cfg.MaxSessions, cfg.OriginPatterns, h.log)
	h.period = wsbridge.WatchPeriod(time.Second, cfg.HandshakeTimeout, cfg.DialTimeout, cfg.IdleTimeout, cfg.WriteTimeout)
	return h
}

func canon(a netip.AddrPort) netip.AddrPort {
	return netip.AddrPortFrom(a.Addr().Unmap().WithZone(""), a.Port())
}

// allows reports whether the bridge may dial a.
func (h *Handler) allows(a netip.AddrPort) bool {
	if _, ok := h.allowed[canon(a)]; ok {
		return true
	}
	return h.cfg.AllowServer != nil && h.cfg.AllowServer(a)
}

// Sessions returns the number of sessions open now.
func (h *Handler) Sessions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.sessions)
}

// Close ends every session (with 1001, going away, and a clean netcode
// disconnect), refuses new ones with HTTP 503, and waits until every
// session's goroutines have exited. It returns within about a second
// whatever the browsers do: a session's close handshake (and a refusal's)
// has a second, after which its TCP connection is cut. It does not close
// the http.Server.
func (h *Handler) Close() error {
	h.gate.Close()
	h.mu.Lock()
	ss := make([]*session, 0, len(h.sessions))
	for s := range h.sessions {
		ss = append(ss, s)
	}
	h.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.end(websocket.StatusGoingAway, "netcode/bridge: shutting down")
		}()
	}
	wg.Wait()
	h.gate.Wait()
	h.wheel.Close() // every session's Conn is closed: its timer stopped
	return nil
}

// ServeHTTP upgrades the request to a WebSocket and relays it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.gate.Admit(w, r, func(ws *websocket.Conn, bc *wsbridge.BatchConn, release func()) {
		h.start(wsbridge.WSLink{WS: ws, BC: bc}, r.RemoteAddr, release)
	})
}

// hostHook is the hook a Handler embeds under an unexported name, so that
// it exports no method of internal types.
type hostHook = wsbridge.Hosted

// relayHost is a Handler as a wsbridge.Host: package bridge/webtransport
// starts its sessions through it.
type relayHost Handler

func (h *relayHost) Gate() *wsbridge.Gate { return &h.gate }

func (h *relayHost) Start(l wsbridge.Link, remote string, release func()) {
	(*Handler)(h).start(l.(wsbridge.RelayLink), remote, release)
}

// start starts a session over l under the gate's lock; release frees its
// slot once it has ended.
func (h *Handler) start(l wsbridge.RelayLink, remote string, release func()) {
	s := newSession(h)
	h.mu.Lock()
	h.sessions[s] = struct{}{}
	h.mu.Unlock()
	// The session goes on in a goroutine of its own (Close waits for
	// it), and net/http's for the connection ends, with what it holds.
	go func() {
		defer func() {
			h.mu.Lock()
			delete(h.sessions, s)
			h.mu.Unlock()
			release()
		}()
		s.serve(l, remote)
	}()
}

// ErrBridgeFull is why a session was refused: the bridge (a Handler or a
// transport.Mux) has its MaxSessions open. A relay's browser sees it as
// close code 1013 (try again later) with this error as the reason; a
// transport client gets it, for errors.Is, from transport.Dial and so from
// a netcode.Dialer using transport.ListenPacket, at once rather than as a
// handshake timeout.
var ErrBridgeFull = wsbridge.ErrFull

// ErrDatagramTooLarge is the error, for errors.Is, of a message larger
// than a WebTransport session can carry in one datagram now (package
// bridge/webtransport; the limit depends on the path's MTU). A relay
// session whose server sends such a payload ends with 1009 and a reason
// naming both sizes; a transport.Mux's WriteTo fails with it; the Go
// clients' writes too.
var ErrDatagramTooLarge = wsbridge.ErrTooBig
