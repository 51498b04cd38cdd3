package engine

// Held writes, the engine's policy for a connected socket's Writes: a
// Write made while its Conn's read queue still holds payloads (a burst of
// echoes being answered one by one) is held, sealed, and leaves with the
// Writes after it as one train (one sendmsg with UDP_SEGMENT, which a
// Listener's socket reads coalesced), where each would have been a system
// call and a pass through the kernel's send path of its own. The train
// leaves at the latest when:
//   - a Write finds the read queue empty (the burst is answered),
//   - a Read finds the read queue empty (its Pull), before it waits,
//   - HeldTrain datagrams are held,
//   - anything else sends (a keep-alive, WriteBatch, Close), before it,
//   - HoldBound has passed since the first was held (a timer, whose
//     callback, Flush, takes the Conn's write turn: the train leaves
//     HoldBound plus a timer's and a goroutine's wake-up after the first
//     Write).
//
// Only a Conn whose socket is connected to its one peer holds writes (the
// recvmmsg/sendmmsg path: transport.Connect), so every held datagram goes
// to one address and a train is one system call.

import (
	"errors"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gonetcode/netcode/internal/sendq"
	"github.com/gonetcode/netcode/internal/transport"
)

// HeldTrain is the most datagrams a Conn holds for one train.
const HeldTrain = 16

// HoldBound is the longest a held datagram waits for the Reads and Writes
// that would send it with others. A variable for the tests.
var HoldBound = 500 * time.Microsecond

// Held is a connected socket's held datagrams. It is used in its Conn's
// write turn (a channel the binding owns), but for Len, which a Read
// looks at without it. It holds nothing until Enable.
type Held struct {
	on    atomic.Bool // the socket is connected: Writes may be held (Enable)
	conn  transport.Conn
	held  transport.Sealed // the datagrams held, in sequence order
	n     atomic.Int32     // len(held.Datagrams), for a look without the write turn
	timer *time.Timer      // calls Flush after HoldBound; nil until first needed
	turn  WriteTurn        // the Conn's write turn, the binding's
	stop  <-chan struct{}  // closed when the Conn is over
}

// Init readies h to write to conn in the write turn turn (which the
// binding's Writes hold while they call Write) until stop is closed.
func (h *Held) Init(conn transport.Conn, turn WriteTurn, stop <-chan struct{}) {
	h.conn, h.turn, h.stop = conn, turn, stop
}

// Flush sends the datagrams held, if any, taking the write turn: a Read
// found nothing to read (before its Pull), or the timer fired.
func (h *Held) Flush() {
	if h.n.Load() == 0 {
		return
	}
	select {
	case <-h.stop:
		return // the Conn is over
	default:
	}
	if !h.turn.Take(h.stop, nil) {
		return
	}
	_ = h.Write(nil, false)
	h.turn.Give()
}

// Enable lets Writes be held (on: the socket is connected to the one
// peer) or not. It may run beside Write: the timer's callback writes in
// the write turn as a Dial that connects its socket enables it.
func (h *Held) Enable(on bool) { h.on.Store(on) }

// Len is how many datagrams are held.
func (h *Held) Len() int { return int(h.n.Load()) }

// Write sends ms, in the write turn, after the datagrams held; with
// hold, a lone datagram is held instead if room is left. A datagram the
// socket refuses is lost, as UDP may lose any, but for a lone one
// refused as larger than the path carries (EMSGSIZE, which a WebTransport
// session's datagram limit says too), which would be refused every time:
// Write returns that error.
func (h *Held) Write(ms []transport.Message, hold bool) error {
	if hold && h.on.Load() && len(ms) == 1 && len(h.held.Datagrams) < HeldTrain-1 {
		h.holdOne(ms[0])
		return nil
	}
	if len(h.held.Datagrams) == 0 {
		return h.write(ms)
	}
	for i := range ms {
		h.holdOne(ms[i])
	}
	sendq.WriteAll(h.conn, h.held.Datagrams)
	h.held.Reset()
	h.n.Store(0)
	h.timer.Stop()
	return nil
}

// write sends ms with nothing held.
func (h *Held) write(ms []transport.Message) error {
	switch len(ms) {
	case 0:
	case 1:
		if err := h.conn.WriteTo(ms[0].Buf, ms[0].Addr); errors.Is(err, syscall.EMSGSIZE) {
			return err
		}
	default:
		sendq.WriteAll(h.conn, ms)
	}
	return nil
}

// holdOne copies m into the held datagrams, in the write turn, and arms
// the timer for the first.
func (h *Held) holdOne(m transport.Message) {
	// Room for two to start with: the buffer grows to the trains the
	// Conn makes, and a Conn that never makes one (most of a relay's)
	// keeps little.
	start := h.held.Mark(2 * transport.MaxDatagram)
	h.held.Buf = append(h.held.Buf, m.Buf...)
	h.held.Push(m.Addr, start)
	if h.n.Add(1) != 1 {
		return
	}
	if h.timer == nil {
		h.timer = time.AfterFunc(HoldBound, h.Flush)
		return
	}
	h.timer.Reset(HoldBound)
}
