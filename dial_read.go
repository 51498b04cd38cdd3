package netcode

// The reads of a dialed Conn: the reader goroutine (readLoop), which
// reads the socket while no Read does, and the pulling Read (Pull, for
// msgconn.Puller), which reads it itself when the read turn is free. The
// fields and their lock order are documented on dialConn, in dial.go.

import (
	"fmt"
	"time"

	"github.com/gonetcode/netcode/internal/transport"
	"github.com/gonetcode/netcode/protocol"
)

// dialReadBatch is how many datagrams a dialed Conn's reader takes from its
// socket at once. A server sends one client little at a time (its echoes,
// 10 keep-alives a second), and each slot is a 1500-byte buffer the Conn
// keeps: a bridge's relay holds thousands of Conns.
const dialReadBatch = 8

// dialGROSlots is the most super-datagrams (64 KiB each) a dialed Conn's
// read takes once a bulk transfer turned GRO on (Bulk): its reads start
// with one and add one while trains come faster than a read takes them.
const dialGROSlots = 8

func (dc *dialConn) readLoop() {
	defer dc.wg.Done()
	if !dc.rt.take(dc.stop) {
		<-dc.rt.tok
		return
	}
	dc.readerDeadline()
	err := transport.ReadLoopTurns(dc.tc, dc.rms, dc.stop, dc.receive, nil, dialTurn{dc}, false)
	<-dc.rt.tok
	if err == nil {
		return
	}
	// The socket failed for good. A connected Conn ends at once with the
	// error; a handshake in progress hears nothing more and times out.
	select {
	case <-dc.connected:
		dc.conn.end(fmt.Errorf("reading from %v: %w", dc.core.ServerAddr(), err))
		dc.halt()
	default:
	}
}

// dialTurn is the dialed Conn's read turn as the reader's loop sees it.
type dialTurn struct{ dc *dialConn }

func (t dialTurn) Wanted() bool { return t.dc.rt.wanted() && !t.dc.noPull.Load() }

func (t dialTurn) Yield() {
	if t.dc.rt.yield(t.dc.stop) {
		t.dc.readerDeadline()
	}
}

// receive hands a batch of datagrams to the core and acts on the
// outcome; it runs in the read turn.
func (dc *dialConn) receive(ms []transport.Message) {
	out := &dc.rout
	now := time.Now()
	var next time.Time
	for i := range ms {
		if len(ms[i].Buf) <= protocol.MaxPacketBytes {
			dc.core.Receive(now, ms[i].Addr, ms[i].Buf, out)
			dc.act(out)
			next = out.Next
		}
	}
	switch {
	case next.IsZero():
	case !now.Before(next):
		// Due at once (the answer to a challenge, a denial to act
		// on): no need to wait for the timer.
		dc.update()
	default:
		dc.schedule(next)
	}
}

// readerDeadline clears the socket's read deadline that a Read's Pull
// left, for the reader, which has just taken the read turn.
func (dc *dialConn) readerDeadline() {
	dc.dmu.Lock()
	if !dc.sockDL.IsZero() {
		_ = dc.tc.SetReadDeadline(time.Time{})
		dc.sockDL = time.Time{}
	}
	dc.dmu.Unlock()
}

// Pull is msgconn.Puller's: a Read reads the socket itself if the read
// turn is free.
func (dc *dialConn) Pull() (bool, error) {
	dc.flushHeld() // the Writes of a burst leave before the Read waits
	if dc.noPull.Load() {
		return false, nil
	}
	if !dc.rt.tryTake() {
		return false, nil
	}
	select {
	case <-dc.stop: // the socket is closed or closing: the queue ends
		dc.rt.release(false)
		return false, nil
	default:
	}
	if dc.conn.m.Buffered() > 0 {
		// The reader queued a payload after this Read looked and
		// before it gave the turn up: read it first.
		dc.rt.release(false)
		return true, nil
	}
	return dc.pull(dc.rt, dc.tc, dc.rms, dc)
}

// The pullOwner methods of a dialed Conn: its Reads pull with their own
// deadline, and the reader takes the socket back only after an error.

func (dc *dialConn) pullDeadline() time.Time { return dc.rdl }
func (dc *dialConn) setPulling(on bool)      { dc.pulling = on }
func (dc *dialConn) readDeadline() time.Time { return dc.rdl }
func (dc *dialConn) giveBack() bool          { return false }

// Bulk is msgconn.Bulker's: package reliable attached (a Stream or a
// Session), and the server's trains (GSO) are to arrive coalesced (GRO)
// rather than cut into one datagram per read. The next read of the
// socket turns it on.
func (dc *dialConn) Bulk() { transport.AskGRO(dc.tc, dialGROSlots) }

// Waiting is msgconn.Puller's: Reads waiting on the read queue.
func (dc *dialConn) Waiting(delta int32) { dc.rt.wait(delta) }

// Freed is msgconn.Puller's: the read turn may be free.
func (dc *dialConn) Freed() <-chan struct{} { return dc.rt.freed }

// Pass is msgconn.Puller's: a wake from Freed that a Read did not use.
func (dc *dialConn) Pass() { dc.rt.pass() }

// SetReadDeadline is msgconn.Puller's: the Conn's read deadline, for the
// socket reads of Pull.
func (dc *dialConn) SetReadDeadline(t time.Time) {
	dc.dmu.Lock()
	dc.rdl = t
	if dc.pulling {
		_ = dc.tc.SetReadDeadline(t)
		dc.sockDL = t
	}
	dc.dmu.Unlock()
}
