package bridge

import (
	"context"
	"errors"
	"github.com/gonetcode/netcode/bridge/internal/wsbridge"
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
	CodeIdleTimeout websocket.StatusCode = wsbridge.CodeIdleTimeout
	// CodeBridgeFull is WebSocket's 1013 (try again later): the bridge has
	// its MaxSessions open (ErrBridgeFull, the reason). The session is
	// refused right after the upgrade; see also RefusedHeader.
	CodeBridgeFull = wsbridge.CodeFull
)

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
	gate    wsbridge.Gate // admission, shared with the transport's Mux
	period  time.Duration // how often a session's watchdog checks

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
	}
	for _, a := range cfg.AllowedServers {
		h.allowed[canon(a)] = struct{}{}
	}
	if h.dialer == nil {
		sb := cfg.SocketBuffer
		if sb <= 0 {
			sb = DefaultSocketBuffer
		}
		h.dialer = &netcode.Dialer{SocketBuffer: sb}
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
	h.gate = wsbridge.Gate{
		Subprotocol: Subprotocol,
		Max:         cfg.MaxSessions,
		Accept: websocket.AcceptOptions{
			Subprotocols:    []string{Subprotocol},
			OriginPatterns:  cfg.OriginPatterns,
			CompressionMode: websocket.CompressionDisabled,
		},
		Log:  h.log,
		Name: "relay",
	}
	h.gate.Refuse = h.gate.Accept
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
	return nil
}

// ServeHTTP upgrades the request to a WebSocket and relays it.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.gate.Admit(w, r, func(ws *websocket.Conn, bc *wsbridge.BatchConn, release func()) {
		s := newSession(h)
		h.mu.Lock()
		h.sessions[s] = struct{}{}
		h.mu.Unlock()
		// The session goes on in a goroutine of its own (Close waits for
		// it), and net/http's for the connection ends, with what it
		// holds.
		remote := r.RemoteAddr
		go func() {
			defer func() {
				h.mu.Lock()
				delete(h.sessions, s)
				h.mu.Unlock()
				release()
			}()
			s.serve(ws, bc, remote)
		}()
	})
}

// ErrBridgeFull is why a session was refused: the bridge (a Handler or a
// transport.Mux) has its MaxSessions open. A relay's browser sees it as
// close code 1013 (try again later) with this error as the reason; a
// transport client gets it, for errors.Is, from transport.Dial and so from
// a netcode.Dialer using transport.ListenPacket, at once rather than as a
// handshake timeout.
var ErrBridgeFull = wsbridge.ErrFull

// RefusedHeader is the HTTP response header by which a session refused
// for the cap says so before any WebSocket message, on the 101 response
// (then closed with 1013) as on the 503 one: its value is "full". Clients
// that can read response headers (Go's, not a browser's) tell the refusal
// apart at once; transport.Dial does.
const RefusedHeader = wsbridge.RefusedHeader

// Session phases, for the watchdog.
const (
	phaseToken int32 = iota
	phaseDial
	phaseConnected
)

// session is one browser's relay.
type session struct {
	h    *Handler
	wd   *wsbridge.Watchdog
	ctx  context.Context // cancelled when the session ends; bounds the dial
	stop context.CancelFunc

	mu     sync.Mutex
	ws     *websocket.Conn
	bc     *wsbridge.BatchConn // under ws; set with it
	conn   *netcode.Conn
	ended  bool
	code   websocket.StatusCode
	reason string

	endOnce sync.Once
	done    chan struct{} // closed when the session ends
	ready   chan struct{} // closed once conn is set
	wg      sync.WaitGroup

	phase    atomic.Int32
	deadline atomic.Int64 // phaseToken, phaseDial: wd.Now() when it ends
	endedAt  atomic.Int64 // wd.Now() + 1 when the end began; 0 before

	in  [netcode.MaxPayloadBytes + 1]byte // browser → server
	out [netcode.MaxPayloadBytes]byte     // server → browser
}

// tokenBuf holds a connect token as read, with one byte more to tell a
// longer message. Sessions borrow one from tokenBufs only until the dial
// has parsed it, so that connected sessions do not carry one each.
type tokenBuf [netcode.ConnectTokenBytes + 1]byte

var tokenBufs = sync.Pool{New: func() any { return new(tokenBuf) }}

func newSession(h *Handler) *session {
	s := &session{
		h:     h,
		wd:    wsbridge.NewWatchdog(h.period, h.cfg.IdleTimeout, h.cfg.WriteTimeout),
		done:  make(chan struct{}),
		ready: make(chan struct{}),
	}
	s.ctx, s.stop = context.WithCancel(context.Background())
	return s
}

// end ends the session once: it records why, stops a dial in progress,
// disconnects from the server and closes the WebSocket with code and
// reason, within a second . Later calls wait for the
// first to finish and do nothing.
func (s *session) end(code websocket.StatusCode, reason string) {
	s.endOnce.Do(func() {
		s.endedAt.CompareAndSwap(0, s.wd.Now()+1)
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
			wsbridge.CloseWS(ws, bc, code, reason)
		}
	})
}

// endLater ends the session from the watchdog: in a goroutine of the
// session's (serve waits for it), so that the watchdog goes on checking
// during the close and cuts the connection if it takes longer than
// a second.
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
func (s *session) setWS(ws *websocket.Conn, bc *wsbridge.BatchConn) bool {
	s.mu.Lock()
	if s.ended {
		code, reason := s.code, s.reason
		s.mu.Unlock()
		wsbridge.CloseWS(ws, bc, code, reason)
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

func (s *session) serve(ws *websocket.Conn, bc *wsbridge.BatchConn, remote string) {
	if !s.setWS(ws, bc) {
		return
	}
	h := s.h
	h.log.Debug("netcode/bridge: session start", "remote", remote)
	s.deadline.Store(s.wd.Now() + int64(h.cfg.HandshakeTimeout))
	s.wd.Run(s.watch)
	defer func() {
		// The first end wins; this one only waits for it to finish. The
		// watchdog runs until then: it bounds the close too.
		s.end(websocket.StatusNormalClosure, "")
		s.wd.Stop()
		s.wg.Wait()
		s.mu.Lock()
		code, reason := s.code, s.reason
		s.mu.Unlock()
		h.log.Debug("netcode/bridge: session end", "remote", remote,
			"code", int(code), "reason", reason, "duration", time.Duration(s.wd.Now()))
	}()

	// The connect token: one binary message of exactly 2048 bytes.
	ws.SetReadLimit(netcode.ConnectTokenBytes)
	tb := tokenBufs.Get().(*tokenBuf)
	defer func() {
		if tb != nil {
			tokenBufs.Put(tb)
		}
	}()
	typ, n, err := wsbridge.ReadMessage(ws, tb[:])
	if err != nil {
		s.end(wsbridge.ReadEnd(err))
		return
	}
	if typ != websocket.MessageBinary || n != netcode.ConnectTokenBytes {
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
			s.end(CodeServerNotAllowed, "netcode/bridge: server "+a.String()+" not allowed")
			return
		}
	}

	// From here the browser is read in its own goroutine, so that a browser
	// that leaves during the dial cancels it.
	ws.SetReadLimit(netcode.MaxPayloadBytes + 1)
	s.wg.Add(1)
	go s.readLoop()

	s.deadline.Store(s.wd.Now() + int64(h.cfg.DialTimeout))
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
	s.wd.Active()
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
	if err := s.wd.WriteMessage(s.ws, typ, p); err != nil {
		s.end(websocket.StatusGoingAway, "netcode/bridge: write to browser failed")
		return false
	}
	return true
}

// readLoop relays the browser's messages to the server, once connected.
func (s *session) readLoop() {
	defer s.wg.Done()
	limit := netcode.MaxPayloadBytes
	for {
		typ, n, err := wsbridge.ReadMessage(s.ws, s.in[:])
		if err != nil {
			s.end(wsbridge.ReadEnd(err))
			return
		}
		s.wd.Active()
		switch {
		case typ != websocket.MessageBinary:
			s.end(websocket.StatusUnsupportedData, "netcode/bridge: only binary messages are relayed")
			return
		case n == 0:
			s.end(websocket.StatusPolicyViolation, "netcode/bridge: empty message")
			return
		case n > limit:
			s.end(websocket.StatusMessageTooBig, "netcode/bridge: message larger than 1200 bytes")
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
// the connection of a session whose end has taken a second (the
// connection's deadline should have done it already). It runs every
// period from the session's watchdog until serve stops it, once the
// session has ended.
func (s *session) watch(now int64) bool {
	if e := s.endedAt.Load(); e != 0 {
		if now-(e-1) >= int64(wsbridge.CloseTimeout) {
			s.bc.Cut()
		}
		return true
	}
	switch s.phase.Load() {
	case phaseToken:
		if now >= s.deadline.Load() {
			s.endLater(now, CodeHandshakeTimeout, "netcode/bridge: no connect token within the handshake timeout")
			return true
		}
	case phaseDial:
		if now >= s.deadline.Load() {
			s.endLater(now, CodeHandshakeTimeout, "netcode/bridge: dial timed out")
			return true
		}
	case phaseConnected:
		if s.wd.IdleFor(now) {
			s.endLater(now, CodeIdleTimeout, "netcode/bridge: idle timeout")
			return true
		}
	}
	if s.wd.Stalled(now) {
		// The browser does not read: no close handshake is possible.
		s.bc.Cut()
		s.endLater(now, websocket.StatusGoingAway, "netcode/bridge: write timeout")
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
		return websocket.StatusGoingAway, "netcode/bridge: session closed"
	}
	return websocket.StatusInternalError, "netcode/bridge: upstream error"
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
