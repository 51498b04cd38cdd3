package netcode

import (
	"io"
	"net/netip"
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

// sendQueue is a Listener's one send path (quic-go's send queue, in
// spirit): a bounded queue of datagrams that one writer goroutine drains
// with batched writes. Every sender (Conn.Write, the readers' replies, the
// ticker's keep-alives, Close's disconnects) goes through it.
//
// A Send that finds the queue empty and no write in progress writes its
// own datagram at once, so a lone client pays no hand-off; otherwise it
// queues a copy and returns, and the writer sends the queue in batches. No
// sender ever writes another's datagrams, so none is held up for longer
// than its own write. When the queue is full, a keep-alive is dropped and
// counted (it is redundant by nature: the next one follows within 100 ms),
// and any other datagram waits for room: backpressure on the sending
// connection alone, since the writer takes no connection's lock. Datagrams
// leave in the order they were sent.
//
// Lock order: a client's send lock (held by the core around Send) →
// sendQueue.mu.
type sendQueue struct {
	tc transport.Conn

	mu     sync.Mutex
	room   sync.Cond // signalled when the writer takes the queue
	queue  []transport.Message
	spare  []transport.Message
	n      int  // datagrams queued
	busy   bool // a write is in progress (direct or the writer's)
	closed bool
	one    [1]transport.Message // the direct write's message

	wake    chan struct{} // capacity 1: the queue has datagrams
	done    chan struct{} // closed when the writer exits
	dropped atomic.Uint64 // keep-alives dropped on a full queue
	refused atomic.Uint64 // datagrams the socket refused to send
	sent    traffic       // datagrams the socket took
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

func newSendQueue(tc transport.Conn) *sendQueue {
	q := &sendQueue{
		tc:    tc,
		queue: newMessages(sendQueueLen),
		spare: newMessages(sendQueueLen),
		wake:  make(chan struct{}, 1),
		done:  make(chan struct{}),
	}
	q.room.L = &q.mu
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

// Send sends b to to, at once or through the writer. It has finished with b
// when it returns.
func (q *sendQueue) Send(to netip.AddrPort, b []byte) { q.send(to, b, true) }

// queued is q's sink for bursts (a Close's or a Disconnect's redundant
// disconnect packets): every datagram goes through the writer, which sends
// them in batches, never one write call each.
type queued struct{ q *sendQueue }

func (s queued) Send(to netip.AddrPort, b []byte) { s.q.send(to, b, false) }

// send sends b to to; with direct, at once if the queue is empty and no
// write is in progress.
func (q *sendQueue) send(to netip.AddrPort, b []byte, direct bool) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	if direct && !q.busy && q.n == 0 {
		q.busy = true
		q.mu.Unlock()
		q.one[0] = transport.Message{Buf: b, Addr: to}
		q.write(q.one[:])
		q.one[0] = transport.Message{}
		q.mu.Lock()
		q.busy = false
		wake := q.n > 0
		q.mu.Unlock()
		if wake {
			q.signal()
		}
		return
	}
	for q.n == len(q.queue) && !q.closed {
		if typ, ok := protocol.PeekType(b); ok && typ == protocol.KeepAlive {
			q.mu.Unlock()
			q.dropped.Add(1)
			return
		}
		q.room.Wait()
	}
	if q.closed {
		q.mu.Unlock()
		return
	}
	m := &q.queue[q.n]
	m.Buf = append(m.Buf[:0], b...)
	m.Addr = to
	q.n++
	q.mu.Unlock()
	q.signal()
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
			q.room.Broadcast()
			q.mu.Unlock()
			q.write(msgs)
			q.mu.Lock()
			q.busy = false
		}
		last := q.closed && q.n == 0
		q.mu.Unlock()
		if last {
			return
		}
	}
}

// close sends what is queued and stops the writer; later Sends do nothing.
// Call it after the last Send that matters (the Listener's Close, after
// the core's disconnects) and before closing the socket.
func (q *sendQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.room.Broadcast()
	q.mu.Unlock()
	q.signal()
	<-q.done
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
