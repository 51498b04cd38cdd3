package webtransport

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/quic-go/quic-go"
	wt "github.com/quic-go/webtransport-go"

	"github.com/gonetcode/netcode/bridge/internal/wsbridge"
	"github.com/gonetcode/netcode/internal/monoclock"
	"github.com/gonetcode/netcode/token"
)

// link is a WebTransport session as a session of the relay or of a Mux
// sees it (a wsbridge.RelayLink): datagrams in both directions; for the
// relay, the connect token and the "connected" message on the one
// bidirectional stream the client opens first.
type link struct {
	sess *wt.Session
	conn *quic.Conn
	ctx  context.Context // the session's: done once it has ended

	// read is Read's context, done once the link's Close or Cut has
	// ended it (stopRead), so that no read outlives the link. It is not
	// the session's: quic-go's ReceiveDatagram looks at its context
	// before its queue, and the session's would drop the datagrams still
	// queued as the session ended (a client's disconnect packets, sent
	// just before it closes).
	read     context.Context
	stopRead context.CancelFunc

	stream *wt.Stream // the relay's token stream, once accepted (by ReadToken only)

	deadline atomic.Int64 // CloseBy's bound (internal/monoclock); 0 before
	max      maxSize

	// page is set for a browser's session (its CONNECT had an Origin):
	// Close tells it the code and reason on a stream first (see tell).
	page bool
}

func newLink(sess *wt.Session, conn *quic.Conn) *link {
	l := &link{sess: sess, conn: conn, ctx: sess.Context()}
	l.read, l.stopRead = context.WithCancel(context.Background())
	l.max.init(sess.SendDatagram, monoclock.Now())
	return l
}

var _ wsbridge.RelayLink = (*link)(nil)

// Read implements wsbridge.Link: one datagram. quic-go hands over each
// datagram in a buffer of its own; Read copies it into buf.
//
// The datagrams that reached the session before it ended are all read,
// in order, and then the end: once the session has ended, however it
// ended (a side closed it, or its connection is gone), quic-go's queue of
// its datagrams (32 at most) takes no more, and ReceiveDatagram returns
// what the queue still holds before that end's error. A Read waits while
// the session lasts, or until the link's Close or Cut.
func (l *link) Read(buf []byte) (int, error) {
	p, err := l.sess.ReceiveDatagram(l.read)
	if err != nil {
		return 0, err
	}
	return copy(buf, p), nil
}

// ReadToken implements wsbridge.RelayLink: the first len(buf)-1 bytes
// (token.ConnectTokenBytes) of the first bidirectional stream the client
// opens. A stream that ends before gives fewer.
func (l *link) ReadToken(buf []byte) (int, error) {
	str, err := l.sess.AcceptStream(l.ctx)
	if err != nil {
		return 0, err
	}
	l.stream = str
	n, err := io.ReadFull(str, buf[:min(len(buf), token.ConnectTokenBytes)])
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		err = nil // short: an invalid token
	}
	return n, err
}

// WriteText implements wsbridge.RelayLink: the message, then the end of
// the stream.
func (l *link) WriteText(p []byte) error {
	if _, err := l.stream.Write(p); err != nil {
		return err
	}
	return l.stream.Close()
}

// Write implements wsbridge.Link: one datagram.
func (l *link) Write(p []byte) error {
	err := l.sess.SendDatagram(p)
	if err != nil {
		if m, ok := l.max.tooLarge(err); ok {
			return wsbridge.TooBig(len(p), m)
		}
	}
	return err
}

// CheckWrite implements wsbridge.Link.
func (l *link) CheckWrite(n int) error { return l.max.check(n, monoclock.Now) }

// Hold implements wsbridge.Link: datagrams go alone.
func (l *link) Hold() {}

// Flush implements wsbridge.Link.
func (l *link) Flush() error { return nil }

// Release implements wsbridge.Link.
func (l *link) Release() {}

// ReadEnd implements wsbridge.Link: a session the client closed ends with
// its code and reason (0, WebTransport's default, is 1000). Read's error
// is that of the session's queue, which does not carry them: the session
// says them once it has ended.
func (l *link) ReadEnd(err error) (websocket.StatusCode, string) {
	if l.ctx.Err() != nil {
		// Ended: its stream maps return why at once, and hold no
		// stream to take.
		if _, e := l.sess.AcceptUniStream(l.ctx); e != nil {
			if _, ok := errors.AsType[*wt.SessionError](e); ok {
				err = e
			}
		}
	}
	return endOf(err)
}

// sessionEnd waits for sess to end and returns why: a *wt.SessionError
// if a side closed it. (The session's reads fail with io.EOF as its
// CONNECT stream ends; the session's context is cancelled without a
// cause; the reason is what its stream maps return once it has ended.)
func sessionEnd(sess *wt.Session) error {
	<-sess.Context().Done()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err := sess.AcceptStream(ctx)
	return err
}

// endOf is the close code and reason of a session whose read failed with
// err, on either side.
func endOf(err error) (websocket.StatusCode, string) {
	if se, ok := errors.AsType[*wt.SessionError](err); ok {
		code := websocket.StatusCode(se.ErrorCode)
		if code == 0 {
			code = websocket.StatusNormalClosure
		}
		return code, se.Message
	}
	if ae, ok := errors.AsType[*quic.ApplicationError](err); ok && ae.Remote {
		return websocket.StatusNormalClosure, ""
	}
	return websocket.StatusGoingAway, "netcode/bridge: connection lost"
}

// CloseBy implements wsbridge.Link.
func (l *link) CloseBy(t time.Time) { l.deadline.Store(monoclock.Of(t)) }

// closeBound is when Close stops waiting: CloseBy's bound, or
// CloseTimeout from now. Either is measured on the monotonic clock.
func (l *link) closeBound() time.Time {
	if t := l.deadline.Load(); t != 0 {
		return monoclock.Time(t)
	}
	return time.Now().Add(wsbridge.CloseTimeout)
}

// Close implements wsbridge.Link: it closes the session with code and
// reason (a WebTransport CLOSE_SESSION capsule), then waits for the client
// to close the QUIC connection, as browsers and Dial do once the session
// is closed, until CloseBy's bound (or CloseTimeout), after which it
// closes the connection itself.
func (l *link) Close(code websocket.StatusCode, reason string) {
	if len(reason) > maxReason {
		reason = reason[:maxReason]
	}
	bound := l.closeBound()
	if l.page {
		l.tell(code, reason, bound)
	}
	_ = l.sess.CloseWithError(wt.SessionErrorCode(code), reason)
	if d := time.Until(bound); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-l.conn.Context().Done():
		case <-t.C:
		}
		t.Stop()
	}
	_ = l.conn.CloseWithError(0, "")
	l.stopRead()
}

// tell sends a page the close code and reason in a message of its own, on
// a unidirectional stream ({"type":"closed","code":4003,"reason":"..."}),
// and waits until the page closes the session (netcode.js does, with that
// code and reason, once it has read them) or bound passes. A browser does
// not see them in the CLOSE_WEBTRANSPORT_SESSION capsule alone:
// webtransport-go sends STOP_SENDING on the CONNECT stream ahead of it,
// and Chromium then reports the session as lost, without the code
// (measured with Chromium 156 and webtransport-go v0.13.0; its issue 242).
func (l *link) tell(code websocket.StatusCode, reason string, bound time.Time) {
	str, err := l.sess.OpenUniStream()
	if err != nil {
		return // ended, or out of streams: the capsule alone
	}
	msg, _ := json.Marshal(struct {
		Type   string `json:"type"`
		Code   int    `json:"code"`
		Reason string `json:"reason"`
	}{"closed", int(code), reason})
	_ = str.SetWriteDeadline(bound)
	if _, err := str.Write(append(msg, '\n')); err != nil {
		str.CancelWrite(0)
		return
	}
	_ = str.Close()
	if d := time.Until(bound); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-l.ctx.Done():
		case <-l.conn.Context().Done():
		case <-t.C:
		}
		t.Stop()
	}
}

// Cut implements wsbridge.Link: it closes the QUIC connection at once.
func (l *link) Cut() {
	_ = l.conn.CloseWithError(codeCut, "netcode/bridge: connection cut")
	l.stopRead()
}

// codeCut is the QUIC application error code of a connection the bridge
// cut (its client did not read, or did not end its session in time).
const codeCut quic.ApplicationErrorCode = 0x10c

// maxReason is the longest reason a CLOSE_WEBTRANSPORT_SESSION capsule
// carries.
const maxReason = 1024

// maxSize tracks the largest datagram payload a session can send: quic-go
// says it only by refusing a larger one (quic.DatagramTooLargeError,
// which sends nothing), so maxSize learns it from a probe, at the start
// and again, at most once a probeEvery, when a payload is larger than it
// last said (it grows once path MTU discovery finds a larger MTU).
type maxSize struct {
	send     func([]byte) error
	max      atomic.Int64
	probedAt atomic.Int64 // internal/monoclock
}

// probeEvery is how often a session's datagram limit is probed at most.
const probeEvery = time.Second

// probe is larger than any DATAGRAM frame quic-go accepts (16,383
// bytes): sending it never sends anything, and the error says the limit.
var probe [16 << 10]byte

// prefixBytes is what HTTP/3 prepends to a datagram (the session's
// quarter stream ID, a variable-length integer): 2 bytes for the first
// 16,384 request streams of a connection, which it does not tell; counted
// as 2, a payload may be a byte short of what would fit.
const prefixBytes = 2

// init starts m with a probe at now (an internal/monoclock instant, as
// every time of maxSize's).
func (m *maxSize) init(send func([]byte) error, now int64) {
	m.send = send
	m.reprobe(now)
}

func (m *maxSize) reprobe(now int64) {
	m.probedAt.Store(now)
	if _, ok := m.tooLarge(m.send(probe[:])); !ok {
		m.max.CompareAndSwap(0, int64(minDatagram)) // closed already
	}
}

// tooLarge records the limit if err says the datagram was too large.
func (m *maxSize) tooLarge(err error) (int, bool) {
	if e, ok := errors.AsType[*quic.DatagramTooLargeError](err); ok {
		n := max(int(e.MaxDatagramPayloadSize)-prefixBytes, 0)
		m.max.Store(int64(n))
		return n, true
	}
	return 0, false
}

// check reports a *wsbridge.TooBigError if an n-byte payload is over the
// limit.
func (m *maxSize) check(n int, now func() int64) error {
	if int64(n) <= m.max.Load() {
		return nil
	}
	if t := now(); t-m.probedAt.Load() >= int64(probeEvery) {
		m.reprobe(t)
		if int64(n) <= m.max.Load() {
			return nil
		}
	}
	return wsbridge.TooBig(n, int(m.max.Load()))
}

// current returns the limit, probed again if the last probe is older than
// probeEvery.
func (m *maxSize) current(now int64) int {
	if now-m.probedAt.Load() >= int64(probeEvery) {
		m.reprobe(now)
	}
	return int(m.max.Load())
}

// minDatagram is the datagram payload every QUIC path carries: quic-go's
// smallest packet, 1,200 bytes, less the 37 bytes quic-go reserves for its
// header, tag and DATAGRAM frame (counting a 20-byte connection ID), less
// the HTTP/3 prefix.
const minDatagram = 1200 - 37 - prefixBytes
