package netcode

// The reads of a dialed Conn: the reader goroutine (readLoop), which
// reads the socket while no Read does, and the pulling Read (Pull, for
// msgconn.Puller), which reads it itself when the read turn is free. The
// fields and their lock order are documented on dialConn, in dial.go.

import (
	"errors"
	"fmt"
	"os"
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

// pullGrace is how long the reader leaves the socket to Reads that pull
// after the last one: past it with no Read pulling, the reader reads it
// again. Longer than the pause between two Reads of a busy loop, short
// beside the protocol's timeouts.
const pullGrace = 20 * time.Millisecond

func (dc *dialConn) readLoop() {
	defer dc.wg.Done()
	select {
	case dc.rtok <- struct{}{}:
		dc.readerDeadline()
	case <-dc.stop:
		return
	}
	err := transport.ReadLoopInto(dc.tc, dc.rms, dc.stop, func(ms []transport.Message) {
		dc.receive(ms)
		if dc.waiters.Load() > 0 && !dc.noPull.Load() {
			dc.yield()
		}
	}, nil)
	dc.idle.Stop()
	<-dc.rtok
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

// yield gives the read turn to the Reads waiting for a payload, and takes
// it back once none has pulled for pullGrace, or the Conn ends.
func (dc *dialConn) yield() {
	dc.idle.Reset(pullGrace)
	<-dc.rtok
	signal(dc.freed)
	for {
		select {
		case <-dc.idle.C:
		case <-dc.stop:
			dc.rtok <- struct{}{} // a Pull's read ends with the socket
			return
		}
		select {
		case dc.rtok <- struct{}{}:
			dc.readerDeadline()
			return
		default:
			// A Read is pulling: it sets the timer again when it ends.
		}
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
	if dc.noPull.Load() {
		return false, nil
	}
	select {
	case dc.rtok <- struct{}{}:
	default:
		return false, nil
	}
	select {
	case <-dc.stop: // the socket is closed or closing: the queue ends
		<-dc.rtok
		return false, nil
	default:
	}
	dc.idle.Stop()
	dc.dmu.Lock()
	if dl := dc.rdl; !dl.Equal(dc.sockDL) {
		if err := dc.tc.SetReadDeadline(dl); err != nil {
			// A caller's transport without read deadlines: a Read
			// cannot wait on it, the reader reads it from now on.
			dc.dmu.Unlock()
			dc.noPull.Store(true)
			dc.idle.Reset(0)
			<-dc.rtok
			return false, nil
		}
		dc.sockDL = dl
	}
	dc.pulling = true
	dc.dmu.Unlock()
	ms := dc.rms
	for i := range ms {
		ms[i].Buf = ms[i].Buf[:cap(ms[i].Buf)]
	}
	n, err := dc.tc.ReadBatch(ms)
	dc.dmu.Lock()
	dc.pulling = false
	dl := dc.rdl
	dc.dmu.Unlock()
	timedOut := err != nil && errors.Is(err, os.ErrDeadlineExceeded)
	switch {
	case err == nil:
		dc.receive(ms[:n])
		dc.idle.Reset(pullGrace)
	case timedOut:
		dc.idle.Reset(pullGrace)
	default:
		// The reader's loop deals with the other errors (it retries with
		// a pause, or ends the Conn): it takes the socket back now.
		dc.idle.Reset(0)
	}
	<-dc.rtok
	if dc.waiters.Load() > 0 {
		signal(dc.freed) // another Read may pull now
	}
	switch {
	case err == nil:
		return true, nil
	case !timedOut:
		return false, nil
	case !dl.IsZero() && !time.Now().Before(dl):
		return true, os.ErrDeadlineExceeded
	}
	return true, nil // a deadline since moved: read again
}

// Bulk is msgconn.Bulker's: package reliable attached (a Stream or a
// Session), and the server's trains (GSO) are to arrive coalesced (GRO)
// rather than cut into one datagram per read. The next read of the
// socket turns it on.
func (dc *dialConn) Bulk() { transport.AskGRO(dc.tc, dialGROSlots) }

// Waiting is msgconn.Puller's: Reads waiting on the read queue.
func (dc *dialConn) Waiting(delta int32) { dc.waiters.Add(delta) }

// Freed is msgconn.Puller's: the read turn may be free.
func (dc *dialConn) Freed() <-chan struct{} { return dc.freed }

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
