package wire

import (
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/gonetcode/netcode/bridge/internal/wsbridge"
	"github.com/gonetcode/netcode/bridge/transport"
	"github.com/gonetcode/netcode/internal/timerwheel"
)

// Subprotocol is the WebSocket subprotocol a wire client may offer. The
// Handler selects it, or the transport's (transport.Subprotocol: a netcode
// client of package bridge/transport, the wasm client, speaks the wire
// as it is), when offered, and serves a client that offers none (Cute
// Framework's web builds offer none).
const Subprotocol = "netcode.wire.v1"

// DefaultPath is the URL path under which wire sessions are served by
// convention: a session's URL is DefaultPath followed by the target port,
// as in https://game.example/wire/5601. package bridge/webtransport serves
// it by default; mount a Handler there on the HTTPS server.
const DefaultPath = "/wire/"

// The wire's close codes, beside WebSocket's (see the package
// documentation's table).
const (
	// CodeFull: MaxSessions reached (WebSocket's 1013, try again later).
	CodeFull = wsbridge.CodeFull
	// CodeTargetNotAllowed: the URL's port is in no range of
	// Config.Allow (the relay's 4010, server not allowed).
	CodeTargetNotAllowed = wsbridge.CodeServerNotAllowed
	// CodeIdleTimeout: no datagram went either way within IdleTimeout
	// (4012, as in the other modes).
	CodeIdleTimeout = wsbridge.CodeIdleTimeout
	// CodeSourceFull: the source address has MaxSessionsPerSource
	// sessions open.
	CodeSourceFull websocket.StatusCode = 4020
)

// Errors whose text is the reason of a refusal's close.
var (
	// ErrFull: MaxSessions reached.
	ErrFull = wsbridge.ErrFull
	// ErrSourceFull: MaxSessionsPerSource reached.
	ErrSourceFull = errors.New("netcode/bridge: too many wire sessions from this address")
	// ErrTargetNotAllowed: the URL's port is in no allowed range.
	ErrTargetNotAllowed = errors.New("netcode/bridge: wire target not allowed")
)

// Handler is the wire: an http.Handler that serves WebSocket sessions at
// <prefix>/<port>, and, through package bridge/webtransport's Server
// (Config.Wire), WebTransport sessions at the same URLs, under one set of
// caps. Make one with NewHandler; Close ends every session.
type Handler struct {
	hostHook // what package bridge/webtransport admits its sessions through

	cfg    Config
	log    *slog.Logger
	gate   wsbridge.Gate // the cap in total, the refusals' budget, Close
	period time.Duration // how often a session's watchdog checks
	wheel  *timerwheel.Wheel
	// bufs holds buffers of MaxDatagram+1 bytes for the WebSocket
	// sessions' messages, each taken only while one is read and sent.
	bufs sync.Pool

	// Counters of refusals, by reason, and of ended sessions' traffic.
	refused [numReasons]atomic.Uint64
	opened  atomic.Uint64
	idle    atomic.Uint64

	// Lock order: the gate's lock, then mu.
	mu       sync.Mutex
	sessions map[*session]struct{}
	sources  map[netip.Prefix]int
	retired  totals // the counts of the sessions that ended
}

// NewHandler returns a wire with the given configuration; nil is the zero
// Config, which refuses every session.
func NewHandler(config *Config) *Handler {
	var cfg Config
	if config != nil {
		cfg = *config
	}
	cfg.Allow = append([]Range(nil), cfg.Allow...)
	wsbridge.SetDefaults(&cfg.MaxSessions, &cfg.IdleTimeout, &cfg.WriteTimeout)
	if cfg.MaxSessionsPerSource <= 0 {
		cfg.MaxSessionsPerSource = defaultMaxSessionsPerSource
	}
	if cfg.MaxDatagram <= 0 || cfg.MaxDatagram > MaxUDP6 {
		cfg.MaxDatagram = MaxUDP6
	}
	if cfg.MaxDatagramsPerSecond == 0 {
		cfg.MaxDatagramsPerSecond = defaultDatagramsPerSecond
	}
	if cfg.SocketBuffer <= 0 {
		cfg.SocketBuffer = wsbridge.DefaultSocketBuffer
	}
	h := &Handler{
		cfg:      cfg,
		log:      cfg.Logger,
		wheel:    timerwheel.New(0),
		sessions: make(map[*session]struct{}),
		sources:  make(map[netip.Prefix]int),
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.bufs.New = func() any {
		b := make([]byte, cfg.MaxDatagram+1)
		return &b
	}
	h.hostHook = hostHook{H: (*wireHost)(h)}
	h.gate.Init("wire", Subprotocol, cfg.MaxSessions, cfg.OriginPatterns, h.log)
	h.gate.Accept.Subprotocols = append(h.gate.Accept.Subprotocols, transport.Subprotocol)
	h.gate.Refuse = h.gate.Accept
	h.period = wsbridge.WatchPeriod(time.Second, cfg.IdleTimeout, cfg.WriteTimeout)
	return h
}

// target returns the address a session to port reaches, if it is allowed.
func (h *Handler) target(port uint16) (netip.AddrPort, bool) {
	for _, r := range h.cfg.Allow {
		if r.Contains(port) {
			return netip.AddrPortFrom(r.Addr, port), true
		}
	}
	return netip.AddrPort{}, false
}

// maxDatagram is the largest datagram a session to target carries over
// WebSocket.
func (h *Handler) maxDatagram(target netip.AddrPort) int {
	if target.Addr().Is4() {
		return min(h.cfg.MaxDatagram, MaxUDP4)
	}
	return h.cfg.MaxDatagram
}

// sourceOf is the key of remote (a request's RemoteAddr) for
// MaxSessionsPerSource: its IPv4 address, or its IPv6 /64.
func sourceOf(remote string) netip.Prefix {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Prefix{}
	}
	a := ap.Addr().Unmap().WithZone("")
	bits := 32
	if a.Is6() {
		bits = 64
	}
	p, _ := a.Prefix(bits)
	return p
}

// Refusal reasons, for Stats.
type reason int

const (
	refusedOrigin reason = iota
	refusedPath
	refusedNotAllowed
	refusedFull
	refusedSourceFull
	refusedClosed
	numReasons
)

func nop() {}

// refusal counts a refusal for why and returns its Admission.
func (h *Handler) refusal(why reason, r *http.Request, a wsbridge.Admission) wsbridge.Admission {
	h.refused[why].Add(1)
	if a.Release == nil {
		a.Release = nop
	}
	h.log.Debug("netcode/bridge: wire session refused", "remote", r.RemoteAddr, "path", r.URL.Path, "reason", a.Reason)
	return a
}

// admit is the one admission of both kinds of session: the origin (as the
// server of the session's kind judged it), the target port, the cap in
// total and the cap per source.
func (h *Handler) admit(r *http.Request, originOK bool) wsbridge.Admission {
	if !originOK {
		return h.refusal(refusedOrigin, r, wsbridge.Admission{Status: http.StatusForbidden, Reason: "netcode/bridge: origin not allowed"})
	}
	port, err := parsePort(path.Base(r.URL.Path))
	if err != nil || !strings.HasSuffix(r.URL.Path, "/"+path.Base(r.URL.Path)) {
		return h.refusal(refusedPath, r, wsbridge.Admission{Status: http.StatusNotFound, Reason: "netcode/bridge: a wire URL ends with /<port>"})
	}
	target, ok := h.target(port)
	if !ok {
		return h.refusal(refusedNotAllowed, r, wsbridge.Admission{
			Code: CodeTargetNotAllowed, Status: http.StatusForbidden, Refused: "not-allowed",
			Reason: ErrTargetNotAllowed.Error() + ": port " + strconv.Itoa(int(port)),
		})
	}
	release, err := h.gate.Enter()
	switch err {
	case wsbridge.ErrClosed:
		return h.refusal(refusedClosed, r, wsbridge.Admission{Status: http.StatusServiceUnavailable, Reason: err.Error()})
	case wsbridge.ErrFull:
		return h.refusal(refusedFull, r, wsbridge.Admission{
			Code: CodeFull, Status: http.StatusServiceUnavailable, Refused: "full", Reason: err.Error(), Release: release,
		})
	}
	src := sourceOf(r.RemoteAddr)
	h.mu.Lock()
	if h.sources[src] >= h.cfg.MaxSessionsPerSource {
		h.mu.Unlock()
		release()
		return h.refusal(refusedSourceFull, r, wsbridge.Admission{
			Code: CodeSourceFull, Status: http.StatusServiceUnavailable, Refused: "source", Reason: ErrSourceFull.Error(),
		})
	}
	h.sources[src]++
	h.mu.Unlock()
	var once sync.Once
	free := func() {
		once.Do(func() {
			h.mu.Lock()
			if h.sources[src]--; h.sources[src] <= 0 {
				delete(h.sources, src)
			}
			h.mu.Unlock()
			release()
		})
	}
	remote := r.RemoteAddr
	return wsbridge.Admission{
		Start:   func(l wsbridge.Link) { h.start(l, target, remote, free) },
		Release: free,
	}
}

// ServeHTTP serves a WebSocket session of the wire: the request's last
// path element is the target port.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a := h.admit(r, originAllowed(r, h.cfg.OriginPatterns))
	if a.Start == nil {
		defer a.Release()
		h.refuseWS(w, r, a)
		return
	}
	clearDeadlines(w)
	ws, bc, err := wsbridge.Accept(w, r, &h.gate.Accept)
	if err != nil {
		a.Release()
		return // Accept has answered.
	}
	if !h.gate.Start(func() { a.Start(wsbridge.WSLink{WS: ws, BC: bc}) }) {
		wsbridge.CloseWS(ws, bc, websocket.StatusGoingAway, wsbridge.ErrClosed.Error())
		a.Release()
	}
}

// refuseWS answers a refused WebSocket request: upgraded and closed at
// once with the refusal's code, or in plain HTTP when it has none or many
// refusals are in progress.
func (h *Handler) refuseWS(w http.ResponseWriter, r *http.Request, a wsbridge.Admission) {
	if a.Refused != "" {
		w.Header().Set(wsbridge.RefusedHeader, a.Refused)
	}
	upgrade, done := h.gate.Refusal()
	defer done()
	if a.Code == 0 || !upgrade {
		refuseHTTP(w, a)
		return
	}
	clearDeadlines(w)
	ws, bc, err := wsbridge.Accept(w, r, &h.gate.Refuse)
	if err != nil {
		return
	}
	wsbridge.CloseWS(ws, bc, a.Code, a.Reason)
}

// refuseHTTP answers a refusal with its HTTP status.
func refuseHTTP(w http.ResponseWriter, a wsbridge.Admission) {
	if a.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	http.Error(w, a.Reason, a.Status)
}

// clearDeadlines lifts the deadlines an http.Server's ReadTimeout or
// WriteTimeout set on the connection, which would cut the session short.
func clearDeadlines(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	_ = rc.SetWriteDeadline(time.Time{})
}

// originAllowed is the WebSocket origin rule of the other modes
// (coder/websocket's, which Accept applies again): no Origin, the
// request's own host (and port), or a host matching a pattern.
func originAllowed(r *http.Request, patterns []string) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return false
	}
	if strings.EqualFold(u.Host, r.Host) {
		return true
	}
	for _, p := range patterns {
		if ok, _ := path.Match(strings.ToLower(p), strings.ToLower(u.Host)); ok {
			return true
		}
	}
	return false
}

// hostHook is the hook a Handler embeds under an unexported name, so that
// it exports no field or method of internal types.
type hostHook = wsbridge.Hosted

// wireHost is a Handler as a wsbridge.Admitter: package
// bridge/webtransport admits and starts its sessions through it.
type wireHost Handler

var _ wsbridge.Admitter = (*wireHost)(nil)

func (h *wireHost) Gate() *wsbridge.Gate { return &h.gate }

func (h *wireHost) Admit(r *http.Request, originOK bool) wsbridge.Admission {
	return (*Handler)(h).admit(r, originOK)
}

// Start implements wsbridge.Host; a wire session starts only through
// Admit, which knows its target.
func (h *wireHost) Start(l wsbridge.Link, _ string, release func()) {
	wsbridge.CloseLink(l, websocket.StatusInternalError, "netcode/bridge: a wire session needs its URL")
	release()
}

// start starts a session over l to target under the gate's lock; release
// frees its slots once it has ended.
func (h *Handler) start(l wsbridge.Link, target netip.AddrPort, remote string, release func()) {
	s := newSession(h, l, target, remote)
	h.mu.Lock()
	h.sessions[s] = struct{}{}
	h.mu.Unlock()
	h.opened.Add(1)
	go func() {
		defer func() {
			h.mu.Lock()
			delete(h.sessions, s)
			h.retired.add(&s.traffic)
			h.mu.Unlock()
			release()
		}()
		s.serve()
	}()
}

// Close ends every session (with 1001, going away), refuses new ones with
// HTTP 503, and waits until every session's goroutines have exited: within
// about a second, whatever the browsers do.
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
		wg.Go(func() { s.end(websocket.StatusGoingAway, "netcode/bridge: shutting down") })
	}
	wg.Wait()
	h.gate.Wait()
	h.wheel.Close()
	return nil
}

// Stats are a Handler's counters; package metrics exports them.
type Stats struct {
	Sessions       int    // sessions open now
	SessionsOpened uint64 // sessions admitted since the start

	DatagramsToTarget  uint64 // datagrams sent to targets
	BytesToTarget      uint64 // their bytes (UDP payload)
	DatagramsToBrowser uint64 // datagrams sent to browsers
	BytesToBrowser     uint64 // their bytes (the datagrams', without framing)

	DroppedRate     uint64 // browsers' datagrams over MaxDatagramsPerSecond
	DroppedTooLarge uint64 // targets' datagrams larger than their session carries
	IdleTimeouts    uint64 // sessions ended by IdleTimeout

	RefusedOrigin     uint64 // a page of an origin not allowed (HTTP 403)
	RefusedPath       uint64 // a URL that does not end with a port (HTTP 404)
	RefusedNotAllowed uint64 // a port in no allowed range (4010)
	RefusedFull       uint64 // MaxSessions reached (1013)
	RefusedSourceFull uint64 // MaxSessionsPerSource reached (4020)
	RefusedClosed     uint64 // after Close (HTTP 503)
}

// Stats returns the counters now.
func (h *Handler) Stats() Stats {
	h.mu.Lock()
	t := h.retired
	for s := range h.sessions {
		t.add(&s.traffic)
	}
	n := len(h.sessions)
	h.mu.Unlock()
	return Stats{
		Sessions:           n,
		SessionsOpened:     h.opened.Load(),
		DatagramsToTarget:  t.toTarget,
		BytesToTarget:      t.toTargetBytes,
		DatagramsToBrowser: t.toBrowser,
		BytesToBrowser:     t.toBrowserBytes,
		DroppedRate:        t.droppedRate,
		DroppedTooLarge:    t.droppedTooLarge,
		IdleTimeouts:       h.idle.Load(),
		RefusedOrigin:      h.refused[refusedOrigin].Load(),
		RefusedPath:        h.refused[refusedPath].Load(),
		RefusedNotAllowed:  h.refused[refusedNotAllowed].Load(),
		RefusedFull:        h.refused[refusedFull].Load(),
		RefusedSourceFull:  h.refused[refusedSourceFull].Load(),
		RefusedClosed:      h.refused[refusedClosed].Load(),
	}
}

// Sessions returns the number of sessions open now.
func (h *Handler) Sessions() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.sessions)
}
