// Package bridge lets browsers reach netcode servers over WebSocket.
//
// A [Handler] is an http.Handler that relays: the browser opens a WebSocket
// with the subprotocol [Subprotocol] and sends its 2048-byte connect token as
// the first (binary) message. The bridge checks every server address in the
// token against its allow-list, dials the token's servers as an ordinary
// netcode client, and tells the browser it is connected with a text message
//
//	{"type":"connected","clientIndex":3,"maxClients":64}
//
// From then on every binary WebSocket message is one netcode payload (1 to
// netcode.MaxPayloadBytes bytes), in both directions. When either side ends,
// the other is ended too: a browser that goes away makes the bridge
// disconnect from the server cleanly (the server frees the slot at once),
// and a server that disconnects, times out or denies the connection makes
// the bridge close the WebSocket with one of the Code constants below and a
// reason naming the netcode error.
//
// The bridge works in front of any netcode 1.02 server. It is not an open
// relay: it dials only the servers its Config allows (none by default),
// caps the number of sessions, checks the size of every message and ends
// idle sessions.
//
// The browser side is the ES module in js/netcode.js, served by
// [JSHandler].
//
// # Close codes
//
// The code and reason of the close frame say why a session ended. Codes
// 4000 to 4012 are the bridge's own (the Code constants); the others are
// WebSocket's. R: the relay (Handler); T: the transport (Mux).
//
//	code  name                           mode why
//	1000  normal closure                 R T  the browser (client) closed the session
//	1001  going away                     R T  the bridge is shutting down (Close), the server's side of the relay ended, writing to the browser failed or stalled (WriteTimeout)
//	1003  unsupported data               R T  a text message
//	1008  policy violation               R    an empty message
//	1009  message too big                R T  a message over 1200 bytes (R), 1300 (T)
//	1011  internal error                 R    an unexpected error of the server's side
//	1013  try again later                R T  MaxSessions reached (CodeBridgeFull, ErrBridgeFull, RefusedHeader; T: see TransportSubprotocol)
//	4000  disconnected                   R    the server disconnected the client
//	4001  connection denied              R    every server in the token was full or refused it
//	4002  connect token expired          R    the token expired before a server accepted it
//	4003  invalid connect token          R    the first message was not a readable 2048-byte token
//	4004  connection request timed out   R    no server answered the connection request
//	4005  connection response timed out  R    the server stopped answering during the handshake
//	4006  connection timed out           R    nothing arrived from the server within the token's timeout
//	4010  server not allowed             R    the token names a server the bridge may not dial
//	4011  handshake timeout              R    no token within HandshakeTimeout, or the dial took longer than DialTimeout
//	4012  idle timeout                   R T  nothing went either way within IdleTimeout
//
// In transport mode the netcode errors travel inside the encrypted
// session, so the Mux's codes are only about the WebSocket itself.
//
// # Transport mode
//
// The relay sees payloads in the clear. In transport mode the netcode
// packets themselves travel in WebSocket binary messages (subprotocol
// [TransportSubprotocol]), so the session is encrypted end to end between a
// Go client (built for js/wasm in the browser) and the server: a [Mux] is a
// net.PacketConn that merges a UDP socket with WebSocket peers, to be passed
// to netcode.NewListener so that one server serves both kinds of client, and
// [DialTransport] / [TransportListenPacket] give the client its side, for
// netcode.Dialer.ListenPacket. See examples/wasm.
//
// # What a session costs
//
// Once upgraded, a session runs in goroutines of the bridge's own, not in
// net/http's: a relay session has two (one reads the browser and writes to
// the server, one reads the server and writes to the browser) besides its
// dialed netcode client's, whose UDP socket asks for Config.SocketBuffer;
// a Mux session has two (its reader and its writer). A session's timeouts
// run from a timer, without a goroutine. A Mux session writes what is
// queued for it in one write to the connection, and has its fair share of
// the read queue. Refusals for MaxSessions are named: [ErrBridgeFull],
// [CodeBridgeFull], [RefusedHeader].
//
// Whatever a client sends or withholds, its session ends within a bound
// and frees its slot: closing a WebSocket (a relay session's or a
// refusal's, 1 s; a Mux session's, 2 s, what is queued for it included)
// has a deadline on the TCP connection, which is cut when it passes, even
// if the client declared a frame longer than it sent. So Handler.Close
// and Mux.Close return within about those bounds.
package bridge

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/token"
)

// Subprotocol is the WebSocket subprotocol of the relay. A request that does
// not offer it is refused with HTTP 400 before the upgrade.
const Subprotocol = "netcode.relay.v1"

// Close codes the bridge ends a session with: its own, 4000 to 4012, and
// the standard ones it uses, listed with them in the package documentation
// (# Close codes). The reason of the close frame names the error, for
// example "netcode: connection denied".
const (
	// CodeDisconnected: the server disconnected the client cleanly.
	CodeDisconnected websocket.StatusCode = 4000
	// CodeConnectionDenied: every server in the token was full or refused
	// the client (netcode.ErrConnectionDenied).
	CodeConnectionDenied websocket.StatusCode = 4001
	// CodeConnectTokenExpired: the token expired before a server accepted it
	// (netcode.ErrConnectTokenExpired).
	CodeConnectTokenExpired websocket.StatusCode = 4002
	// CodeInvalidConnectToken: the first message was not a readable
	// 2048-byte connect token (netcode.ErrInvalidConnectToken).
	CodeInvalidConnectToken websocket.StatusCode = 4003
	// CodeConnectionRequestTimedOut: no server answered the connection
	// request (netcode.ErrConnectionRequestTimedOut).
	CodeConnectionRequestTimedOut websocket.StatusCode = 4004
	// CodeConnectionResponseTimedOut: the server stopped answering during
	// the handshake (netcode.ErrConnectionResponseTimedOut).
	CodeConnectionResponseTimedOut websocket.StatusCode = 4005
	// CodeConnectionTimedOut: nothing arrived from the server within the
	// token's timeout (netcode.ErrConnectionTimedOut).
	CodeConnectionTimedOut websocket.StatusCode = 4006
	// CodeServerNotAllowed: the token names a server the bridge may not
	// dial; the reason names the address.
	CodeServerNotAllowed websocket.StatusCode = 4010
	// CodeHandshakeTimeout: the connect token did not arrive within
	// Config.HandshakeTimeout, or the dial took longer than
	// Config.DialTimeout.
	CodeHandshakeTimeout websocket.StatusCode = 4011
	// CodeIdleTimeout: nothing was relayed in either direction (no message
	// from the browser, no payload to it) within Config.IdleTimeout, or
	// (Mux) no message went either way within MuxConfig.IdleTimeout.
	CodeIdleTimeout websocket.StatusCode = 4012
	// CodeBridgeFull is WebSocket's 1013 (try again later): the bridge has
	// its MaxSessions open (ErrBridgeFull, the reason). The session is
	// refused right after the upgrade; see also RefusedHeader.
	CodeBridgeFull = websocket.StatusTryAgainLater
)

// Defaults for the zero fields of Config.
const (
	DefaultMaxSessions      = 1024
	DefaultHandshakeTimeout = 5 * time.Second
	DefaultDialTimeout      = 30 * time.Second
	DefaultIdleTimeout      = 30 * time.Second
	DefaultWriteTimeout     = 10 * time.Second
	// DefaultSocketBuffer is the default of Config.SocketBuffer: a
	// relayed session carries one browser's traffic, far from what the
	// 4 MiB of a dialed netcode client's socket are for.
	DefaultSocketBuffer = 256 << 10
)

// maxRefusing bounds the sessions being refused with 1013 at once; past it,
// refusals are plain HTTP 503 responses, which cost no upgrade.
const maxRefusing = 64

// Config configures a Handler. The zero value refuses every token: name the
// servers the bridge may dial in AllowedServers or AllowServer.
type Config struct {
	// AllowedServers lists the server addresses the bridge may dial. Every
	// address in a token must be allowed (by this list or by AllowServer),
	// or the session is refused with CodeServerNotAllowed before anything is
	// sent to any server. IPv4-mapped IPv6 addresses match their IPv4 form.
	AllowedServers []netip.AddrPort
	// AllowServer, if set, is asked about the token addresses that are not
	// in AllowedServers (for example to allow a prefix or a port range). It
	// must be safe for concurrent use.
	AllowServer func(netip.AddrPort) bool
	// MaxSessions caps the sessions open at once, from the upgrade until
	// the end; 0 means DefaultMaxSessions. Past it, the bridge accepts the
	// WebSocket and closes it at once with 1013 (try again later), or, when
	// many refusals are already in progress, answers HTTP 503.
	MaxSessions int
	// HandshakeTimeout is how long the browser has to send its connect
	// token after the upgrade, and then how long the token's servers have
	// to answer the connection request (the dial fails with
	// CodeConnectionRequestTimedOut past it). A server answers only a
	// token it can open: a forged token costs this long of connection
	// requests (10 a second, about 1 KB each), whatever timeout its public
	// part claims. 0 means DefaultHandshakeTimeout.
	HandshakeTimeout time.Duration
	// DialTimeout bounds the netcode handshake with the servers, on top of
	// the protocol's own timeouts; 0 means DefaultDialTimeout.
	DialTimeout time.Duration
	// IdleTimeout ends a connected session when nothing has been relayed in
	// either direction for this long: no message from the browser and no
	// payload from the server to the browser. The netcode connection itself
	// is kept alive by the bridge (its keep-alives are not relayed), so
	// this is what notices a session where neither side says anything; a
	// browser that only receives stays connected, and one that stops
	// reading is noticed by WriteTimeout. 0 means DefaultIdleTimeout,
	// negative disables it.
	IdleTimeout time.Duration
	// WriteTimeout ends a session whose browser does not take a message
	// within this long (a stalled TCP connection); 0 means
	// DefaultWriteTimeout, negative disables it.
	WriteTimeout time.Duration
	// Dialer dials the servers; nil means a netcode.Dialer whose
	// SocketBuffer is Config.SocketBuffer (a UDP socket per session). The
	// Handler dials with a copy, whose RequestTimeout, if 0, is
	// HandshakeTimeout.
	Dialer *netcode.Dialer
	// SocketBuffer is the receive and send buffer size in bytes that each
	// session's UDP socket asks for, when Dialer is nil (a Dialer given
	// has its own SocketBuffer); 0 means DefaultSocketBuffer. With
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
	cfg     Config
	allowed map[netip.AddrPort]struct{}
	dialer  *netcode.Dialer
	log     *slog.Logger
	accept  websocket.AcceptOptions
	period  time.Duration // how often a session's watchdog checks

	mu       sync.Mutex
	sessions map[*session]struct{}
	closed   bool
	wg       sync.WaitGroup // every ServeHTTP in progress
	refusing atomic.Int64
}

// NewHandler returns a relay with the given configuration.
func NewHandler(cfg Config) *Handler {
	if cfg.MaxSessions <= 0 {
		cfg.MaxSessions = DefaultMaxSessions
	}
	if cfg.HandshakeTimeout <= 0 {
		cfg.HandshakeTimeout = DefaultHandshakeTimeout
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	h := &Handler{
		cfg:      cfg,
		allowed:  make(map[netip.AddrPort]struct{}, len(cfg.AllowedServers)),
		dialer:   cfg.Dialer,
		log:      cfg.Logger,
		sessions: make(map[*session]struct{}),
		accept: websocket.AcceptOptions{
			Subprotocols:    []string{Subprotocol},
			OriginPatterns:  cfg.OriginPatterns,
			CompressionMode: websocket.CompressionDisabled,
		},
	}
	for _, a := range cfg.AllowedServers {
		h.allowed[canon(a)] = struct{}{}
	}
	if h.dialer == nil {
		sb := cfg.SocketBuffer
		if sb <= 0 {
			sb = DefaultSocketBuffer
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
	h.period = watchPeriod(time.Second, cfg.HandshakeTimeout, cfg.DialTimeout, cfg.IdleTimeout, cfg.WriteTimeout)
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
	h.mu.Lock()
	h.closed = true
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
			s.end(websocket.StatusGoingAway, "netcode bridge: shutting down")
		}()
	}
	wg.Wait()
	h.wg.Wait()
	return nil
}

// ServeHTTP upgrades the request to a WebSocket and relays it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !offers(r, Subprotocol) {
		http.Error(w, "netcode bridge: WebSocket subprotocol "+Subprotocol+" required", http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		http.Error(w, "netcode bridge: shutting down", http.StatusServiceUnavailable)
		return
	}
	h.wg.Add(1)
	if len(h.sessions) >= h.cfg.MaxSessions {
		h.mu.Unlock()
		defer h.wg.Done()
		h.refuse(w, r)
		return
	}
	s := newSession(h)
	h.sessions[s] = struct{}{}
	h.mu.Unlock()
	forget := func() {
		h.mu.Lock()
		delete(h.sessions, s)
		h.mu.Unlock()
		h.wg.Done()
	}

	clearDeadlines(w)
	ws, bc, err := accept(w, r, &h.accept)
	if err != nil {
		// Accept has answered the request.
		s.end(websocket.StatusInternalError, "")
		forget()
		return
	}
	// The session goes on in a goroutine of its own (Close waits for it),
	// and net/http's for the connection ends, with what it holds.
	remote := r.RemoteAddr
	go func() {
		defer forget()
		s.serve(ws, bc, remote)
	}()
}

// clearDeadlines lifts the read and write deadlines an http.Server with
// ReadTimeout or WriteTimeout has set on the connection: they would stay on
// the hijacked connection and cut every session short. The session's own
// timeouts apply instead.
func clearDeadlines(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
}

// refuse turns a request away because of the session cap.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request) {
	refuseOverCap(w, r, &h.refusing, &h.accept, h.log, "netcode bridge: session refused, too many")
}

// ErrBridgeFull is why a session was refused: the bridge (a Handler or a
// Mux) has its MaxSessions open. A relay's browser sees it as close code
// 1013 (try again later) with this error as the reason; a transport client
// gets it, for errors.Is, from DialTransport and so from a netcode.Dialer
// using TransportListenPacket, at once rather than as a handshake timeout.
var ErrBridgeFull = errors.New("netcode bridge: too many sessions")

// RefusedHeader is the HTTP response header by which a session refused
// for the cap says so before any WebSocket message, on the 101 response
// (then closed with 1013) as on the 503 one: its value is "full". Clients
// that can read response headers (Go's, not a browser's) tell the refusal
// apart at once; DialTransport does.
const RefusedHeader = "Netcode-Bridge-Refused"

// refuseOverCap turns a request away because of a session cap: with a
// WebSocket closed at once with 1013 (try again later), which browsers can
// tell apart from a network failure, or, when refusing counts more than
// maxRefusing of those in progress, with a plain HTTP 503 that costs less.
// Both responses carry RefusedHeader.
func refuseOverCap(w http.ResponseWriter, r *http.Request, refusing *atomic.Int64, opts *websocket.AcceptOptions, log *slog.Logger, msg string) {
	w.Header().Set(RefusedHeader, "full")
	if refusing.Add(1) > maxRefusing {
		refusing.Add(-1)
		w.Header().Set("Retry-After", "1")
		http.Error(w, ErrBridgeFull.Error(), http.StatusServiceUnavailable)
		return
	}
	defer refusing.Add(-1)
	clearDeadlines(w)
	ws, bc, err := accept(w, r, opts)
	if err != nil {
		return
	}
	log.Debug(msg, "remote", r.RemoteAddr)
	// Bounded like any close: a client that pipelined a long frame
	// after its request, or does not answer, is cut at closeTimeout.
	closeWS(ws, bc, CodeBridgeFull, ErrBridgeFull.Error())
}

// Session phases, for the watchdog.
const (
	phaseToken int32 = iota
	phaseDial
	phaseConnected
)

// session is one browser's relay.
type session struct {
	h    *Handler
	wd   *watchdog
	ctx  context.Context // cancelled when the session ends; bounds the dial
	stop context.CancelFunc

	mu     sync.Mutex
	ws     *websocket.Conn
	bc     *batchConn // under ws; set with it
	conn   *netcode.Conn
	ended  bool
	code   websocket.StatusCode
	reason string

	endOnce sync.Once
	done    chan struct{} // closed when the session ends
	ready   chan struct{} // closed once conn is set
	wg      sync.WaitGroup

	phase    atomic.Int32
	deadline atomic.Int64 // phaseToken, phaseDial: wd.now() when it ends
	endedAt  atomic.Int64 // wd.now() + 1 when the end began; 0 before

	in  [netcode.MaxPayloadBytes + 1]byte // browser → server
	out [netcode.MaxPayloadBytes]byte     // server → browser
}

// tokenBuf holds a connect token as read, with one byte more to tell a
// longer message. Sessions borrow one from tokenBufs only until the dial
// has parsed it, so that connected sessions do not carry one each.
type tokenBuf [token.ConnectTokenBytes + 1]byte

var tokenBufs = sync.Pool{New: func() any { return new(tokenBuf) }}

func newSession(h *Handler) *session {
	s := &session{
		h:     h,
		wd:    newWatchdog(h.period, h.cfg.IdleTimeout, h.cfg.WriteTimeout),
		done:  make(chan struct{}),
		ready: make(chan struct{}),
	}
	s.ctx, s.stop = context.WithCancel(context.Background())
	return s
}

// end ends the session once: it records why, stops a dial in progress,
// disconnects from the server and closes the WebSocket with code and
// reason, within closeTimeout (see closeWS). Later calls wait for the
// first to finish and do nothing.
func (s *session) end(code websocket.StatusCode, reason string) {
	s.endOnce.Do(func() {
		s.endedAt.CompareAndSwap(0, s.wd.now()+1)
		s.mu.Lock()
		s.ended = true
		s.code, s.reason = code, reason
		ws, bc, conn := s.ws, s.bc, s.conn
		s.mu.Unlock()
		close(s.done)
		s.stop()
		if conn != nil {
			conn.Close()
		}
		if ws != nil {
			closeWS(ws, bc, code, reason)
		}
	})
}

// endLater ends the session from the watchdog: in a goroutine of the
// session's (serve waits for it), so that the watchdog goes on checking
// during the close and cuts the connection if it takes longer than
// closeTimeout.
func (s *session) endLater(now int64, code websocket.StatusCode, reason string) {
	if !s.endedAt.CompareAndSwap(0, now+1) {
		return // ending already
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.end(code, reason)
	}()
}

// setWS records the WebSocket and its connection; it reports false if the
// session already ended, and then closes ws itself.
func (s *session) setWS(ws *websocket.Conn, bc *batchConn) bool {
	s.mu.Lock()
	if s.ended {
		code, reason := s.code, s.reason
		s.mu.Unlock()
		closeWS(ws, bc, code, reason)
		return false
	}
	s.ws, s.bc = ws, bc
	s.mu.Unlock()
	return true
}

// setConn records the netcode connection; it reports false if the session
// already ended, and then closes conn itself.
func (s *session) setConn(c *netcode.Conn) bool {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		c.Close()
		return false
	}
	s.conn = c
	s.mu.Unlock()
	return true
}

func (s *session) serve(ws *websocket.Conn, bc *batchConn, remote string) {
	if !s.setWS(ws, bc) {
		return
	}
	h := s.h
	h.log.Debug("netcode bridge: session start", "remote", remote)
	s.deadline.Store(s.wd.now() + int64(h.cfg.HandshakeTimeout))
	s.wd.run(s.watch)
	defer func() {
		// The first end wins; this one only waits for it to finish. The
		// watchdog runs until then: it bounds the close too.
		s.end(websocket.StatusNormalClosure, "")
		s.wd.stop()
		s.wg.Wait()
		s.mu.Lock()
		code, reason := s.code, s.reason
		s.mu.Unlock()
		h.log.Debug("netcode bridge: session end", "remote", remote,
			"code", int(code), "reason", reason, "duration", time.Since(s.wd.start))
	}()

	// The connect token: one binary message of exactly 2048 bytes.
	ws.SetReadLimit(token.ConnectTokenBytes)
	tb := tokenBufs.Get().(*tokenBuf)
	defer func() {
		if tb != nil {
			tokenBufs.Put(tb)
		}
	}()
	typ, n, err := readMessage(ws, tb[:])
	if err != nil {
		s.end(readEnd(err))
		return
	}
	if typ != websocket.MessageBinary || n != token.ConnectTokenBytes {
		s.end(CodeInvalidConnectToken, "netcode: invalid connect token: the first message must be the 2048-byte binary token")
		return
	}
	tokenBytes := tb[:n]
	tok, err := token.Parse(tokenBytes)
	if err != nil || len(tok.ServerAddrs) == 0 {
		s.end(CodeInvalidConnectToken, netcode.ErrInvalidConnectToken.Error())
		return
	}
	for _, a := range tok.ServerAddrs {
		if !h.allows(a) {
			s.end(CodeServerNotAllowed, "netcode bridge: server "+a.String()+" not allowed")
			return
		}
	}

	// From here the browser is read in its own goroutine, so that a browser
	// that leaves during the dial cancels it.
	ws.SetReadLimit(netcode.MaxPayloadBytes + 1)
	s.wg.Add(1)
	go s.readLoop()

	s.deadline.Store(s.wd.now() + int64(h.cfg.DialTimeout))
	s.phase.Store(phaseDial)
	conn, err := h.dialer.DialContext(s.ctx, tokenBytes)
	tokenBufs.Put(tb) // parsed: the dial keeps no reference to it
	tb = nil
	if err != nil {
		code, reason := closeFor(err)
		s.end(code, reason)
		return
	}
	if !s.setConn(conn) {
		return
	}
	s.wd.active()
	s.phase.Store(phaseConnected)
	close(s.ready)

	msg := make([]byte, 0, 64)
	msg = append(msg, `{"type":"connected","clientIndex":`...)
	msg = strconv.AppendInt(msg, int64(conn.ClientIndex()), 10)
	msg = append(msg, `,"maxClients":`...)
	msg = strconv.AppendInt(msg, int64(conn.MaxClients()), 10)
	msg = append(msg, '}')
	if !s.write(websocket.MessageText, msg) {
		return
	}

	// Server → browser, one message per payload.
	for {
		n, err := conn.Read(s.out[:])
		if err != nil {
			code, reason := closeFor(err)
			s.end(code, reason)
			return
		}
		if !s.write(websocket.MessageBinary, s.out[:n]) {
			return
		}
	}
}

// write sends one message to the browser; it reports false (having ended
// the session) if that failed. A message written counts as activity for the
// idle timeout.
func (s *session) write(typ websocket.MessageType, p []byte) bool {
	if err := s.wd.writeMessage(s.ws, typ, p); err != nil {
		s.end(websocket.StatusGoingAway, "netcode bridge: write to browser failed")
		return false
	}
	return true
}

// readLoop relays the browser's messages to the server, once connected.
func (s *session) readLoop() {
	defer s.wg.Done()
	limit := netcode.MaxPayloadBytes
	for {
		typ, n, err := readMessage(s.ws, s.in[:])
		if err != nil {
			s.end(readEnd(err))
			return
		}
		s.wd.active()
		switch {
		case typ != websocket.MessageBinary:
			s.end(websocket.StatusUnsupportedData, "netcode bridge: only binary messages are relayed")
			return
		case n == 0:
			s.end(websocket.StatusPolicyViolation, "netcode bridge: empty message")
			return
		case n > limit:
			s.end(websocket.StatusMessageTooBig, "netcode bridge: message larger than 1200 bytes")
			return
		}
		select {
		case <-s.ready:
		case <-s.done:
			return
		}
		if _, err := s.conn.Write(s.in[:n]); err != nil {
			code, reason := closeFor(err)
			s.end(code, reason)
			return
		}
	}
}

// watch applies the handshake, dial, idle and write timeouts, and cuts
// the connection of a session whose end has taken closeTimeout (the
// connection's deadline should have done it already). It runs every
// period from the session's watchdog until serve stops it, once the
// session has ended.
func (s *session) watch(now int64) bool {
	if e := s.endedAt.Load(); e != 0 {
		if now-(e-1) >= int64(closeTimeout) {
			s.bc.cut()
		}
		return true
	}
	switch s.phase.Load() {
	case phaseToken:
		if now >= s.deadline.Load() {
			s.endLater(now, CodeHandshakeTimeout, "netcode bridge: no connect token within the handshake timeout")
			return true
		}
	case phaseDial:
		if now >= s.deadline.Load() {
			s.endLater(now, CodeHandshakeTimeout, "netcode bridge: dial timed out")
			return true
		}
	case phaseConnected:
		if s.wd.idleFor(now) {
			s.endLater(now, CodeIdleTimeout, "netcode bridge: idle timeout")
			return true
		}
	}
	if s.wd.stalled(now) {
		// The browser does not read: no close handshake is possible.
		s.bc.cut()
		s.endLater(now, websocket.StatusGoingAway, "netcode bridge: write timeout")
	}
	return true
}

// closeFor maps an error of the netcode connection to a close code and
// reason.
func closeFor(err error) (websocket.StatusCode, string) {
	for _, m := range errorCodes {
		if errors.Is(err, m.err) {
			return m.code, m.err.Error()
		}
	}
	switch {
	case errors.Is(err, io.EOF):
		return CodeDisconnected, "netcode: disconnected by the server"
	case errors.Is(err, net.ErrClosed), errors.Is(err, context.Canceled):
		return websocket.StatusGoingAway, "netcode bridge: session closed"
	}
	return websocket.StatusInternalError, "netcode bridge: upstream error"
}

var errorCodes = []struct {
	err  error
	code websocket.StatusCode
}{
	{netcode.ErrConnectionDenied, CodeConnectionDenied},
	{netcode.ErrConnectTokenExpired, CodeConnectTokenExpired},
	{netcode.ErrInvalidConnectToken, CodeInvalidConnectToken},
	{netcode.ErrConnectionRequestTimedOut, CodeConnectionRequestTimedOut},
	{netcode.ErrConnectionResponseTimedOut, CodeConnectionResponseTimedOut},
	{netcode.ErrConnectionTimedOut, CodeConnectionTimedOut},
}
