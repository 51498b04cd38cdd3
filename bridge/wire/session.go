package wire

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"

	"github.com/gonetcode/netcode/bridge/internal/wsbridge"
)

// traffic is what one session counted: each field is written by one of
// its goroutines and read by Stats.
type traffic struct {
	toTarget, toTargetBytes   atomic.Uint64
	toBrowser, toBrowserBytes atomic.Uint64
	droppedRate               atomic.Uint64
	droppedTooLarge           atomic.Uint64
}

// totals are the traffic of many sessions.
type totals struct {
	toTarget, toTargetBytes   uint64
	toBrowser, toBrowserBytes uint64
	droppedRate               uint64
	droppedTooLarge           uint64
}

func (t *totals) add(s *traffic) {
	t.toTarget += s.toTarget.Load()
	t.toTargetBytes += s.toTargetBytes.Load()
	t.toBrowser += s.toBrowser.Load()
	t.toBrowserBytes += s.toBrowserBytes.Load()
	t.droppedRate += s.droppedRate.Load()
	t.droppedTooLarge += s.droppedTooLarge.Load()
}

// session is one browser's wire: its link, and one UDP socket connected to
// its target, which takes datagrams from the target's address only.
type session struct {
	h      *Handler
	l      wsbridge.Link
	target netip.AddrPort
	remote string
	ws     bool // l is a WebSocket: datagrams up to max; else WebTransport's
	max    int  // the largest datagram either way
	wd     *wsbridge.Watchdog
	udp    *net.UDPConn // set before the pumps start, under mu

	mu    sync.Mutex // a leaf
	ended bool       // under mu

	traffic

	// The rate cap of the browser's datagrams (up's own), a token bucket
	// on wd.Now's clock.
	rate   int64 // datagrams per second; <= 0: none
	bucket int64 // see allow

	endOnce sync.Once
	endedAt atomic.Int64 // wd.Now() + 1 when the end began; 0 before
	wg      sync.WaitGroup
	code    websocket.StatusCode // why it ended, once endOnce ran
}

// wtBuffer is the buffer of a WebTransport session's datagrams: larger
// than any QUIC packet, so that a target's datagram that the session
// cannot carry is seen whole (and dropped) rather than cut.
const wtBuffer = 1 << 11

func newSession(h *Handler, l wsbridge.Link, target netip.AddrPort, remote string) *session {
	s := &session{h: h, l: l, target: target, remote: remote, rate: int64(h.cfg.MaxDatagramsPerSecond)}
	_, s.ws = l.(wsbridge.WSLink)
	s.max = h.maxDatagram(target)
	if !s.ws {
		s.max = min(s.max, wtBuffer-1)
	}
	s.wd = wsbridge.NewWatchdog(h.period, h.cfg.IdleTimeout, h.cfg.WriteTimeout)
	s.wd.Sched = h.wheel
	return s
}

// serve runs the session until it ends: the browser's datagrams in this
// goroutine, the target's in another.
func (s *session) serve() {
	h := s.h
	udp, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(s.target))
	if err != nil {
		h.log.Debug("netcode/bridge: wire target unreachable", "remote", s.remote, "target", s.target, "err", err)
		wsbridge.CloseLink(s.l, websocket.StatusInternalError, "netcode/bridge: wire target unreachable")
		s.l.Release()
		return
	}
	_ = udp.SetReadBuffer(h.cfg.SocketBuffer)
	_ = udp.SetWriteBuffer(h.cfg.SocketBuffer)
	s.mu.Lock()
	s.udp = udp
	ended := s.ended
	s.mu.Unlock()
	if ended { // Close came first: end has closed the link
		udp.Close()
		s.l.Release()
		return
	}
	if ws, ok := s.l.(wsbridge.WSLink); ok {
		ws.WS.SetReadLimit(int64(s.max) + 1)
	}
	h.log.Debug("netcode/bridge: wire session start", "remote", s.remote, "target", s.target)
	s.bucket = s.wd.Now() - int64(time.Second) // a second's burst saved up
	s.wd.Run(s.check)
	s.wg.Add(1)
	go s.down()
	s.up()
	s.wg.Wait()
	s.wd.Stop()
	s.l.Release()
	if s.code == CodeIdleTimeout {
		h.idle.Add(1)
	}
	h.log.Debug("netcode/bridge: wire session end", "remote", s.remote, "target", s.target, "code", int(s.code),
		"to_target", s.toTarget.Load(), "to_browser", s.toBrowser.Load())
}

// end ends the session once: it closes the UDP socket (the target's pump
// returns) and the link with code and reason, within a second (the
// browser's pump returns). Later calls wait for the first to finish.
func (s *session) end(code websocket.StatusCode, reason string) {
	s.endOnce.Do(func() {
		s.endedAt.CompareAndSwap(0, s.wd.Now()+1)
		s.code = code
		s.mu.Lock()
		s.ended = true
		if s.udp != nil {
			s.udp.Close()
		}
		s.mu.Unlock()
		wsbridge.CloseLink(s.l, code, reason)
	})
}

// endLater ends the session from the watchdog, in a goroutine that serve
// waits for, so that the watchdog goes on and cuts a close that takes
// too long.
func (s *session) endLater(now int64, code websocket.StatusCode, reason string) {
	if !s.endedAt.CompareAndSwap(0, now+1) {
		return
	}
	s.wg.Go(func() { s.end(code, reason) })
}

// check is the watchdog's: the idle and write timeouts, and the bound of
// the close.
func (s *session) check(now int64) bool {
	if e := s.endedAt.Load(); e != 0 {
		if now-(e-1) > int64(wsbridge.CloseTimeout+time.Second) {
			s.l.Cut()
			return false
		}
		return true
	}
	if s.wd.IdleFor(now) {
		s.endLater(now, CodeIdleTimeout, "netcode/bridge: idle timeout")
	}
	if s.wd.Stalled(now) {
		s.l.Cut()
		s.endLater(now, websocket.StatusGoingAway, "netcode/bridge: write timeout")
	}
	return true
}

// allow takes a token from the rate cap's bucket, if it has one.
func (s *session) allow() bool {
	if s.rate <= 0 {
		return true
	}
	// s.bucket is the time the datagrams let through so far have used
	// up, at 1/rate s each; a second's worth may be saved up.
	now := s.wd.Now()
	b := max(s.bucket, now-int64(time.Second))
	if b > now {
		return false
	}
	s.bucket = b + int64(time.Second)/s.rate
	return true
}

// up forwards the browser's datagrams to the target until the link fails
// or the session ends.
func (s *session) up() {
	var buf []byte // WebTransport's; a WebSocket's message is read into one of h.bufs
	ws, isWS := s.l.(wsbridge.WSLink)
	if !isWS {
		buf = make([]byte, s.max+1)
	}
	for {
		var n int
		var err error
		var held *[]byte
		if isWS {
			held, n, err = s.readWS(ws.WS)
			if held != nil {
				buf = *held
			}
		} else {
			n, err = s.l.Read(buf)
		}
		if held != nil && (err != nil || n > s.max) {
			s.h.bufs.Put(held)
		}
		switch {
		case errors.Is(err, wsbridge.ErrText):
			s.end(websocket.StatusUnsupportedData, "netcode/bridge: only binary messages are carried")
			return
		case err != nil:
			s.end(s.l.ReadEnd(err))
			return
		case n > s.max:
			s.end(websocket.StatusMessageTooBig, "netcode/bridge: datagram over the wire's limit")
			return
		}
		if !s.allow() {
			s.droppedRate.Add(1)
			if held != nil {
				s.h.bufs.Put(held)
			}
			continue
		}
		s.wd.Active()
		_, err = s.udp.Write(buf[:n])
		if held != nil {
			s.h.bufs.Put(held)
		}
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return // ended
			}
			if refused(err) {
				continue // the target's port was closed a moment: UDP loses it
			}
			s.end(websocket.StatusInternalError, "netcode/bridge: wire target unreachable")
			return
		}
		s.toTarget.Add(1)
		s.toTargetBytes.Add(uint64(n))
	}
}

// readWS reads the browser's next WebSocket message into a buffer of
// h.bufs, taken once its header has arrived, so that a session waiting for
// a message holds none: n > s.max means it was longer. The caller returns
// the buffer.
func (s *session) readWS(ws *websocket.Conn) (*[]byte, int, error) {
	typ, r, err := ws.Reader(context.Background())
	if err != nil {
		return nil, 0, err
	}
	if typ != websocket.MessageBinary {
		return nil, 0, wsbridge.ErrText
	}
	b := s.h.bufs.Get().(*[]byte)
	n, err := io.ReadFull(r, (*b)[:s.max+1])
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		err = nil // shorter than the buffer: the whole message
	}
	return b, n, err
}

// down forwards the target's datagrams to the browser until the socket is
// closed (the session ended) or the link fails.
func (s *session) down() {
	defer s.wg.Done()
	buf := make([]byte, s.max+1)
	for {
		n, err := s.udp.Read(buf)
		if err != nil {
			if refused(err) {
				continue
			}
			if !errors.Is(err, net.ErrClosed) {
				s.end(websocket.StatusInternalError, "netcode/bridge: wire socket failed")
			}
			return
		}
		if n > s.max || s.l.CheckWrite(n) != nil {
			s.droppedTooLarge.Add(1)
			continue
		}
		if err := s.wd.Write(s.l, buf[:n]); err != nil {
			if errors.Is(err, wsbridge.ErrTooBig) {
				s.droppedTooLarge.Add(1)
				continue
			}
			s.end(websocket.StatusGoingAway, "netcode/bridge: write to browser failed")
			return
		}
		s.toBrowser.Add(1)
		s.toBrowserBytes.Add(uint64(n))
	}
}

// refused reports whether err is a connected UDP socket's report of an
// ICMP port unreachable: the target's port was closed when a datagram
// arrived. UDP loses the datagram; the session goes on.
func refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }
