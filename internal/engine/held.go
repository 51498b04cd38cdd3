package engine

// Held writes, the engine's policy for a connected socket's Writes: a
// payload's Write that more Writes are expected to follow is held, sealed,
// and leaves with the Writes after it as one train (one sendmsg with
// UDP_SEGMENT, which a Listener's socket reads coalesced), where each
// would have been a system call and a pass through the kernel's send path
// of its own. More Writes are expected (Send) while the Conn's read queue
// still holds payloads (a burst of echoes being answered one by one, by
// the goroutine that reads them), or while fewer payloads have been
// answered than were received (Received) and the Write comes within
// AnswerWindow of the last payload's arrival or of the Write before it:
// the same burst answered by another goroutine, a game loop's writer,
// after its reader has taken the payloads out of the queue and handed
// them over. (A Write long after the last payload, a game's input at its
// own rate while snapshots come at theirs, is not an answer to them.)
//
// The train leaves at the latest when:
//   - a payload's Write is expected to be the burst's last (the read
//     queue is empty and no other payload is unanswered),
//   - a Read finds the read queue empty (its Pull), before it waits,
//   - HeldTrain datagrams are held,
//   - anything else sends (a keep-alive, WriteBatch, Close), before it,
//   - the goroutine that holds them stops writing: the first datagram
//     held starts a goroutine (dispatch) that takes the write turn and
//     sends the train once the Writes stop coming. It runs when the
//     writing goroutine yields its thread (it blocks: on its next Read,
//     a channel, a lock) or another thread takes it up, and it looks
//     again while the train still grows. So no time passes on the clock
//     of a program whose writer then waits (TestHeldWrites, on simulated
//     time); what the Write's caller sees is a goroutine's wake-up,
//     microseconds, and a runtime timer's granularity is no part of it.
//     (A writer that computes on without blocking while every thread is
//     busy keeps it until the runtime preempts it, as it would a timer's
//     callback.) On loopback a held Write's payload reached the server's
//     Read 19-27 µs (p50) after Write returned, as a Write sent at once
//     did; the 500 µs timer this replaced gave 1.1 ms (p50) to 20 ms (max),
//     the runtime's timers sleeping in whole milliseconds when the
//     process is idle (docs/performance.md, 2026-11-29).
//
// Only a Conn whose socket is connected to its one peer holds writes (the
// recvmmsg/sendmmsg path: transport.Connect), so every held datagram goes
// to one address and a train is one system call.

import (
	"errors"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gonetcode/netcode/internal/sendq"
	"github.com/gonetcode/netcode/internal/transport"
)

// HeldTrain is the most datagrams a Conn holds for one train.
const HeldTrain = 16

// AnswerWindow is how soon after the last payload received, or the Write
// before it, a Write must come to be taken as one of a burst of answers.
const AnswerWindow = 500 * time.Microsecond

// noDispatch keeps the first datagram held from starting the goroutine
// that sends the train once the Writes stop (SetDispatch).
var noDispatch atomic.Bool

// SetDispatch lets the first datagram held start the goroutine that sends
// the train once the Writes stop (on, the default) or not. For the tests:
// off leaves the held datagrams to the other ways out, so that a test sees
// each of them send.
func SetDispatch(on bool) { noDispatch.Store(!on) }

// dispatchLooks is how many times dispatch looks whether the train still
// grows, yielding its thread between looks, before it sends the train all
// the same: a writer that never stops (on another thread) gets trains of
// HeldTrain from its own Writes meanwhile.
const dispatchLooks = 4

// Held is a connected socket's held datagrams. It is used in its Conn's
// write turn (a channel the binding owns), but for Len, which a Read
// looks at without it, and Received, which the read turn calls. It holds
// nothing until Enable.
type Held struct {
	on   atomic.Bool // the socket is connected: Writes may be held (Enable)
	conn transport.Conn
	held transport.Sealed // the datagrams held, in sequence order
	n    atomic.Int32     // len(held.Datagrams), for a look without the write turn
	// owed is how many payloads received no Write has answered yet, at
	// most HeldTrain (Received adds, Send takes one off).
	owed atomic.Int32
	// epoch is Init's time; lastRecv (Received, in the read turn) and
	// lastSend (Send, in the write turn) are since it, on the monotonic
	// clock.
	epoch    time.Time
	lastRecv atomic.Int64
	lastSend time.Duration
	// dispatching: a dispatch goroutine is started and has not yet taken
	// the write turn to send. Set and cleared in the write turn.
	dispatching bool
	dispatchFn  func()          // h.dispatch, made once: starting it allocates nothing
	turn        WriteTurn       // the Conn's write turn, the binding's
	stop        <-chan struct{} // closed when the Conn is over
}

// Init readies h to write to conn in the write turn turn (which the
// binding's Writes hold while they call Write) until stop is closed.
func (h *Held) Init(conn transport.Conn, turn WriteTurn, stop <-chan struct{}) {
	h.conn, h.turn, h.stop = conn, turn, stop
	h.dispatchFn = h.dispatch
	h.epoch = time.Now()
	h.lastRecv.Store(int64(-AnswerWindow)) // nothing received, nothing sent yet
	h.lastSend = -AnswerWindow
}

// Flush sends the datagrams held, if any, taking the write turn: a Read
// found nothing to read (before its Pull).
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

// dispatch is the goroutine the first datagram held starts: it sends the
// train once the Writes stop coming (a look, after yielding its thread,
// finds no datagram added since the last), or after dispatchLooks looks.
func (h *Held) dispatch() {
	for range dispatchLooks {
		seen := h.n.Load()
		if seen == 0 {
			break // sent meanwhile
		}
		runtime.Gosched()
		if h.n.Load() == seen {
			break
		}
	}
	if !h.turn.Take(h.stop, nil) {
		return // the Conn is over: Close sent the held datagrams
	}
	h.dispatching = false
	_ = h.Write(nil, false)
	h.turn.Give()
}

// Enable lets Writes be held (on: the socket is connected to the one
// peer) or not. It may run beside Write: a dispatch writes in the write
// turn as a Dial that connects its socket enables it.
func (h *Held) Enable(on bool) { h.on.Store(on) }

// Len is how many datagrams are held.
func (h *Held) Len() int { return int(h.n.Load()) }

// Received counts n payloads delivered for Reads at now, in the read
// turn: the Writes that answer them may be held until the last.
func (h *Held) Received(n int, now time.Time) {
	if n == 0 || !h.on.Load() {
		return
	}
	h.lastRecv.Store(int64(now.Sub(h.epoch)))
	if h.owed.Add(int32(n)) > HeldTrain {
		h.owed.Store(HeldTrain)
	}
}

// Send sends ms, a payload's Write at now, in the write turn, holding it
// if more Writes are expected: queued (the Conn's read queue holds
// payloads), or more payloads received than answered, this one aside,
// with the last received or the Write before this one within
// AnswerWindow.
func (h *Held) Send(ms []transport.Message, queued bool, now time.Time) error {
	owed := h.owed.Load()
	if owed > 0 {
		h.owed.Add(-1)
	}
	t := now.Sub(h.epoch)
	recent := t-time.Duration(h.lastRecv.Load()) < AnswerWindow || t-h.lastSend < AnswerWindow
	h.lastSend = t
	return h.Write(ms, queued || (owed > 1 && recent))
}

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

// holdOne copies m into the held datagrams, in the write turn, and starts
// a dispatch for the first if none is on its way.
func (h *Held) holdOne(m transport.Message) {
	// Room for two to start with: the buffer grows to the trains the
	// Conn makes, and a Conn that never makes one (most of a relay's)
	// keeps little.
	start := h.held.Mark(2 * transport.MaxDatagram)
	h.held.Buf = append(h.held.Buf, m.Buf...)
	h.held.Push(m.Addr, start)
	if h.n.Add(1) != 1 || h.dispatching || noDispatch.Load() {
		return
	}
	h.dispatching = true
	go h.dispatchFn()
}
