// Package packetq is the one bounded datagram queue of the module: what a
// network reader hands to a connection's Read. The reader never blocks: a
// datagram for a full queue is dropped and counted, as a UDP socket drops
// what its buffer has no room for. The reading side gets package net's
// semantics: a read deadline, Close, and an end with an error (the peer
// left) after which what is queued is still read.
//
// It is what pion's packetio.Buffer is to pion, with a bound in datagrams
// rather than bytes, sender addresses, and no allocation per datagram in
// steady state (buffers are pooled; the ring grows once to its bound).
package packetq

import (
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetcode/netcode/internal/deadline"
	"github.com/gonetcode/netcode/internal/transport"
)

// MaxBytes is the largest datagram a Queue holds: room for any netcode
// packet or payload (1200 bytes) and any datagram a UDP socket reads into
// the transport's buffers (1500).
const MaxBytes = 2048

// ErrTooLarge is returned by Push for a datagram over MaxBytes.
var ErrTooLarge = errors.New("netcode/packetq: datagram larger than MaxBytes")

// ErrEmpty is what TryReadMessage returns when nothing is queued and the
// queue has not ended.
var ErrEmpty = errors.New("netcode/packetq: nothing queued")

// ErrWoken is what ReadMessageUntil returns when its wake channel fired
// before a datagram was queued.
var ErrWoken = errors.New("netcode/packetq: woken")

type buffer [MaxBytes]byte

var pool = sync.Pool{New: func() any { return new(buffer) }}

type entry struct {
	addr netip.AddrPort
	n    int
	buf  *buffer
}

// Queue is a bounded FIFO of datagrams. Push and the reads are safe for
// concurrent use by any number of goroutines.
//
// Lock order: Queue.mu is a leaf; the deadline's own lock is taken
// outside it.
type Queue struct {
	limit int

	mu     sync.Mutex
	ring   []entry // grows by doubling up to limit
	head   int
	count  int
	ended  bool  // End was called: reads drain, then return endErr
	endErr error // why it ended
	closed bool  // Close was called: reads return net.ErrClosed at once

	notify  chan struct{} // capacity 1: a datagram was queued
	done    chan struct{} // closed by End or Close
	dropped atomic.Uint64
	total   *atomic.Uint64 // also counts drops, if set (NewCounted)
	rd      deadline.Deadline
}

// New returns a queue that holds at most limit datagrams (at least 1).
func New(limit int) *Queue {
	return &Queue{
		limit:  max(limit, 1),
		notify: make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
}

// NewCounted is New with a second drop counter, shared by many queues (a
// server's total of payloads dropped by full read queues).
func NewCounted(limit int, total *atomic.Uint64) *Queue {
	q := New(limit)
	q.total = total
	return q
}

// drop counts a datagram refused for want of room.
func (q *Queue) drop() {
	q.dropped.Add(1)
	if q.total != nil {
		q.total.Add(1)
	}
}

// Push queues a copy of p from addr. It reports false, and counts the
// datagram in Dropped, when the queue is full; it reports false without
// counting after End or Close. It never blocks.
func (q *Queue) Push(addr netip.AddrPort, p []byte) bool {
	if len(p) > MaxBytes {
		q.drop()
		return false
	}
	q.mu.Lock()
	if q.ended || q.closed {
		q.mu.Unlock()
		return false
	}
	if q.count == q.limit {
		q.mu.Unlock()
		q.drop()
		return false
	}
	if q.count == len(q.ring) {
		q.grow()
	}
	b := pool.Get().(*buffer)
	q.ring[(q.head+q.count)%len(q.ring)] = entry{addr, copy(b[:], p), b}
	q.count++
	q.mu.Unlock()
	q.signal()
	return true
}

// grow doubles the ring, keeping its order; q.mu is held.
func (q *Queue) grow() {
	n := min(max(2*len(q.ring), 8), q.limit)
	ring := make([]entry, n)
	for i := range q.count {
		ring[i] = q.ring[(q.head+i)%len(q.ring)]
	}
	q.ring, q.head = ring, 0
}

func (q *Queue) signal() {
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// Read reads the next datagram into b, truncating it if b is short, and
// returns its length and sender. See ReadMessage for the errors.
func (q *Queue) Read(b []byte) (int, netip.AddrPort, error) {
	return q.read(b, false, nil)
}

// ReadMessage is Read for message semantics: a datagram longer than b is
// not truncated but stays queued, and ReadMessage returns
// io.ErrShortBuffer.
//
// Both block until a datagram is queued. Once the read deadline has
// passed they return os.ErrDeadlineExceeded, even with datagrams queued
// (they are kept), as package net does. After Close they return
// net.ErrClosed; after End they return what is queued, then End's error.
func (q *Queue) ReadMessage(b []byte) (int, netip.AddrPort, error) {
	return q.read(b, true, nil)
}

// TryReadMessage is ReadMessage without the wait: with nothing queued
// (and the queue not ended) it returns ErrEmpty at once.
func (q *Queue) TryReadMessage(b []byte) (int, netip.AddrPort, error) {
	return q.read(b, true, noWait)
}

// ReadMessageUntil is ReadMessage that also gives up waiting, with
// ErrWoken, when wake can be received from.
func (q *Queue) ReadMessageUntil(b []byte, wake <-chan struct{}) (int, netip.AddrPort, error) {
	return q.read(b, true, wake)
}

// noWait, as a read's wake channel, makes it not wait at all.
var noWait = make(chan struct{})

func (q *Queue) read(b []byte, keepShort bool, wake <-chan struct{}) (int, netip.AddrPort, error) {
	if err := q.lockReady(wake); err != nil {
		return 0, netip.AddrPort{}, err
	}
	if keepShort && len(b) < q.ring[q.head].n {
		q.mu.Unlock()
		return 0, netip.AddrPort{}, io.ErrShortBuffer
	}
	n, addr := q.pop(b)
	q.unlockRead()
	return n, addr, nil
}

// ReadBatch is Read for several datagrams at once, as
// transport.Conn.ReadBatch: it blocks as Read does until a datagram is
// queued, then moves up to len(ms) of those queued, each into
// ms[i].Buf[:cap(ms[i].Buf)] (truncated if longer), reslices Buf to the
// datagram, sets Addr to its sender, and returns how many it moved. The
// errors are Read's.
func (q *Queue) ReadBatch(ms []transport.Message) (int, error) {
	if len(ms) == 0 {
		return 0, nil
	}
	if err := q.lockReady(nil); err != nil {
		return 0, err
	}
	k := 0
	for ; k < len(ms) && q.count > 0; k++ {
		b := ms[k].Buf[:cap(ms[k].Buf)]
		n, addr := q.pop(b)
		ms[k].Buf, ms[k].Addr = b[:n], addr
	}
	q.unlockRead()
	return k, nil
}

// lockReady waits until a datagram is queued and returns with q.mu held,
// or returns the error the read ends with, q.mu not held: ErrWoken if
// wake fires first (nil: never), ErrEmpty at once if wake is noWait.
func (q *Queue) lockReady(wake <-chan struct{}) error {
	for {
		expired := q.rd.Wait()
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return net.ErrClosed
		}
		select {
		case <-expired:
			q.mu.Unlock()
			return os.ErrDeadlineExceeded
		default:
		}
		if q.count > 0 {
			return nil
		}
		if q.ended {
			err := q.endErr
			q.mu.Unlock()
			return err
		}
		q.mu.Unlock()
		if wake == noWait {
			return ErrEmpty
		}
		select {
		case <-q.notify:
		case <-q.done:
		case <-expired:
		case <-wake:
			return ErrWoken
		}
	}
}

// pop copies the oldest datagram into b and frees it; q.mu is held and a
// datagram is queued.
func (q *Queue) pop(b []byte) (int, netip.AddrPort) {
	e := &q.ring[q.head]
	n, addr := copy(b, e.buf[:e.n]), e.addr
	pool.Put(e.buf)
	*e = entry{}
	q.head = (q.head + 1) % len(q.ring)
	q.count--
	return n, addr
}

// unlockRead ends a read: it releases q.mu and, if datagrams are left,
// passes the wake-up on to another reader that may be waiting.
func (q *Queue) unlockRead() {
	more := q.count > 0
	q.mu.Unlock()
	if more {
		q.signal()
	}
}

// End ends the queue with err (io.EOF when the peer left cleanly): Push
// refuses from now on, and reads return what is queued, then err. It
// reports whether this call ended it; later calls change nothing.
func (q *Queue) End(err error) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ended || q.closed {
		return false
	}
	q.ended, q.endErr = true, err
	close(q.done)
	return true
}

// Close discards what is queued and makes reads return net.ErrClosed at
// once. It reports whether this call closed it.
func (q *Queue) Close() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	if !q.ended {
		close(q.done)
	}
	q.closed = true
	for q.count > 0 {
		e := &q.ring[q.head]
		pool.Put(e.buf)
		*e = entry{}
		q.head = (q.head + 1) % len(q.ring)
		q.count--
	}
	q.ring = nil
	q.rd.Stop()
	return true
}

// Done is closed when the queue is ended or closed.
func (q *Queue) Done() <-chan struct{} { return q.done }

// Err is nil until End or Close; then End's error, or net.ErrClosed.
func (q *Queue) Err() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch {
	case q.ended:
		return q.endErr
	case q.closed:
		return net.ErrClosed
	}
	return nil
}

// Raise lets q hold at least limit datagrams; it never lowers the bound.
// The ring still grows only as datagrams come.
func (q *Queue) Raise(limit int) {
	q.mu.Lock()
	q.limit = max(q.limit, limit)
	q.mu.Unlock()
}

// Len is the number of datagrams queued.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.count
}

// Dropped is the number of datagrams refused because the queue was full
// (or too large for it).
func (q *Queue) Dropped() uint64 { return q.dropped.Load() }

// SetReadDeadline sets the deadline for the reads; the zero time clears
// it. A read blocked when it passes returns os.ErrDeadlineExceeded.
func (q *Queue) SetReadDeadline(t time.Time) { q.rd.Set(t) }

// ReadDeadlineExpired reports whether the read deadline has passed.
func (q *Queue) ReadDeadlineExpired() bool { return q.rd.Expired() }
