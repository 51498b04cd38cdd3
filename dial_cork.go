package netcode

// Held writes of a dialed Conn: a Write made while the Conn's read queue
// still holds payloads (a burst of echoes being answered one by one) is
// held, sealed, and leaves with the Writes after it as one train (one
// sendmsg with UDP_SEGMENT, which a Listener's socket reads coalesced),
// where each would have been a system call and a pass through the
// kernel's send path of its own. The train leaves at the latest when:
//   - a Write finds the read queue empty (the burst is answered),
//   - a Read finds the read queue empty (Pull), before it waits,
//   - corkTrain datagrams are held,
//   - anything else sends (a keep-alive, WriteBatch, Close), before it,
//   - corkBound has passed since the first was held (a timer).
//
// Only a Conn whose socket is connected to its server holds writes (the
// recvmmsg/sendmmsg path: transport.Connect), so every held datagram
// goes to one address and a train is one system call.

import (
	"sync/atomic"
	"time"

	"github.com/gonetcode/netcode/internal/sendq"
	"github.com/gonetcode/netcode/internal/transport"
	"github.com/gonetcode/netcode/protocol"
)

// corkTrain is the most datagrams a dialed Conn holds for one train.
const corkTrain = 16

// corkBound is the longest a held datagram waits for the Reads and Writes
// that would send it with others. A variable for the tests.
var corkBound = 500 * time.Microsecond

// heldWrites is a dialed Conn's held datagrams; used in the write turn
// but for n, which Pull reads without it.
type heldWrites struct {
	on    bool             // the socket is connected: Writes may be held; set before Dial returns
	held  transport.Sealed // the datagrams held, in sequence order
	n     atomic.Int32     // len(held.Datagrams), for a look without the write turn
	timer *time.Timer      // sends them after corkBound; nil until first needed
}

// writeOrHold sends ms, in the write turn, after the datagrams held; with
// hold, a lone datagram is held instead if room is left.
func (dc *dialConn) writeOrHold(ms []transport.Message, hold bool) error {
	h := &dc.hw
	if hold && len(ms) == 1 && len(h.held.Datagrams) < corkTrain-1 {
		dc.holdOne(ms[0])
		return nil
	}
	if len(h.held.Datagrams) == 0 {
		return dc.write(ms)
	}
	for i := range ms {
		dc.holdOne(ms[i])
	}
	sendq.WriteAll(dc.tc, h.held.Datagrams)
	h.held.Reset()
	h.n.Store(0)
	h.timer.Stop()
	return nil
}

// holdOne copies m into the held datagrams, in the write turn, and arms
// the timer for the first.
func (dc *dialConn) holdOne(m transport.Message) {
	h := &dc.hw
	// Room for two to start with: the buffer grows to the trains the
	// Conn makes, and a Conn that never makes one (most of a relay's)
	// keeps little.
	start := h.held.Mark(2 * protocol.MaxPacketBytes)
	h.held.Buf = append(h.held.Buf, m.Buf...)
	h.held.Push(m.Addr, start)
	if h.n.Add(1) != 1 {
		return
	}
	if h.timer == nil {
		h.timer = time.AfterFunc(corkBound, dc.flushHeld)
		return
	}
	h.timer.Reset(corkBound)
}

// flushHeld sends the datagrams held, if any: a Read found nothing to
// read, or the timer fired.
func (dc *dialConn) flushHeld() {
	if dc.hw.n.Load() == 0 {
		return
	}
	select {
	case <-dc.stop:
		return // the Conn is over
	default:
	}
	select {
	case dc.turn <- struct{}{}:
	case <-dc.stop:
		return
	}
	_ = dc.writeOrHold(nil, false)
	<-dc.turn
}

// holdNext reports whether a payload's datagram may be held: the socket
// is connected and Reads have payloads queued.
func (dc *dialConn) holdNext() bool {
	return dc.hw.on && dc.conn.m.Buffered() > 0
}
