package engine

import (
	"errors"
	"os"
	"sync/atomic"
	"time"

	"github.com/gonetcode/netcode/internal/transport"
)

// Role is how a socket's datagrams map to connections: the one thing in
// which a server's socket and a client's differ to the engine.
type Role int

const (
	// Many is a Listener's socket: many peers, told apart by address.
	// Its read turn goes to a Read only while one Read waits and the
	// last batch came from one peer, its pulls are bounded by pullBound
	// (a peer's timeout does not wake a read of the socket), and its
	// reader holds the socket between batches where the kernel allows
	// (transport.ReadLoopOwned).
	Many Role = iota
	// One is a dialed Conn's socket: one peer.
	One
)

// pullBound bounds a pulling Read's wait on a Many socket: past it the
// Read looks again at whether its Conn has ended (a peer's timeout, which
// the ticker applies, does not wake a read of the socket). The socket's
// deadline is moved only once less than half of it is left, so that a
// busy Conn does not move a timer per payload.
const pullBound = 200 * time.Millisecond

// Receiver is a dialect's binding to a socket: it acts on a batch of
// datagrams read (or pushed), in the socket's read turn: hands each to
// its I/O-free core and carries out the core's Output.
type Receiver interface {
	Receive(ms []transport.Message)
}

// Socket is one socket's read side: its reader goroutine's loop (Run),
// its read turn, and the pulling Reads of its Conns (Reader), which read
// it themselves when they find nothing queued and the turn free, so that
// a payload reaches its Read on the goroutine that read it, with no
// hand-off.
//
// The read turn (rt) goes with ms, the Receiver's state, and the socket's
// read deadline: a Read that pulls reads with its Conn's read deadline
// (bounded by pullBound on a Many socket; moved by SetReadDeadline under
// dmu while it waits), the reader with none. Lock order: the read turn →
// the binding's locks (a Conn's write turn, the core's); dmu is a leaf.
type Socket struct {
	conn transport.Conn
	role Role
	recv Receiver
	stop <-chan struct{} // closed when the socket's owner closes
	rt   *readTurn

	ms []transport.Message // the read buffers; used in the read turn
	// onePeer: the last batch read came from one address (Many). Only
	// then may the turn go to a Read: with several peers sending, a Read
	// that reads the socket would mostly hand other Conns' payloads
	// over, as the reader does, in smaller batches. Used in the turn.
	onePeer bool

	noPull atomic.Bool // the socket has no read deadline, or pushes: only the reader reads it
	dmu    leafMutex
	sockDL time.Time // the socket's read deadline; guarded by dmu
	puller *Reader   // the Reader whose Read reads the socket, if any; guarded by dmu
}

// NewSocket returns the read side of conn for a role, reading batch
// datagrams at a time and handing them to recv; stop is closed when the
// owner closes (the reader then ends, and no Read pulls any more).
func NewSocket(conn transport.Conn, role Role, batch int, recv Receiver, stop <-chan struct{}) *Socket {
	return &Socket{
		conn:    conn,
		role:    role,
		recv:    recv,
		stop:    stop,
		rt:      newReadTurn(role == Many, conn),
		ms:      transport.NewMessages(batch),
		onePeer: true,
	}
}

// Conn returns the socket.
func (s *Socket) Conn() transport.Conn { return s.conn }

// NoPull makes the reader the socket's only reader: its datagrams come
// pushed (transport.Pusher), and a pulling Read would wait there while
// its payload came another way.
func (s *Socket) NoPull() { s.noPull.Store(true) }

// Run is the reader goroutine's loop: it reads the socket while no Read
// does, until stop or the socket's Close, and hands each batch to the
// Receiver. It returns with the read turn held, so that no Read reads the
// socket after it, and with the error that ended it if the socket failed
// for good (onError is given the transient ones, which it retries).
func (s *Socket) Run(onError func(error)) error {
	if !s.rt.take(s.stop) {
		return nil
	}
	s.readerDeadline()
	return transport.ReadLoopTurns(s.conn, s.ms, s.stop, s.receive, onError, socketTurn{s}, s.role == Many)
}

// socketTurn is a socket's read turn as the reader's loop sees it.
type socketTurn struct{ s *Socket }

func (t socketTurn) Wanted() bool {
	s := t.s
	return (s.role == One || s.onePeer) && s.rt.wanted() && !s.noPull.Load()
}

func (t socketTurn) Yield() {
	if t.s.rt.yield(t.s.stop) {
		t.s.readerDeadline()
	}
}

// receive hands ms to the Receiver, in the read turn.
func (s *Socket) receive(ms []transport.Message) {
	if s.role == Many {
		s.onePeer = fromOnePeer(ms)
	}
	checkBinding(rankReadTurn)
	s.recv.Receive(ms)
}

// fromOnePeer reports whether ms all came from one address.
func fromOnePeer(ms []transport.Message) bool {
	for i := 1; i < len(ms); i++ {
		if ms[i].Addr != ms[0].Addr {
			return false
		}
	}
	return true
}

// readerDeadline clears the socket's read deadline that a Read's pull
// left, for the reader, which has just taken the read turn.
func (s *Socket) readerDeadline() {
	s.dmu.Lock()
	if !s.sockDL.IsZero() {
		_ = s.conn.SetReadDeadline(time.Time{})
		s.sockDL = time.Time{}
	}
	s.dmu.Unlock()
}

// pullDeadline is the socket's read deadline for a Read whose Conn's read
// deadline is rdl: rdl on a One socket; on a Many one, rdl or pullBound
// from now if that is sooner, a deadline already set being kept while
// more than half of pullBound is left. s.dmu is held.
//
// It reads the clock only on a Many socket, and there only the monotonic
// clock (time.Until) unless the deadline moves: this runs at every pull,
// once per payload at one payload in flight, where time.Now's two clock
// reads (the wall clock and the monotonic one) were a tenth of the
// library's clock reads per echo.
func (s *Socket) pullDeadline(rdl time.Time) time.Time {
	if s.role == One {
		return rdl
	}
	if !rdl.IsZero() && time.Until(rdl) <= pullBound {
		return rdl
	}
	if cur := s.sockDL; !cur.IsZero() && (rdl.IsZero() || !cur.After(rdl)) {
		if left := time.Until(cur); left > pullBound/2 && left <= pullBound {
			return cur
		}
	}
	return time.Now().Add(pullBound)
}

// Reader is one Conn's reads of a socket: it is the msgconn.Puller of the
// Conn's endpoint. Queued tells how many payloads wait in the Conn's read
// queue; done, if set, is closed when the Conn ends; Before, if set, runs
// at the start of every Pull (a dialed Conn sends its held Writes before
// its Read waits).
type Reader struct {
	s      *Socket
	queued func() int
	done   <-chan struct{}
	before func()
	rdl    time.Time // the Conn's read deadline; guarded by s.dmu
}

// NewReader returns the reads of s by a Conn whose read queue holds
// queued() payloads and whose end closes done; done and before may be
// nil. A pull on a Many socket that finds done closed when it ends (the
// datagram it read ended its Conn, or the Conn was closed meanwhile)
// gives the turn back to the reader at once: no Read of that Conn comes
// back within the grace, and other peers' datagrams may be waiting.
func (s *Socket) NewReader(queued func() int, done <-chan struct{}, before func()) *Reader {
	return &Reader{s: s, queued: queued, done: done, before: before}
}

// ended reports whether the Reader's Conn has ended.
func (r *Reader) ended() bool {
	if r.done == nil {
		return false
	}
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// Pull is msgconn.Puller's: a Read reads the socket itself if the read
// turn is free and nothing is queued. It reports true when the Read should
// look at its queue again, and os.ErrDeadlineExceeded once the Read's own
// deadline has passed.
func (r *Reader) Pull() (bool, error) {
	if r.before != nil {
		r.before()
	}
	s := r.s
	if s.noPull.Load() || !s.rt.tryTake() {
		return false, nil
	}
	select {
	case <-s.stop: // the socket is closed or closing: the queue ends
		s.rt.release(false)
		return false, nil
	default:
	}
	if r.queued() > 0 {
		// A payload was queued after this Read looked and before the
		// turn was free: read it first.
		s.rt.release(false)
		return true, nil
	}
	if s.role == Many {
		return r.pullMany()
	}
	return r.pullOne()
}

// pullMany and pullOne are pull on a Many socket and on a One socket: the
// role shows in the Read's stack (and its profile), which tells a
// server Conn's pull from a dialed Conn's.
func (r *Reader) pullMany() (bool, error) { return r.pull() }
func (r *Reader) pullOne() (bool, error)  { return r.pull() }

// pull reads the socket, in the read turn, with the Reader's deadline,
// acts on what it read, and gives the turn up.
func (r *Reader) pull() (bool, error) {
	s := r.s
	s.dmu.Lock()
	if dl := s.pullDeadline(r.rdl); !dl.Equal(s.sockDL) {
		if err := s.conn.SetReadDeadline(dl); err != nil {
			// A caller's transport without read deadlines: a Read
			// cannot wait on it, the reader reads it from now on.
			s.dmu.Unlock()
			s.noPull.Store(true)
			s.rt.release(true)
			return false, nil
		}
		s.sockDL = dl
	}
	s.puller = r
	s.dmu.Unlock()
	n, err := s.rt.pullRead(s.conn, s.ms)
	s.dmu.Lock()
	s.puller = nil
	dl := r.rdl
	s.dmu.Unlock()
	timedOut := err != nil && errors.Is(err, os.ErrDeadlineExceeded)
	if err == nil {
		s.receive(s.ms[:n])
	}
	// The reader's loop deals with the errors other than the deadline
	// (it retries with a pause, or stops): it takes the socket back now,
	// as it does when the last batch came from several peers, or when
	// this Conn has ended (no Read of it will pull within the grace).
	s.rt.release((err != nil && !timedOut) || (s.role == Many && (!s.onePeer || r.ended())))
	switch {
	case err == nil:
		return true, nil
	case !timedOut:
		return false, nil
	case !dl.IsZero() && !time.Now().Before(dl):
		return true, os.ErrDeadlineExceeded
	}
	return true, nil // a bound on the wait, or a deadline since moved: read again
}

// Waiting is msgconn.Puller's: Reads waiting on their read queue.
func (r *Reader) Waiting(delta int32) { r.s.rt.wait(delta) }

// Freed is msgconn.Puller's: the read turn may be free.
func (r *Reader) Freed() <-chan struct{} { return r.s.rt.freed }

// Pass is msgconn.Puller's: a wake from Freed that a Read did not use.
func (r *Reader) Pass() { r.s.rt.pass() }

// SetReadDeadline is msgconn.Puller's: the Conn's read deadline, for the
// socket reads of Pull; it moves the socket's if this Conn's Read is
// reading it.
func (r *Reader) SetReadDeadline(t time.Time) {
	s := r.s
	s.dmu.Lock()
	r.rdl = t
	if s.puller == r {
		dl := s.pullDeadline(t)
		_ = s.conn.SetReadDeadline(dl)
		s.sockDL = dl
	}
	s.dmu.Unlock()
}

// Stop ends the socket read of this Conn's Read, if one is in progress:
// the Conn's Close does not wait for the next datagram.
func (r *Reader) Stop() {
	s := r.s
	s.dmu.Lock()
	if s.puller == r {
		past := time.Unix(1, 0)
		_ = s.conn.SetReadDeadline(past)
		s.sockDL = past
	}
	s.dmu.Unlock()
}
