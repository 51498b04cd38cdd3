package netcode

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"

	"github.com/gonetcode/netcode/internal/transport"
	"github.com/gonetcode/netcode/protocol"
)

// eofError is what a connection ends with when the peer disconnects cleanly.
var eofError = io.EOF

// sendBatch is the most datagrams one batched write carries.
const sendBatch = 64

// sendQueueLen bounds the datagrams waiting for a Listener's writer.
const sendQueueLen = 4 * sendBatch

// sendQueue is a Listener's one send path (after quic-go's send queue): a
// bounded queue of datagrams that one writer goroutine drains with
// batched writes. Every sender (Conn.Write, the readers' replies, the
// ticker's keep-alives, the disconnects of Conn.Close and Listener.Close)
// goes through it, with datagrams the server core sealed into an Output,
// and holds no lock of the core or of a connection while it does.
//
// A send that finds the queue empty and no write in progress writes its
// datagrams at once (one batched write), so a lone client pays no
// hand-off; otherwise it queues copies and returns, and the writer sends
// the queue in batches. No sender ever writes another's datagrams, so
// none is held up for longer than its own write. A full queue is a signal,
// not a wait inside the queue: a keep-alive that does not fit is dropped
// and counted (it is redundant by nature: the next one follows within
// 100 ms); for any other datagram the sender selects on the queue's room
// channel (closed when the writer takes the queue) together with its own
// stop and deadline channels, so Conn.Close and a write deadline end the
// wait. Datagrams of one send leave in order.
//
// Lock order: sendQueue.mu is a leaf, never held across a write to the
// socket nor while the sender waits; the socket's own locks
// (transport's write lock) are taken by the writing goroutine with no
// other lock held.
type sendQueue struct {
	tc transport.Conn

	mu      sync.Mutex
	queue   []transport.Message
	spare   []transport.Message
	n       int             // datagrams queued
	busy    bool            // a write is in progress (direct or the writer's)
	closed  bool            // no more sends; the writer sends what is queued and exits
	waiters []chan struct{} // senders waiting for room, each woken by a send on its channel

	wake    chan struct{} // capacity 1: the queue has datagrams
	done    chan struct{} // closed when the writer exits
	dropped atomic.Uint64 // keep-alives dropped on a full queue
	refused atomic.Uint64 // datagrams the socket refused to send
	sent    traffic       // datagrams the socket took
}

func newSendQueue(tc transport.Conn) *sendQueue {
	q := &sendQueue{
		tc:    tc,
		queue: newMessages(sendQueueLen),
		spare: newMessages(sendQueueLen),
		wake:  make(chan struct{}, 1),
		done:  make(chan struct{}),
	}
	go q.writer()
	return q
}

func newMessages(n int) []transport.Message {
	msgs := make([]transport.Message, n)
	for i := range msgs {
		msgs[i].Buf = make([]byte, 0, transport.MaxDatagram)
	}
	return msgs
}

// noWait, as send's stop, makes it drop what a full queue has no room for
// instead of waiting: for the readers' replies (a client resends its
// handshake packets at 10 Hz) and a Conn's disconnects (redundant; the
// peer times out without them), so that no reader and no Close ever waits
// on the socket.
var noWait = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// errStopped is what send returns when its stop channel closed first; the
// caller knows why it closed (Conn.Write: the connection's end).
var errStopped = errors.New("netcode: send abandoned")

// send sends msgs in order: at once if the queue is idle, else through the
// writer. It has finished with msgs when it returns. A full queue drops
// keep-alives (counted) and makes send wait for room until stop or
// deadline is closed (nil: never), which fail it with errStopped or
// os.ErrDeadlineExceeded; wake (capacity 1; nil: one is made if needed)
// is the sender's own channel the writer signals when there is room.
// After close it fails with net.ErrClosed.
func (q *sendQueue) send(msgs []transport.Message, stop, deadline <-chan struct{}, wake chan struct{}) error {
	for len(msgs) > 0 {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return net.ErrClosed
		}
		if !q.busy && q.n == 0 {
			q.busy = true
			q.mu.Unlock()
			q.write(msgs)
			q.mu.Lock()
			q.busy = false
			wake := q.n > 0 || q.closed // the writer may be waiting for this write to end
			q.mu.Unlock()
			if wake {
				q.signal()
			}
			return nil
		}
		queued := false
		for len(msgs) > 0 {
			if q.n < len(q.queue) {
				m := &q.queue[q.n]
				m.Buf = append(m.Buf[:0], msgs[0].Buf...)
				m.Addr = msgs[0].Addr
				q.n++
				queued = true
			} else if typ, ok := protocol.PeekType(msgs[0].Buf); ok && typ == protocol.KeepAlive {
				q.dropped.Add(1)
			} else {
				break // full: wait for room
			}
			msgs = msgs[1:]
		}
		if len(msgs) == 0 {
			q.mu.Unlock()
			if queued {
				q.signal()
			}
			return nil
		}
		select {
		case <-stop: // noWait, or the sender's end came: no room to wait for
			q.mu.Unlock()
			if queued {
				q.signal()
			}
			return errStopped
		default:
		}
		if wake == nil {
			wake = make(chan struct{}, 1)
		}
		q.waiters = append(q.waiters, wake)
		q.mu.Unlock()
		if queued {
			q.signal()
		}
		select {
		case <-wake:
		case <-stop:
			q.forget(wake)
			return errStopped
		case <-deadline:
			q.forget(wake)
			return os.ErrDeadlineExceeded
		}
	}
	return nil
}

// forget takes wake out of the waiters, if the writer has not woken it. A
// signal that came meanwhile stays in wake, and makes its next wait look
// again at once: harmless.
func (q *sendQueue) forget(wake chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, w := range q.waiters {
		if w == wake {
			last := len(q.waiters) - 1
			copy(q.waiters[i:], q.waiters[i+1:])
			q.waiters[last] = nil
			q.waiters = q.waiters[:last]
			return
		}
	}
}

func (q *sendQueue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// writer sends the queue, in batches, whenever a direct write is not in
// progress; after close it sends what is left and exits.
func (q *sendQueue) writer() {
	defer close(q.done)
	for {
		<-q.wake
		q.mu.Lock()
		for q.n > 0 && !q.busy {
			msgs := q.queue[:q.n]
			q.queue, q.spare, q.n = q.spare, q.queue, 0
			q.busy = true
			q.openRoom()
			q.mu.Unlock()
			q.write(msgs)
			q.mu.Lock()
			q.busy = false
		}
		last := q.closed && q.n == 0 && !q.busy
		q.mu.Unlock()
		if last {
			return
		}
	}
}

// openRoom wakes the senders waiting for room. q.mu is held.
func (q *sendQueue) openRoom() {
	for i, w := range q.waiters {
		select {
		case w <- struct{}{}:
		default: // a signal is pending already
		}
		q.waiters[i] = nil
	}
	q.waiters = q.waiters[:0]
}

// close sends what is queued and stops the writer; later sends fail, and
// sends waiting for room give up. Call it after the last send that
// matters (the Listener's Close, after the core's disconnects) and before
// closing the socket.
func (q *sendQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.openRoom()
	q.mu.Unlock()
	q.signal()
	<-q.done
}

// traffic counts datagrams and their bytes, one way, with two atomic adds
// per batch.
type traffic struct{ packets, bytes atomic.Uint64 }

func (t *traffic) add(packets, bytes int) {
	t.packets.Add(uint64(packets))
	t.bytes.Add(uint64(bytes))
}

// addAll counts every datagram of ms.
func (t *traffic) addAll(ms []transport.Message) {
	n := 0
	for i := range ms {
		n += len(ms[i].Buf)
	}
	t.add(len(ms), n)
}

// write sends msgs with writeAll and counts what the socket took and
// what it refused.
func (q *sendQueue) write(msgs []transport.Message) {
	refused, refusedBytes := writeAll(q.tc, msgs)
	q.refused.Add(uint64(refused))
	n := 0
	for i := range msgs {
		n += len(msgs[i].Buf)
	}
	q.sent.add(len(msgs)-refused, n-refusedBytes)
}

// writeAll sends msgs with as few batched writes as the socket allows,
// skipping datagrams it refuses, and returns how many it refused and
// their bytes.
func writeAll(tc transport.Conn, msgs []transport.Message) (refused, refusedBytes int) {
	for len(msgs) > 0 {
		batch := msgs[:min(len(msgs), sendBatch)]
		n, err := tc.WriteBatch(batch)
		if err != nil {
			// Skip the datagram that failed and carry on with the rest.
			refused++
			if n < len(batch) {
				refusedBytes += len(batch[n].Buf)
			}
			n++
		}
		msgs = msgs[min(n, len(msgs)):]
	}
	return refused, refusedBytes
}
