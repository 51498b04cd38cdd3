package wsbridge

import (
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// ErrFull is why a session was refused: the bridge has its MaxSessions
// open. Package bridge exports it as ErrBridgeFull.
var ErrFull = errors.New("netcode/bridge: too many sessions")

// CodeFull is the close code of a refusal for the cap: WebSocket's 1013,
// try again later.
const CodeFull = websocket.StatusTryAgainLater

// RefusedHeader is the HTTP response header of a refusal for the cap;
// its value is "full".
const RefusedHeader = "Netcode-Bridge-Refused"

// Gate is the one admission path of both bridges, the relay's Handler and
// the transport's Mux: the subprotocol check (HTTP 400), the refusal after
// Close (HTTP 503), the session cap and its refusals (RefuseOverCap), the
// lifting of the http.Server's deadlines and the upgrade, each close
// bounded by CloseTimeout. It counts the sessions it admitted until they
// Release their slot, and Wait waits for them.
//
// Lock order: mu, then whatever the caller's start takes (its sessions'
// lock); start runs under mu so that Close never misses a session.
type Gate struct {
	Subprotocol string
	Max         int                     // sessions at once
	Accept      websocket.AcceptOptions // the upgrade of a session
	Refuse      websocket.AcceptOptions // the upgrade of a refusal
	Log         *slog.Logger
	Name        string // "relay" or "transport", in logs

	mu       sync.Mutex
	active   int // sessions from their admission to their release
	closed   bool
	refusing atomic.Int64 // refusals with an upgrade in progress
	wg       sync.WaitGroup
}

// Init sets up g, unused so far, for sessions of subprotocol, at most max
// at once, from pages of origins (websocket.AcceptOptions.OriginPatterns),
// uncompressed; name ("relay" or "transport") tells it in log. A refusal
// upgrades as a session does unless the caller changes Refuse after.
func (g *Gate) Init(name, subprotocol string, max int, origins []string, log *slog.Logger) {
	g.Name, g.Subprotocol, g.Max, g.Log = name, subprotocol, max, log
	g.Accept = websocket.AcceptOptions{
		Subprotocols:    []string{subprotocol},
		OriginPatterns:  origins,
		CompressionMode: websocket.CompressionDisabled,
	}
	g.Refuse = g.Accept
}

// ErrClosed is Enter's error after Close.
var ErrClosed = errors.New("netcode/bridge: shutting down")

// Enter takes a session's slot, for any kind of session (a WebSocket, a
// WebTransport session). It returns release, which the session calls once
// when it has ended (its goroutines included); later calls do nothing.
// After Close it fails with ErrClosed and release is nil. At the cap it
// fails with ErrFull, and release ends the refusal, which Wait waits for
// too: the caller refuses the session (see Refusal), then calls it.
func (g *Gate) Enter() (release func(), err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, ErrClosed
	}
	g.wg.Add(1)
	if g.active >= g.Max {
		return g.wg.Done, ErrFull
	}
	g.active++
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			g.active--
			g.mu.Unlock()
			g.wg.Done()
		})
	}, nil
}

// Refusal tells a refusal for the cap whether it may tell the client so
// in the session's own terms (an upgrade then a close with CodeFull), or,
// when more than maxRefusing of those are in progress, must answer plain
// HTTP 503, which costs less; done ends it.
func (g *Gate) Refusal() (upgrade bool, done func()) {
	if g.refusing.Add(1) > maxRefusing {
		g.refusing.Add(-1)
		return false, func() {}
	}
	return true, func() { g.refusing.Add(-1) }
}

// Start calls start under the gate's lock, unless Close was called: it
// reports whether it did. start must not block; Close never misses a
// session it started.
func (g *Gate) Start(start func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	start()
	return true
}

// Admit answers r, a WebSocket's upgrade request. If it admits a session,
// it calls start under the gate's lock with the WebSocket, its connection
// and release, which the session calls once when it has ended (its
// goroutines included); start must not block. A request the gate turns
// away has been answered.
func (g *Gate) Admit(w http.ResponseWriter, r *http.Request, start func(ws *websocket.Conn, bc *BatchConn, release func())) {
	if !Offers(r, g.Subprotocol) {
		http.Error(w, "netcode/bridge: WebSocket subprotocol "+g.Subprotocol+" required", http.StatusBadRequest)
		return
	}
	release, err := g.Enter()
	switch err {
	case ErrClosed:
		http.Error(w, ErrClosed.Error(), http.StatusServiceUnavailable)
		return
	case ErrFull:
		defer release()
		g.refuseOverCap(w, r)
		return
	}
	clearDeadlines(w)
	ws, bc, err := Accept(w, r, &g.Accept)
	if err != nil {
		release()
		return // Accept has answered the request.
	}
	if !g.Start(func() { start(ws, bc, release) }) {
		CloseWS(ws, bc, websocket.StatusGoingAway, ErrClosed.Error())
		release()
	}
}

// Close makes the gate refuse every request from now on; the caller then
// ends its sessions and calls Wait.
func (g *Gate) Close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// Wait waits until every admitted session has released its slot and
// every refusal has been answered.
func (g *Gate) Wait() { g.wg.Wait() }

// refuseOverCap turns a request away because of the session cap: with a
// WebSocket closed at once with 1013 (try again later), which browsers can
// tell apart from a network failure, or, when more than maxRefusing of
// those are in progress, with a plain HTTP 503 that costs less. Both
// responses carry RefusedHeader.
func (g *Gate) refuseOverCap(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(RefusedHeader, "full")
	upgrade, done := g.Refusal()
	defer done()
	if !upgrade {
		RefuseHTTP(w)
		return
	}
	clearDeadlines(w)
	ws, bc, err := Accept(w, r, &g.Refuse)
	if err != nil {
		return
	}
	g.Log.Debug("netcode/bridge: session refused, too many", "bridge", g.Name, "remote", r.RemoteAddr)
	// Bounded like any close: a client that pipelined a long frame
	// after its request, or does not answer, is cut at CloseTimeout.
	CloseWS(ws, bc, CodeFull, ErrFull.Error())
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

// RefuseHTTP answers a request refused for the cap with HTTP 503, the
// RefusedHeader and Retry-After.
func RefuseHTTP(w http.ResponseWriter) {
	w.Header().Set(RefusedHeader, "full")
	w.Header().Set("Retry-After", "1")
	http.Error(w, ErrFull.Error(), http.StatusServiceUnavailable)
}
