package netcode

import (
	"io"
	"net/netip"
	"sync/atomic"

	"github.com/gonetcode/netcode/internal/transport"
)

// eofError is what a connection ends with when the peer disconnects cleanly.
var eofError = io.EOF

// sendErrors counts datagrams the socket refused to send (UDP is best
// effort; the protocol's keep-alives and timeouts deal with the loss).
var sendErrors atomic.Uint64

// directSink writes each datagram to the socket at once. It is safe for
// concurrent use.
type directSink struct {
	tc transport.Conn
}

func (d *directSink) Send(to netip.AddrPort, b []byte) {
	if err := d.tc.WriteTo(b, to); err != nil {
		sendErrors.Add(1)
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
	s := &batchSink{tc: tc, msgs: make([]transport.Message, sendBatch)}
	for i := range s.msgs {
		s.msgs[i].Buf = make([]byte, 0, transport.MaxDatagram)
	}
	return s
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
	msgs := s.msgs[:s.n]
	for len(msgs) > 0 {
		n, err := s.tc.WriteBatch(msgs)
		if err != nil {
			// Skip the datagram that failed and carry on with the rest.
			sendErrors.Add(1)
			n++
		}
		if n > len(msgs) {
			n = len(msgs)
		}
		msgs = msgs[n:]
	}
	s.n = 0
}
