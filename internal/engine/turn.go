package engine

import (
	"sync/atomic"
	"time"

	"github.com/gonetcode/netcode/internal/transport"
)

// pullGrace is how long a socket's reader goroutine leaves the socket to
// Reads that pull after the last one: past it with no Read pulling, the
// reader reads it again. Longer than the pause between two Reads of a
// busy loop, short beside the protocol's timeouts.
const pullGrace = 20 * time.Millisecond

// readTurn is the turn to read a socket that a reader goroutine reads
// while no Read does, and that Reads read themselves (they pull) when
// they find nothing queued and the turn free, so that a payload reaches
// its Read on the goroutine that read it, with no hand-off. A dialed
// Conn's socket has one; so has each of a Listener's sockets.
//
// The reader holds the turn, and gives it up after a batch when a Read is
// waiting for it (wanted; it wakes them through freed); it takes it back
// once no pull has ended for pullGrace, so that datagrams are taken in
// while nobody reads. A pull touches no timer while the reader's own
// runs: it counts its end (ends), and the reader's timer, when it fires,
// looks at that count. While a pull goes on (a Read waiting for its
// datagram, for as long as it takes), the reader waits for the turn to
// stay free for a grace after a pull (watch): the pull that ends arms the
// grace timer (grace), and the next pull's take stops it, so that Reads
// that come back within a grace, as a client sending at 10 Hz does,
// never wake the reader.
type readTurn struct {
	tok     chan struct{} // capacity 1: the turn
	freed   chan struct{} // capacity 1: the turn may be free
	waiters atomic.Int32  // Reads waiting for a payload or the turn
	ends    atomic.Uint64 // pulls ended
	watch   atomic.Bool   // the reader waits for the pull in progress to end
	grace   *time.Timer   // armed by a pull's end while the reader watches; stopped by the next take
	armed   atomic.Bool   // grace may be armed
	back    chan struct{} // capacity 1: a pull asks the reader to take the turn back at once
	idle    *time.Timer   // the reader's wait; used by the reader only
	// solo: the turn goes to Reads only while at most one waits. A
	// Listener's socket carries many Conns' datagrams: with several
	// Reads waiting, a Read that reads the socket hands most of what it
	// reads to the others, as the reader would, and the reader's larger
	// batches cost less.
	solo bool

	// waits tells whether a pull's read waited for its datagram (nil: the
	// socket cannot tell); lone counts the pulls in a row that waited and
	// read one datagram. Used in the turn.
	waits transport.WaitReporter
	lone  int
}

func newReadTurn(solo bool, sock transport.Conn) *readTurn {
	w, _ := sock.(transport.WaitReporter)
	t := &readTurn{
		solo:  solo,
		waits: w,
		tok:   make(chan struct{}, 1),
		freed: make(chan struct{}, 1),
		back:  make(chan struct{}, 1),
		idle:  time.NewTimer(time.Hour),
		grace: time.NewTimer(time.Hour),
	}
	t.idle.Stop()
	t.grace.Stop()
	return t
}

// take is the reader's first taking of the turn. It returns false if
// stop closed first: the reader then holds the turn all the same, once any
// pull in progress has ended, as yield does.
func (t *readTurn) take(stop <-chan struct{}) bool {
	select {
	case t.tok <- struct{}{}:
		acquire(rankReadTurn)
		return true
	case <-stop:
		t.tok <- struct{}{}
		acquire(rankReadTurn)
		return false
	}
}

// wanted reports whether Reads wait for the turn (with solo, one alone).
func (t *readTurn) wanted() bool {
	n := t.waiters.Load()
	return n > 0 && (!t.solo || n == 1)
}

// yield gives the turn to the Reads waiting and takes it back once no pull
// has ended for pullGrace (between one and two graces after the last), or
// one asks it to (back). It returns false if stop closed first: the
// reader then holds the turn all the same, once any pull in progress has
// ended (it ends with the socket's Close).
func (t *readTurn) yield(stop <-chan struct{}) bool {
	release(rankReadTurn)
	<-t.tok
	signal(t.freed)
	seen := t.ends.Load()
	t.idle.Reset(pullGrace)
	defer t.idle.Stop()
	now := false // asked to take the turn back at once
	for {
		if !now {
			select {
			case <-t.idle.C:
				if e := t.ends.Load(); e != seen {
					seen = e // pulls ended since: a grace more
					t.idle.Reset(pullGrace)
					continue
				}
			case <-t.back:
			case <-stop:
				t.tok <- struct{}{}
				acquire(rankReadTurn)
				return false
			}
		}
		now = false
		if t.tryTake() {
			select {
			case <-t.back: // asked by a pull that has ended
			default:
			}
			return true
		}
		// A Read is pulling: wait until a grace has passed since the
		// end of a pull with no other begun (the pulls arm and stop
		// grace), which may be far off.
		t.watch.Store(true)
		if t.ends.Load() == seen {
			select {
			case <-t.grace.C:
				now = true
			case <-t.back:
				now = true
			case <-stop:
				t.watch.Store(false)
				t.tok <- struct{}{}
				acquire(rankReadTurn)
				return false
			}
		}
		t.watch.Store(false)
		seen = t.ends.Load()
		if !now {
			t.idle.Reset(pullGrace)
		}
	}
}

// tryTake takes the turn for a pull if it is free; it stops the grace
// the last pull's end armed.
func (t *readTurn) tryTake() bool {
	select {
	case t.tok <- struct{}{}:
		acquire(rankReadTurn)
		if t.armed.Load() && t.armed.CompareAndSwap(true, false) {
			// (A stop that comes before the arming it races with
			// costs the reader a wake-up that finds a pull going
			// on: it watches again.)
			t.grace.Stop()
		}
		return true
	default:
		return false
	}
}

// release ends a pull. A Read waiting may pull next; or the reader takes
// the turn back at once, with giveBack (a read error it deals with) or
// when, with solo, several Reads wait.
func (t *readTurn) release(giveBack bool) {
	n := t.waiters.Load()
	release(rankReadTurn)
	<-t.tok
	t.ends.Add(1)
	if t.watch.Load() {
		// The reader waits for the turn to stay free for a grace: the
		// next pull's take stops it.
		t.armed.Store(true)
		t.grace.Reset(pullGrace)
	}
	switch {
	case giveBack || (t.solo && n > 1):
		signal(t.back)
	case n > 0:
		signal(t.freed)
	}
}

// loneRun is how many pulls in a row must have waited for their one
// datagram before pulls read one datagram only.
const loneRun = 2

// pullRead reads the socket for a pull, into ms (resliced to their
// capacity) and returns how many it read. After loneRun reads in a row
// that each waited for their one datagram, it reads one only: datagrams
// come one at a time, and a read of several would look at the empty
// socket once more. A burst (a read that did not wait) ends that.
func (t *readTurn) pullRead(sock transport.Conn, ms []transport.Message) (int, error) {
	if t.lone >= loneRun {
		ms = ms[:1]
	}
	for i := range ms {
		ms[i].Buf = ms[i].Buf[:cap(ms[i].Buf)]
	}
	n, err := sock.ReadBatch(ms)
	switch {
	case err != nil:
	case n == 1 && t.waits != nil && t.waits.ReadWaited():
		t.lone = min(t.lone+1, loneRun)
	default:
		t.lone = 0
	}
	return n, err
}

// wait is Waiting's: Reads waiting on their read queue for a payload or
// for the turn.
func (t *readTurn) wait(delta int32) { t.waiters.Add(delta) }

// pass passes on a wake (freed) that a Read took and did not use (it
// found its payload queued instead), to a Read still waiting.
func (t *readTurn) pass() {
	if t.waiters.Load() > 0 {
		signal(t.freed)
	}
}

// signal makes a non-blocking send on c (capacity 1).
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
