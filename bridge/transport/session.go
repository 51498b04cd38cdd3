package transport

import (
	"errors"
	"github.com/gonetcode/netcode/bridge/internal/wsbridge"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/gonetcode/netcode/internal/packetq"
	dgram "github.com/gonetcode/netcode/internal/transport"
)

// serve runs the session until it ends: it reads the peer, and its writer
// writes to it.
func (s *muxSession) serve(remote string) {
	m := s.m
	start := time.Now()
	m.log.Debug("netcode/bridge: transport session start", "remote", remote, "addr", s.addr)
	s.wd.Run(s.watch)
	go s.writer()
	s.readLoop()
	s.end(websocket.StatusNormalClosure, "")
	<-s.writerDone
	s.wd.Stop()
	s.out.Close() // frees what the writer left
	m.mu.Lock()
	delete(m.sessions, s.addr)
	m.sessDropped.Add(s.out.Dropped())
	m.mu.Unlock()
	m.log.Debug("netcode/bridge: transport session end", "remote", remote, "addr", s.addr,
		"code", int(s.code), "reason", s.reason, "duration", time.Since(start))
}

// errSessionEnded ends a session's send queue: its writer writes what is
// queued, then closes the WebSocket.
var errSessionEnded = errors.New("netcode/bridge: session ended")

// muxSession is one WebSocket peer of a Mux.
type muxSession struct {
	m    *Mux
	link wsbridge.Link // a WebSocket or a WebTransport session
	addr netip.AddrPort
	out  *packetq.Queue // datagrams for the peer; ended when the session ends
	wd   *wsbridge.Watchdog

	endOnce    sync.Once
	code       websocket.StatusCode
	reason     string // code and reason are written before out is ended
	writerDone chan struct{}

	endedAt atomic.Int64 // wd.Now() + 1 of the end; 0 while running
	queued  atomic.Int32 // datagrams of the session in the Mux's read queue

	// The write turn: held by the writer while it writes, and by a send
	// that writes its datagram itself (direct), so that the link's
	// writes never overlap and queued datagrams are never overtaken.
	wmu    sync.Mutex
	kick   chan struct{}       // capacity 1: something is queued or left for the writer
	direct wsbridge.DirectLink // link, where it can write without blocking; nil otherwise
	wakes  atomic.Uint64       // the writer's wake-ups, for the tests
}

// end ends the session once, recording why; the writer then writes what is
// queued and closes the WebSocket with code and reason, all within
// wsbridge.MuxEndGrace: the connection's deadline bounds them (and the watchdog
// cuts the connection if that did not do).
func (s *muxSession) end(code websocket.StatusCode, reason string) {
	s.endOnce.Do(func() {
		s.code, s.reason = code, reason
		s.endedAt.Store(s.wd.Now() + 1)
		s.link.CloseBy(time.Now().Add(wsbridge.MuxEndGrace))
		s.out.End(errSessionEnded)
	})
}

// send writes p to the peer: at once, from the caller's goroutine, when
// direct allows it, nothing is queued, the writer is idle and the link can write without
// blocking (what its connection does not take at once is left to the
// writer); otherwise it queues a copy for the writer, or drops it
// (counted) if the queue is full. After the end it is refused. The
// direct write spares the writer's wake-up and the queue's copy; it never
// blocks, so a browser that does not read still never holds up the
// server.
func (s *muxSession) send(p []byte, direct bool) {
	if direct && s.direct != nil && s.endedAt.Load() == 0 && s.out.Len() == 0 && s.wmu.TryLock() {
		// Nothing queued and the turn taken: nothing queued can be
		// overtaken (the writer takes the turn before it reads the
		// queue, and holds it until it has written what it read).
		if s.out.Len() == 0 {
			ok, left, err := s.direct.TryWrite(p)
			s.wmu.Unlock()
			switch {
			case !ok:
			case err != nil:
				s.end(websocket.StatusGoingAway, "netcode/bridge: write failed")
				return
			default:
				s.wd.Active()
				if left {
					signal(s.kick) // the writer sends the rest
				}
				return
			}
		} else {
			s.wmu.Unlock()
		}
	}
	if s.out.Push(netip.AddrPort{}, p) {
		signal(s.kick)
	}
}

// signal makes a non-blocking send on c (capacity 1).
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// writer writes the queued datagrams to the WebSocket until the session
// ends, then the rest of the queue, then closes the WebSocket. When several
// are queued, their messages go out together, in one write to the
// connection (up to wsbridge.BatchBytes). It writes in the write turn,
// which it takes once woken (by send, or the end), and sends first what a
// direct write left.
func (s *muxSession) writer() {
	defer close(s.writerDone)
	defer s.link.Release()
	buf := make([]byte, maxMessage)
	for {
		select {
		case <-s.kick:
		case <-s.out.Done():
		}
		s.wakes.Add(1)
		s.wmu.Lock()
		ok := s.drain(buf)
		s.wmu.Unlock()
		if !ok {
			break
		}
	}
	s.wmu.Lock() // a send writing now finishes first
	s.link.Close(s.code, s.reason)
	s.wmu.Unlock()
}

// drain writes what a direct write left, then what is queued, in the
// write turn. It reports false once the session has ended and the queue
// is drained, or a write failed: code and reason are set.
func (s *muxSession) drain(buf []byte) bool {
	if err := s.wd.Flush(s.link); err != nil {
		s.end(websocket.StatusGoingAway, "netcode/bridge: write failed")
		return false
	}
	for s.out.Len() > 0 {
		if !s.writeBatch(buf) {
			return false
		}
	}
	return s.out.Err() == nil
}

// writeBatch reads a queued datagram and writes it with the others queued
// behind it. It reports false once the session has ended and the queue is
// drained, or a write failed: code and reason are set.
func (s *muxSession) writeBatch(buf []byte) bool {
	n, _, err := s.out.Read(buf)
	if err != nil {
		return false
	}
	if s.out.Len() == 0 {
		return s.write(buf[:n])
	}
	s.link.Hold()
	ok := s.write(buf[:n])
	for ok && s.out.Len() > 0 {
		// Only this goroutine reads: what Len counts is there.
		if n, _, err = s.out.Read(buf); err != nil {
			break
		}
		ok = s.write(buf[:n])
	}
	if err := s.wd.Flush(s.link); err != nil && ok {
		s.end(websocket.StatusGoingAway, "netcode/bridge: write failed")
		return false
	}
	return ok
}

// write writes one datagram; it reports false (having ended the session)
// if that failed. A datagram written counts as activity for the idle
// timeout.
func (s *muxSession) write(p []byte) bool {
	if err := s.wd.Write(s.link, p); err != nil {
		s.end(websocket.StatusGoingAway, "netcode/bridge: write failed")
		return false
	}
	return true
}

// readLoop feeds the peer's messages to the Mux's read queue, or to its
// sink, the netcode Listener's, which acts on each at once, until reading
// fails or the session ends.
func (s *muxSession) readLoop() {
	buf := make([]byte, maxMessage+1)
	ms := make([]dgram.Message, 1)
	for {
		n, err := s.link.Read(buf)
		if err != nil && err != wsbridge.ErrText {
			s.end(s.link.ReadEnd(err))
			return
		}
		switch {
		case err != nil:
			s.end(websocket.StatusUnsupportedData, "netcode/bridge: only binary messages are accepted")
			return
		case n == 0:
			continue // not a datagram, and not activity either
		case n > maxMessage:
			s.end(websocket.StatusMessageTooBig, "netcode/bridge: message larger than 1300 bytes")
			return
		}
		s.wd.Active()
		select {
		case <-s.out.Done():
			return
		default:
		}
		if sink := s.m.sink.Load(); sink != nil {
			ms[0] = dgram.Message{Buf: buf[:n], Addr: s.addr}
			(*sink)(ms)
			continue
		}
		if s.queued.Load() >= muxSessionShare {
			s.m.overShare.Add(1)
			continue
		}
		if s.m.q.Push(s.addr, buf[:n]) {
			s.queued.Add(1)
		}
	}
}

// watch applies the idle and write timeouts, and cuts the connection of a
// session that ended more than wsbridge.MuxEndGrace ago but is still writing or
// closing. It runs every period from the session's watchdog until the
// session is gone, so that Close, which waits for every session, cannot
// wait forever.
func (s *muxSession) watch(now int64) bool {
	if e := s.endedAt.Load(); e != 0 {
		if now-(e-1) >= int64(wsbridge.MuxEndGrace) {
			// Ended long ago and still writing or closing: the writer
			// and the reader return once the connection is gone. (Not
			// CloseNow, which waits for a Close in progress.)
			s.link.Cut()
		}
	} else if s.wd.IdleFor(now) {
		s.end(wsbridge.CodeIdleTimeout, "netcode/bridge: idle timeout")
	}
	if s.wd.Stalled(now) {
		// The peer does not read: no close handshake is possible.
		s.link.Cut()
		s.end(websocket.StatusGoingAway, "netcode/bridge: write timeout")
	}
	return true
}
