package netcode

import (
	"io"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/gonetcode/netcode/internal/transport"
)

// eofError is what a connection ends with when the peer disconnects cleanly.
var eofError = io.EOF

// sendErrors counts datagrams the socket refused to send (UDP is best
// effort; the protocol's keep-alives and timeouts deal with the loss).
var sendErrors atomic.Uint64

// directSink writes each datagram to the socket at once. It is safe for
// concurrent use. A client uses it: its core sends one datagram at a time.
type directSink struct {
	tc transport.Conn
}

func (d *directSink) Send(to netip.AddrPort, b []byte) {
	if err := d.tc.WriteTo(b, to); err != nil {
		sendErrors.Add(1)
	}
}

// combineSink sends datagrams for many goroutines at once (every Conn of a
// Listener writes through one). A Send that finds no write in progress
// writes its datagram itself, at once; datagrams that arrive while a write
// is in progress are queued, and the writing goroutine sends them with one
// batched write before it returns (flat combining). So an idle server adds
// no latency, and a busy one makes one system call for many datagrams
// instead of one each. Buffers are preallocated: Send does not allocate.
type combineSink struct {
	tc transport.Conn

	mu       sync.Mutex
	cond     sync.Cond // signalled when the queue is swapped out
	queue    []transport.Message
	n        int  // datagrams queued
	flushing bool // a goroutine is writing; it will send the queue too
	spare    []transport.Message
}

func newCombineSink(tc transport.Conn) *combineSink {
	s := &combineSink{tc: tc, queue: newMessages(sendBatch), spare: newMessages(sendBatch)}
	s.cond.L = &s.mu
	return s
}

func newMessages(n int) []transport.Message {
	msgs := make([]transport.Message, n)
	for i := range msgs {
		msgs[i].Buf = make([]byte, 0, transport.MaxDatagram)
	}
	return msgs
}

// Send queues b for to, and writes the queue unless another goroutine is
// writing already. It has finished with b when it returns.
func (s *combineSink) Send(to netip.AddrPort, b []byte) {
	s.mu.Lock()
	for s.n == len(s.queue) {
		s.cond.Wait() // the writer takes the full queue soon
	}
	m := &s.queue[s.n]
	m.Buf = append(m.Buf[:0], b...)
	m.Addr = to
	s.n++
	if s.flushing {
		s.mu.Unlock()
		return
	}
	s.flushing = true
	for s.n > 0 {
		msgs := s.queue[:s.n]
		s.queue, s.spare, s.n = s.spare, s.queue, 0
		s.cond.Broadcast()
		s.mu.Unlock()
		writeAll(s.tc, msgs)
		s.mu.Lock()
	}
	s.flushing = false
	s.mu.Unlock()
}

// writeAll sends msgs with as few batched writes as the socket allows,
// skipping (and counting) datagrams it refuses.
func writeAll(tc transport.Conn, msgs []transport.Message) {
	for len(msgs) > 0 {
		n, err := tc.WriteBatch(msgs)
		if err != nil {
			// Skip the datagram that failed and carry on with the rest.
			sendErrors.Add(1)
			n++
		}
		msgs = msgs[min(n, len(msgs)):]
	}
}

// batchSink collects datagrams and sends them with one batched write. It
// belongs to one goroutine.
type batchSink struct {
	tc   transport.Conn
	msgs []transport.Message
	n    int
}

const sendBatch = 64

func newBatchSink(tc transport.Conn) *batchSink {
	return &batchSink{tc: tc, msgs: newMessages(sendBatch)}
}

func (s *batchSink) Send(to netip.AddrPort, b []byte) {
	if s.n == len(s.msgs) {
		s.flush()
	}
	m := &s.msgs[s.n]
	m.Buf = append(m.Buf[:0], b...)
	m.Addr = to
	s.n++
}

// flush sends what was collected.
func (s *batchSink) flush() {
	writeAll(s.tc, s.msgs[:s.n])
	s.n = 0
}
