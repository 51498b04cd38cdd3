package bridge

import (
	"context"
	"errors"
	"github.com/gonetcode/netcode/bridge/internal/wsbridge"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/gonetcode/netcode"
	"github.com/gonetcode/netcode/internal/timerwheel"
	"github.com/gonetcode/netcode/token"
)

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
	link   wsbridge.RelayLink // the browser's WebSocket or WebTransport session
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
type tokenBuf [token.ConnectTokenBytes + 1]byte

var tokenBufs = sync.Pool{New: func() any { return new(tokenBuf) }}

func newSession(h *Handler) *session {
	s := &session{
		h:     h,
		wd:    wsbridge.NewWatchdog(h.period, h.cfg.IdleTimeout, h.cfg.WriteTimeout),
		done:  make(chan struct{}),
		ready: make(chan struct{}),
	}
	s.wd.Sched = h.wheel
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
		l, conn := s.link, s.conn
		s.mu.Unlock()
		close(s.done)
		s.stop()
		if conn != nil {
			conn.Close()
		}
		if l != nil {
			wsbridge.CloseLink(l, code, reason)
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

// setLink records the browser's link; it reports false if the session
// already ended, and then closes l itself.
func (s *session) setLink(l wsbridge.RelayLink) bool {
	s.mu.Lock()
	if s.ended {
		code, reason := s.code, s.reason
		s.mu.Unlock()
		wsbridge.CloseLink(l, code, reason)
		return false
	}
	s.link = l
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

func (s *session) serve(l wsbridge.RelayLink, remote string) {
	if !s.setLink(l) {
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
		l.Release() // a batch the end cut short
		s.mu.Lock()
		code, reason := s.code, s.reason
		s.mu.Unlock()
		h.log.Debug("netcode/bridge: session end", "remote", remote,
			"code", int(code), "reason", reason, "duration", time.Duration(s.wd.Now()))
	}()

	// The connect token: one binary message of exactly 2048 bytes.
	tb := tokenBufs.Get().(*tokenBuf)
	defer func() {
		if tb != nil {
			tokenBufs.Put(tb)
		}
	}()
	n, err := l.ReadToken(tb[:])
	if err != nil && err != wsbridge.ErrText {
		s.end(l.ReadEnd(err))
		return
	}
	if err != nil || n != token.ConnectTokenBytes {
		s.end(wsbridge.CodeInvalidConnectToken, "netcode: invalid connect token: the first message must be the 2048-byte binary token")
		return
	}
	tokenBytes := tb[:n]
	tok, err := token.Parse(tokenBytes)
	if err != nil || len(tok.ServerAddrs) == 0 {
		s.end(wsbridge.CodeInvalidConnectToken, netcode.ErrInvalidConnectToken.Error())
		return
	}
	for _, a := range tok.ServerAddrs {
		if !h.allows(a) {
			s.end(wsbridge.CodeServerNotAllowed, "netcode/bridge: server "+a.String()+" not allowed")
			return
		}
	}

	// From here the browser is read in its own goroutine, so that a browser
	// that leaves during the dial cancels it.
	s.wg.Add(1)
	go s.readLoop()

	s.deadline.Store(s.wd.Now() + int64(h.cfg.DialTimeout))
	s.phase.Store(phaseDial)
	conn, err := h.dialer.DialContext(timerwheel.With(s.ctx, h.wheel), tokenBytes)
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
	if err := s.wd.WriteText(l, msg); err != nil {
		s.end(websocket.StatusGoingAway, "netcode/bridge: write to browser failed")
		return
	}

	// Server → browser, one message per payload; those already waiting
	// when one is read go out with it, in one write to the connection
	// where the link can (a WebSocket's).
	for s.relayBatch(conn) {
	}
}

// relayBatch waits for a payload from the server and writes it to the
// browser, with the payloads queued behind it in the same write to the
// connection (up to wsbridge.BatchBytes at once). It reports false once the
// session has ended.
func (s *session) relayBatch(conn *netcode.Conn) bool {
	n, err := conn.Read(s.out[:])
	if err != nil {
		code, reason := closeFor(err)
		s.end(code, reason)
		return false
	}
	if conn.Buffered() == 0 {
		return s.write(s.out[:n])
	}
	s.link.Hold()
	ok := s.write(s.out[:n])
	for ok && conn.Buffered() > 0 {
		// Only this goroutine reads: what Buffered counts is there.
		if n, err = conn.Read(s.out[:]); err != nil {
			break // the next call ends the session, after the flush
		}
		ok = s.write(s.out[:n])
	}
	if err := s.wd.Flush(s.link); err != nil && ok {
		s.end(websocket.StatusGoingAway, "netcode/bridge: write to browser failed")
		return false
	}
	return ok
}

// write sends one payload to the browser; it reports false (having ended
// the session) if that failed. A payload written counts as activity for the
// idle timeout. A payload larger than the link can carry (a WebTransport
// datagram) ends the session with 1009 and a reason that says so.
func (s *session) write(p []byte) bool {
	if err := s.link.CheckWrite(len(p)); err != nil {
		s.end(websocket.StatusMessageTooBig, err.Error())
		return false
	}
	if err := s.wd.Write(s.link, p); err != nil {
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
		n, err := s.link.Read(s.in[:])
		if err != nil && err != wsbridge.ErrText {
			s.end(s.link.ReadEnd(err))
			return
		}
		s.wd.Active()
		switch {
		case err != nil:
			s.end(websocket.StatusUnsupportedData, "netcode/bridge: only binary messages are relayed")
			return
		case n == 0:
			s.end(websocket.StatusPolicyViolation, "netcode/bridge: empty message")
			return
		case n > limit:
			s.end(websocket.StatusMessageTooBig, "netcode/bridge: message larger than 1200 bytes")
			return
		}
		if s.phase.Load() != phaseConnected {
			// Dialing still: wait for the connection (or the end). Once
			// connected, a Write after the end fails, and ends nothing
			// more.
			select {
			case <-s.ready:
			case <-s.done:
				return
			}
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
			s.link.Cut()
		}
		return true
	}
	switch s.phase.Load() {
	case phaseToken:
		if now >= s.deadline.Load() {
			s.endLater(now, wsbridge.CodeHandshakeTimeout, "netcode/bridge: no connect token within the handshake timeout")
			return true
		}
	case phaseDial:
		if now >= s.deadline.Load() {
			s.endLater(now, wsbridge.CodeHandshakeTimeout, "netcode/bridge: dial timed out")
			return true
		}
	case phaseConnected:
		if s.wd.IdleFor(now) {
			s.endLater(now, wsbridge.CodeIdleTimeout, "netcode/bridge: idle timeout")
			return true
		}
	}
	if s.wd.Stalled(now) {
		// The browser does not read: no close handshake is possible.
		s.link.Cut()
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
		return wsbridge.CodeDisconnected, "netcode: disconnected by the server"
	case errors.Is(err, net.ErrClosed), errors.Is(err, context.Canceled):
		return websocket.StatusGoingAway, "netcode/bridge: session closed"
	}
	return websocket.StatusInternalError, "netcode/bridge: upstream error"
}

var errorCodes = []struct {
	err  error
	code websocket.StatusCode
}{
	{netcode.ErrConnectionDenied, wsbridge.CodeConnectionDenied},
	{netcode.ErrConnectTokenExpired, wsbridge.CodeConnectTokenExpired},
	{netcode.ErrInvalidConnectToken, wsbridge.CodeInvalidConnectToken},
	{netcode.ErrConnectionRequestTimedOut, wsbridge.CodeConnectionRequestTimedOut},
	{netcode.ErrConnectionResponseTimedOut, wsbridge.CodeConnectionResponseTimedOut},
	{netcode.ErrConnectionTimedOut, wsbridge.CodeConnectionTimedOut},
}
