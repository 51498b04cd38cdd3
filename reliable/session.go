package reliable

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetcode/netcode/internal/deadline"
	"github.com/gonetcode/netcode/internal/msgconn"
)

// MessageConn is what a Session or a Stream runs over: a connection whose
// Write sends one datagram and whose Read returns one, such as
// *netcode.Conn. Read must accept a buffer of Config.MaxPacketBytes.
type MessageConn interface {
	Read(b []byte) (int, error)
	Write(b []byte) (int, error)
	Close() error
	LocalAddr() net.Addr
	RemoteAddr() net.Addr
}

// conn runs a core over a MessageConn: one goroutine reads datagrams, and
// a timer runs the core's periodic work only when the core has some due
// (nextDue), so an idle connection costs no wake-up. The timer's callback
// runs on a goroutine of its own, only while it fires.
//
// Locks, in order: a Channel's or Stream's readMu or writeMu (one lock per
// direction, serialising that direction's callers); then mu, which guards
// the core and is held only to compute, never across a Write, a wait or a
// log call: the datagrams the core makes under mu gather in pend; then
// wmu, a leaf that guards the write queue; then tmu, a leaf that guards
// the timer.
//
// Datagrams leave in the order the core made them, which is the order of
// their Endpoint sequences: whoever releases mu moves pend to the write
// queue (under wmu, before releasing mu), and writes the queue unless
// another goroutine is already writing it, in which case that one writes
// these too, after its own. Goroutines that each wrote their own batch
// after releasing mu would interleave them on the wire, and the peer
// would see reordering that is not the network's: out-of-order acks at
// once, and chunks declared lost that were only late.
type conn struct {
	mc MessageConn

	mu       sync.Mutex
	c        *core
	pend     *batch        // the core's datagrams while mu is held
	progress chan struct{} // signalled when acks free send slots or data arrives (for Close)

	wmu     sync.Mutex
	wq      *batch // datagrams waiting for the writer, in order
	writing bool   // a goroutine is writing wq out
	spare   *batch // the writer's: the batch it writes, swapped with wq

	// bw is mc's batched write, if it has one (msgconn.BatchWriterOf);
	// ps, the writer's, holds the datagrams of a batch it hands to bw.
	bw msgconn.BatchWriter
	ps [][]byte

	done    chan struct{} // closed when the connection has ended
	endOnce sync.Once
	err     error // why it ended; written before done is closed
	closing atomic.Bool
	wg      sync.WaitGroup // the read loop

	tmu     sync.Mutex
	timer   *time.Timer    // runs fire; nil until first armed
	at      time.Time      // when timer fires; zero if it is not armed
	stopped bool           // set when the connection ends: arm no more
	fires   sync.WaitGroup // fire calls scheduled or running
	wakes   atomic.Uint64  // fire calls that ran the core (tests)
}

// batch is datagrams made under conn.mu, to write after it, in order.
type batch struct {
	buf  []byte
	ends []int
}

func (b *batch) add(p []byte) {
	b.buf = append(b.buf, p...)
	b.ends = append(b.ends, len(b.buf))
}

// addAll appends the datagrams of o.
func (b *batch) addAll(o *batch) {
	base := len(b.buf)
	b.buf = append(b.buf, o.buf...)
	for _, end := range o.ends {
		b.ends = append(b.ends, base+end)
	}
}

func (b *batch) reset() { b.buf, b.ends = b.buf[:0], b.ends[:0] }

func start(mc MessageConn, r *resolved) (*conn, error) {
	// A netcode Conn's read queue holds what the peer may have in flight
	// (a payload per chunk of the windows, and room for acks and
	// unreliable messages), and a dialed one reads the peer's trains
	// coalesced from now on (UDP GRO), a bulk transfer's worth its read
	// buffers.
	msgconn.MarkBulk(mc, r.inFlightPackets())
	cn := &conn{mc: mc, bw: msgconn.BatchWriterOf(mc), done: make(chan struct{}), progress: make(chan struct{}, 1), pend: new(batch), wq: new(batch), spare: new(batch)}
	c, err := newCore(r, time.Now(), func(p []byte) { cn.pend.add(p) })
	if err != nil {
		return nil, err
	}
	c.progress = cn.progress
	cn.c = c
	cn.mu.Lock()
	c.hello()
	cn.unlock()
	cn.wg.Add(1)
	go cn.readLoop()
	return cn, nil
}

// unlock releases mu, then writes the datagrams the core made under it, in
// order after any still queued, and arms the timer for the core's next
// due time.
func (cn *conn) unlock() {
	next := cn.c.nextDue()
	write := false
	if len(cn.pend.ends) > 0 {
		cn.wmu.Lock()
		switch {
		case len(cn.wq.ends) == 0:
			cn.pend, cn.wq = cn.wq, cn.pend
		case len(cn.wq.ends) < maxWriteQueue:
			cn.wq.addAll(cn.pend)
			cn.pend.reset()
		default:
			// The writer is stuck in a Write that does not keep up:
			// these are lost, as a full socket buffer loses them,
			// rather than queued without bound.
			cn.pend.reset()
		}
		write = !cn.writing
		cn.writing = true
		cn.wmu.Unlock()
	}
	cn.mu.Unlock()
	if write {
		cn.writeQueued()
	}
	cn.schedule(next)
}

// writeQueued writes the write queue until it is empty; its caller set
// writing, which makes spare its own.
func (cn *conn) writeQueued() {
	out := cn.spare
	for {
		cn.wmu.Lock()
		if len(cn.wq.ends) == 0 {
			cn.writing = false
			cn.spare = out
			cn.wmu.Unlock()
			return
		}
		out, cn.wq = cn.wq, out
		cn.wmu.Unlock()
		cn.write(out)
		out.reset()
	}
}

// write sends the datagrams of b, in order: in one batched write if the
// message connection has one (a *netcode.Conn seals them and sends each
// train in one system call), else one Write each. A datagram the
// connection refuses is lost, as the network may lose any.
func (cn *conn) write(b *batch) {
	from := 0
	if cn.bw == nil {
		for _, end := range b.ends {
			_, _ = cn.mc.Write(b.buf[from:end])
			from = end
		}
		return
	}
	ps := cn.ps[:0]
	for _, end := range b.ends {
		ps = append(ps, b.buf[from:end])
		from = end
	}
	for rest := ps; len(rest) > 0; {
		n, err := cn.bw.WriteBatch(rest)
		if err == nil || cn.ended() != nil {
			break
		}
		rest = rest[min(n+1, len(rest)):] // skip the one refused
	}
	clear(ps) // no hold on b's buffer
	cn.ps = ps[:0]
}

func (cn *conn) readLoop() {
	defer cn.wg.Done()
	buf := make([]byte, cn.c.cfg.maxPacket)
	for {
		n, err := cn.mc.Read(buf)
		if err != nil {
			cn.end(err)
			return
		}
		cn.mu.Lock()
		cn.c.receive(time.Now(), buf[:n])
		err = cn.c.err
		cn.unlock()
		if err != nil {
			cn.c.cfg.log.Debug("netcode/reliable: ending connection", "peer", cn.mc.RemoteAddr(), "err", err)
			cn.end(err)
			return
		}
	}
}

// fire is the timer's callback: it runs the core's periodic work.
func (cn *conn) fire() {
	defer cn.fires.Done()
	cn.tmu.Lock()
	if !cn.at.After(time.Now()) {
		cn.at = time.Time{} // this is that due time's call
	}
	stopped := cn.stopped
	cn.tmu.Unlock()
	if stopped {
		return
	}
	cn.wakes.Add(1)
	cn.mu.Lock()
	cn.c.tick(time.Now())
	err := cn.c.err
	cn.unlock()
	if err != nil {
		cn.end(err)
	}
}

// schedule makes sure fire runs at next (the zero Time: never). A timer
// armed for no later than next is left alone: when it fires, the core
// tells the real next due time.
func (cn *conn) schedule(next time.Time) {
	if next.IsZero() {
		return
	}
	cn.tmu.Lock()
	defer cn.tmu.Unlock()
	if cn.stopped || (!cn.at.IsZero() && !next.Before(cn.at)) {
		return
	}
	cn.at = next
	d := time.Until(next)
	if cn.timer == nil {
		cn.fires.Add(1)
		cn.timer = time.AfterFunc(d, cn.fire)
		return
	}
	if !cn.timer.Reset(d) {
		cn.fires.Add(1) // a new call, not a moved one
	}
}

// end marks the connection over with err, stops the timer and closes the
// message connection, which stops the read loop.
func (cn *conn) end(err error) {
	cn.endOnce.Do(func() {
		cn.err = err
		close(cn.done)
		cn.tmu.Lock()
		cn.stopped = true
		if cn.timer != nil && cn.timer.Stop() {
			cn.fires.Done() // the call it cancelled
		}
		cn.tmu.Unlock()
		_ = cn.mc.Close()
	})
}

// ended returns why the connection ended, or nil.
func (cn *conn) ended() error {
	select {
	case <-cn.done:
		return cn.err
	default:
		return nil
	}
}

// opErr wraps err as a *net.OpError naming both ends.
func (cn *conn) opErr(op string, err error) error {
	return &net.OpError{Op: op, Net: "reliable", Source: cn.mc.LocalAddr(), Addr: cn.mc.RemoteAddr(), Err: err}
}

// endErr is the error for an operation on a connection that ended with
// err: net.ErrClosed after Close, the ending error otherwise.
func (cn *conn) endErr(op string, err error) error {
	if cn.closing.Load() {
		err = net.ErrClosed
	}
	return cn.opErr(op, err)
}

// wait blocks until ready is signalled, the deadline passes or the
// connection ends; the caller then looks again.
func (cn *conn) wait(ready <-chan struct{}, dl *deadline.Deadline) error {
	select {
	case <-ready:
		return nil
	case <-dl.Wait():
		return os.ErrDeadlineExceeded
	case <-cn.done:
		return nil
	}
}

// close waits up to the linger time for every reliable channel to have
// everything acknowledged (after queuing a FIN on streams), then ends the
// connection and waits for its goroutines.
func (cn *conn) close(fin bool) error {
	if !cn.closing.CompareAndSwap(false, true) {
		return cn.opErr("close", net.ErrClosed)
	}
	timer := time.NewTimer(cn.c.cfg.linger)
	defer timer.Stop()
	for first := true; ; first = false {
		cn.mu.Lock()
		if first {
			for _, i := range cn.c.rel {
				cn.c.chans[i].snd.finWanted = fin
			}
			cn.c.flush()
		}
		idle := true
		for _, i := range cn.c.rel {
			cs := &cn.c.chans[i]
			// Once the peer has ended its stream it needs no ack of our
			// FIN, and may have closed already: the data is enough.
			idle = idle && (cs.snd.idle() || cs.rcv.finReady && cs.snd.dataAcked())
		}
		cn.unlock()
		if idle {
			break
		}
		select {
		case <-cn.progress:
			continue
		case <-timer.C:
		case <-cn.done:
		}
		break
	}
	// The peer may be waiting for an ack of what it sent last.
	cn.mu.Lock()
	if cn.c.recvSinceSend > 0 {
		cn.c.ackNow = true
		cn.c.setTime(time.Now())
		cn.c.flush()
	}
	cn.unlock()
	cn.end(net.ErrClosed)
	cn.wg.Wait()
	cn.fires.Wait()
	return nil
}

// Session carries message channels over a MessageConn: see ChannelKind.
// Both ends must be made with the same channels. Its methods and its
// channels' are safe for concurrent use.
type Session struct {
	cn    *conn
	chans []*Channel
}

// NewSession starts a session over mc, which it owns from now on.
func NewSession(mc MessageConn, cfg *Config) (*Session, error) {
	r, err := cfg.resolve(false)
	if err != nil {
		return nil, err
	}
	cn, err := start(mc, r)
	if err != nil {
		return nil, err
	}
	s := &Session{cn: cn}
	for i := range r.chans {
		s.chans = append(s.chans, &Channel{cn: cn, i: i})
	}
	return s, nil
}

// Channel returns channel i, in the order of Config.Channels; nil if there
// is no such channel.
func (s *Session) Channel(i int) *Channel {
	if i < 0 || i >= len(s.chans) {
		return nil
	}
	return s.chans[i]
}

// Close waits until the peer has acknowledged every reliable message
// sent, at most Config.Linger, then closes the message connection. Calls
// blocked or made later fail with net.ErrClosed.
func (s *Session) Close() error {
	for _, ch := range s.chans {
		ch.rd.Stop()
		ch.wd.Stop()
	}
	return s.cn.close(false)
}

// Done is closed when the session has ended: Close, the message
// connection's end, or an error of the peer (Err says which).
func (s *Session) Done() <-chan struct{} { return s.cn.done }

// Err returns why the session ended, or nil while it runs.
func (s *Session) Err() error { return s.cn.ended() }

// LocalAddr returns the message connection's local address.
func (s *Session) LocalAddr() net.Addr { return s.cn.mc.LocalAddr() }

// RemoteAddr returns the message connection's remote address.
func (s *Session) RemoteAddr() net.Addr { return s.cn.mc.RemoteAddr() }

// Stats returns the session's figures.
func (s *Session) Stats() SessionStats {
	s.cn.mu.Lock()
	defer s.cn.unlock()
	return s.cn.c.sessionStats()
}

// Channel is one channel of a Session.
type Channel struct {
	cn *conn
	i  int
	// readMu and writeMu serialise Receives and Sends, so that one waiter
	// at a time uses the channel's signals; each is taken before conn.mu.
	readMu  sync.Mutex
	writeMu sync.Mutex
	rd, wd  deadline.Deadline
}

// SetReadDeadline sets when a blocked Receive gives up with an error
// wrapping os.ErrDeadlineExceeded; zero means never.
func (ch *Channel) SetReadDeadline(t time.Time) error {
	ch.rd.Set(t)
	return nil
}

// SetWriteDeadline sets when a blocked reliable Send gives up with an
// error wrapping os.ErrDeadlineExceeded; zero means never.
func (ch *Channel) SetWriteDeadline(t time.Time) error {
	ch.wd.Set(t)
	return nil
}

// Send sends one message.
//
// On a reliable-ordered channel, the message is queued whole, to be
// delivered exactly once and in order. Send blocks while the channel's
// send buffer (SendBuffer bytes) has no room for it, until the write
// deadline: this is the backpressure of a peer slower than the sender. On
// timeout nothing of the message was queued.
//
// On an unreliable channel Send never blocks: it fails with
// ErrSendQueueFull when Queue messages, or QueueBytes, are waiting to go.
func (ch *Channel) Send(msg []byte) error {
	cn := ch.cn
	cs := &cn.c.chans[ch.i]
	if len(msg) > cs.spec.maxMessage {
		return cn.opErr("send", fmt.Errorf("%w: %d bytes, channel %d takes %d", ErrMessageTooLarge, len(msg), ch.i, cs.spec.maxMessage))
	}
	if cs.spec.kind == Unreliable {
		cn.mu.Lock()
		defer cn.unlock()
		if err := cn.ended(); err != nil || cn.closing.Load() {
			return cn.endErr("send", err)
		}
		if !cs.usnd.push(msg) {
			return cn.opErr("send", ErrSendQueueFull)
		}
		cn.c.setTime(time.Now())
		cn.c.flush()
		return nil
	}
	ch.writeMu.Lock()
	defer ch.writeMu.Unlock()
	var hdr [messageLenBytes]byte
	binary.LittleEndian.PutUint32(hdr[:], uint32(len(msg)))
	for {
		if ch.wd.Expired() {
			return cn.opErr("send", os.ErrDeadlineExceeded)
		}
		cn.mu.Lock()
		if err := cn.ended(); err != nil || cn.closing.Load() {
			cn.unlock()
			return cn.endErr("send", err)
		}
		if cs.snd.room() >= len(hdr)+len(msg) {
			cs.snd.write(hdr[:], msg)
			cn.c.setTime(time.Now())
			cn.c.flush()
			cn.unlock()
			return nil
		}
		cs.snd.waitRoom(len(hdr)+len(msg), false)
		cn.unlock()
		if err := cn.wait(cs.writable, &ch.wd); err != nil {
			return cn.opErr("send", err)
		}
	}
}

// Receive reads the next message into b and returns its length. If b is
// too short, Receive fails with io.ErrShortBuffer and the message stays
// for the next call. It blocks until a message arrives, the read deadline
// passes, or the session ends.
func (ch *Channel) Receive(b []byte) (int, error) {
	cn := ch.cn
	cs := &cn.c.chans[ch.i]
	ch.readMu.Lock()
	defer ch.readMu.Unlock()
	for {
		if ch.rd.Expired() {
			return 0, cn.opErr("receive", os.ErrDeadlineExceeded)
		}
		cn.mu.Lock()
		n, ok, err := ch.take(cs, b)
		if ok || err != nil {
			fatal := cn.c.err
			cn.unlock()
			if fatal != nil {
				cn.end(fatal) // closes the message connection: not under mu
			}
			if err != nil {
				return 0, cn.opErr("receive", err)
			}
			return n, nil
		}
		if err := cn.ended(); err != nil || cn.closing.Load() {
			cn.unlock()
			return 0, cn.endErr("receive", err)
		}
		cn.unlock()
		if err := cn.wait(cs.readable, &ch.rd); err != nil {
			return 0, cn.opErr("receive", err)
		}
	}
}

// take takes a whole received message if there is one; called under mu.
func (ch *Channel) take(cs *chanState, b []byte) (int, bool, error) {
	if cs.spec.kind == Unreliable {
		if cs.urcv.size == 0 {
			return 0, false, nil
		}
		m := cs.urcv.peek()
		if len(b) < len(m) {
			return 0, false, io.ErrShortBuffer
		}
		cs.urcv.pop()
		return copy(b, m), true, nil
	}
	r := &cs.rcv
	if r.msgLen < 0 {
		if r.ready < messageLenBytes {
			return 0, false, nil
		}
		var hdr [messageLenBytes]byte
		r.read(hdr[:], true)
		r.msgLen = int(binary.LittleEndian.Uint32(hdr[:]))
		if r.msgLen > cs.spec.maxMessage {
			ch.cn.c.fail(fmt.Errorf("%w: a %d-byte message on channel %d", ErrProtocol, r.msgLen, ch.i))
			return 0, false, ch.cn.c.err // the caller ends the connection
		}
	}
	if r.ready < r.msgLen {
		return 0, false, nil
	}
	if len(b) < r.msgLen {
		return 0, false, io.ErrShortBuffer
	}
	n := r.read(b[:r.msgLen], true)
	r.msgLen = -1
	if r.advertise || r.tuneDue() {
		ch.cn.c.readDone(time.Now(), r)
	}
	return n, true, nil
}

// ErrWriteClosed is the error of a Stream's Write after CloseWrite.
var ErrWriteClosed = errors.New("netcode/reliable: write after CloseWrite")
