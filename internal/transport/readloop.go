package transport

import (
	"errors"
	"net"
	"os"
	"syscall"
	"time"
)

// The pause ReadLoop makes before retrying after a transient error: none
// after the first of a run of errors, then minBackoff, doubling up to
// maxBackoff until a read succeeds.
const (
	minBackoff = time.Millisecond
	maxBackoff = 100 * time.Millisecond
)

// ReadLoop is the read loop of a socket's owner: it reads c in batches of
// up to batch datagrams, into buffers of MaxDatagram bytes it owns, and
// calls handle with each batch read (the messages and their buffers are
// valid only during the call). It returns nil once stop is closed (checked
// after every batch and every error) or c is closed, and the error itself
// when a read fails with one that retrying cannot cure (a socket that is
// not one any more, an unknown error).
//
// A transient error (an ICMP error reported on the socket such as
// ECONNREFUSED, a datagram too large for the buffer on Windows, a lack of
// kernel buffers, an expired read deadline) is given to onError, if it is
// not nil, and the read is retried: at once the first time, then after a
// pause that doubles from 1 ms to 100 ms while the errors go on, so that a
// persistent one never spins. A successful read resets the pause.
func ReadLoop(c Conn, batch int, stop <-chan struct{}, handle func(ms []Message), onError func(error)) error {
	return ReadLoopInto(c, NewMessages(batch), stop, handle, onError)
}

// NewMessages returns n messages (at least 1) with buffers of
// MaxDatagram bytes, for ReadLoopInto.
func NewMessages(n int) []Message {
	ms := make([]Message, max(n, 1))
	for i := range ms {
		ms[i].Buf = make([]byte, MaxDatagram)
	}
	return ms
}

// ReadLoopInto is ReadLoop reading into ms, the caller's. Other reads of
// c may use ms while handle runs (handle waits for them to finish before
// it returns: a socket shared by turns), never while the loop reads.
func ReadLoopInto(c Conn, ms []Message, stop <-chan struct{}, handle func(ms []Message), onError func(error)) error {
	return readLoop(c, ms, stop, handle, onError, nil, nil)
}

// ReadLoopOwned is ReadLoop for a socket that nothing but the loop reads,
// whose handle never reads c nor waits for anything that waits for c's
// Close (Close waits for handle to return). Where the socket allows it
// (Linux's recvmmsg path), after a lone datagram that emptied the socket
// the loop waits for the next one without the read that would find none:
// one system call fewer per datagram while they come one at a time.
func ReadLoopOwned(c Conn, batch int, stop <-chan struct{}, handle func(ms []Message), onError func(error)) error {
	h, _ := c.(HeldReader)
	return readLoop(c, NewMessages(batch), stop, handle, onError, h, nil)
}

// Turn is the read turn of a socket that other goroutines may read too,
// for ReadLoopTurns: Wanted reports, after a batch, whether another
// goroutine waits to read; Yield then passes the socket to it and returns
// once the loop may read again (or stop is closed).
type Turn interface {
	Wanted() bool
	Yield()
}

// ReadLoopTurns is ReadLoopInto for a socket whose read turn the loop
// hands over: after each batch handled, if turn.Wanted(), it calls
// turn.Yield, outside any read of c, so that the goroutine given the turn
// may read c with ms. With owned, handle never closes c nor waits for
// anything that waits for c's Close, and the loop waits as ReadLoopOwned
// does, leaving that wait to yield.
func ReadLoopTurns(c Conn, ms []Message, stop <-chan struct{}, handle func(ms []Message), onError func(error), turn Turn, owned bool) error {
	var h HeldReader
	if owned {
		h, _ = c.(HeldReader)
	}
	return readLoop(c, ms, stop, handle, onError, h, turn)
}

func readLoop(c Conn, ms []Message, stop <-chan struct{}, handle func(ms []Message), onError func(error), held HeldReader, turn Turn) error {
	var (
		pause time.Duration
		timer *time.Timer
	)
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	// hold handles a held read's batch and says whether to go on holding
	// the socket: not when the turn is wanted elsewhere.
	hold := func(ms []Message) bool {
		handle(ms)
		return turn == nil || !turn.Wanted()
	}
	for {
		var (
			n   int
			err error
		)
		if held != nil {
			var handled bool
			if handled, err = held.ReadHeld(ms, stop, hold); handled {
				pause = 0
			}
		} else {
			for i := range ms {
				ms[i].Buf = ms[i].Buf[:cap(ms[i].Buf)]
			}
			n, err = c.ReadBatch(ms)
		}
		select {
		case <-stop:
			return nil
		default:
		}
		if err == nil {
			pause = 0
			if n > 0 {
				handle(ms[:n])
			}
			if turn != nil && turn.Wanted() {
				turn.Yield()
			}
			continue
		}
		switch {
		case errors.Is(err, net.ErrClosed):
			return nil
		case !transient(err):
			return err
		}
		if onError != nil {
			onError(err)
		}
		if pause > 0 {
			if timer == nil {
				timer = time.NewTimer(pause)
			} else {
				timer.Reset(pause)
			}
			select {
			case <-stop:
				return nil
			case <-timer.C:
			}
		}
		pause = min(max(2*pause, minBackoff), maxBackoff)
	}
}

// transientErrors are the read errors of a datagram socket that say
// nothing about the socket itself: it works again once the cause passes.
var transientErrors = append([]error{
	os.ErrDeadlineExceeded,
	syscall.ECONNREFUSED, // ICMP port unreachable for an earlier send
	syscall.ECONNRESET,
	syscall.EHOSTUNREACH,
	syscall.ENETUNREACH,
	syscall.ENETDOWN,
	syscall.EMSGSIZE,
	syscall.ENOBUFS,
	syscall.ENOMEM,
	syscall.EINTR,
	syscall.EAGAIN,
}, platformTransientErrors...)

// transient reports whether a read that failed with err may be retried.
func transient(err error) bool {
	for _, t := range transientErrors {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}
