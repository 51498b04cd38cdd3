package engine

// Held writes, the engine's policy for a Conn's Writes to its one peer: a
// payload's Write that more Writes are expected to follow is held, sealed,
// and leaves with the Writes after it as one train (one sendmsg with
// UDP_SEGMENT, which the peer's socket reads coalesced), where each would
// have been a system call and a pass through the kernel's send path of
// its own, and, on a server, a hand-off to the send queue's writer
// goroutine on another thread. The train goes to the Held's sink: a
// dialed Conn's connected socket, written directly (Init), or a server
// Conn's socket's send queue (InitQueue), which an idle queue writes at
// once from the calling goroutine as one batched write, one GSO train to
// the peer, and a busy one queues for its writer.
//
// More Writes are expected (Send) while the Conn's read queue still holds
// payloads (a burst of echoes being answered one by one, by the goroutine
// that reads them), or, on a dialed Conn, while fewer payloads have been
// answered than were received (Received) and the Write comes within
// AnswerWindow of the last payload's arrival or of the Write before it:
// the same burst answered by another goroutine, a game loop's writer,
// after its reader has taken the payloads out of the queue and handed
// them over. (A Write long after the last payload, a game's input at its
// own rate while snapshots come at theirs, is not an answer to them.) A
// server Conn's binding does not count Received: see InitQueue.
//
// The train leaves at the latest when:
//   - a payload's Write is expected to be the burst's last (the read
//     queue is empty and no other payload is unanswered),
//   - a Read finds the read queue empty (its Pull), before it waits,
//   - HeldTrain datagrams are held,
//   - anything else sends (a keep-alive, WriteBatch, Close), before it,
//   - on a dialed Conn, the goroutine that holds them stops writing: the
//     first datagram held starts a goroutine (dispatch) that takes the
//     write turn and sends the train once the Writes stop coming. It runs
//     when the writing goroutine yields its thread (it blocks: on its
//     next Read, a channel, a lock) or another thread takes it up, and it
//     looks again while the train still grows. So no time passes on the
//     clock of a program whose writer then waits (TestHeldWrites, on
//     simulated time); what the Write's caller sees is a goroutine's
//     wake-up, microseconds. On loopback a held Write's payload reached
//     the server's Read 19-27 µs (p50) after Write returned, as a Write
//     sent at once did; the 500 µs timer this replaced gave 1.1 ms (p50)
//     to 20 ms (max) (docs/performance.md, 2026-11-29).
//   - on a server Conn, HeldFallback after its first datagram held at the
//     latest: the Listener's Fallback, one timer for all its Conns, sends
//     every train registered with it. A dispatch per train costs a server
//     the thread wake-up the train saves (the runtime wakes an idle core
//     for the goroutine it readies: docs/performance.md, "Server Conns
//     hold a burst's answers, bounded by one fallback per Listener"), and
//     a server's held trains leave by the ways above in every usual
//     pattern (a Conn echoed by the goroutine that reads it, a game loop
//     that reads each Conn until empty and answers); the Fallback bounds
//     the rest, a writer that holds and then waits on something other
//     than the Conn (TestServerHeldLeaveWhenWriterWaits in the root
//     package). Without the dispatch a server's CPU per packet at one
//     client fell from 3.7-4.2 µs to 2.8-3.0; on loopback a Write held on
//     that rare path reached the client about 1.2 ms after Write returned
//     (p50), against 40-60 µs with the dispatch.
//
// Only a Conn with one peer holds writes: a dialed Conn whose socket is
// connected to it (the recvmmsg/sendmmsg path: transport.Connect), or a
// server Conn whose Writes go through its socket's send queue (not a
// pushing socket's peer, whose writes go at once), so every held datagram
// goes to one address and a train is one system call.

import (
	"errors"
	"runtime"
	"sync"
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
// that sends the train once the Writes stop, or from registering with a
// Fallback (SetDispatch).
var noDispatch atomic.Bool

// SetDispatch lets the first datagram held start the goroutine that sends
// the train once the Writes stop, or, on a server Conn, register with its
// Listener's Fallback (on, the default), or not. For the tests: off leaves
// the held datagrams to the other ways out, so that a test sees each of
// them send.
func SetDispatch(on bool) { noDispatch.Store(!on) }

// dispatchLooks is how many times dispatch looks whether the train still
// grows, yielding its thread between looks, before it sends the train all
// the same: a writer that never stops (on another thread) gets trains of
// HeldTrain from its own Writes meanwhile.
const dispatchLooks = 4

// Held is a Conn's held datagrams. It is used in its Conn's write turn (a
// channel the binding owns), but for Len, which a Read looks at without
// it, and Received, which the read turn calls. It holds nothing until
// Enable.
type Held struct {
	on   atomic.Bool // the Conn has one peer: Writes may be held (Enable)
	sink sink
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
	dispatchFn  func() // h.dispatch, made once: starting it allocates nothing
	// fb is a server Conn's Listener's fallback (InitQueue), which sends
	// the train in place of a dispatch; registered: h is on its list.
	// Both in the write turn.
	fb         *Fallback
	registered bool
	turn       WriteTurn       // the Conn's write turn, the binding's
	stop       <-chan struct{} // closed when the Conn is over
}

// sink is where a Held's datagrams go, all to its Conn's one peer: a
// connected socket, written directly, or a socket's send queue.
type sink struct {
	conn transport.Conn // a dialed Conn's connected socket (Init)
	q    *sendq.Queue   // or a server Conn's socket's send queue (InitQueue)
	wake chan struct{}  // the Conn's channel q signals room on; in the write turn
}

// write sends ms, in the write turn: to the socket (a lone datagram
// refused as larger than the path carries returns its error; any other
// refusal is a loss, as UDP may lose any datagram), or through the send
// queue, which writes them at once if it is idle and else queues them,
// waiting for room until stop or deadline (its errors are Send's).
func (s *sink) write(ms []transport.Message, stop, deadline <-chan struct{}) error {
	switch {
	case len(ms) == 0:
	case s.q != nil:
		return s.q.Send(ms, stop, deadline, s.wake)
	case len(ms) == 1:
		if err := s.conn.WriteTo(ms[0].Buf, ms[0].Addr); errors.Is(err, syscall.EMSGSIZE) {
			return err
		}
	default:
		sendq.WriteAll(s.conn, ms)
	}
	return nil
}

// Init readies h to write to conn, a socket that Enable(true) says is
// connected to the Conn's peer, in the write turn turn (which the
// binding's Writes hold while they call Send or Write) until stop is
// closed.
func (h *Held) Init(conn transport.Conn, turn WriteTurn, stop <-chan struct{}) {
	h.sink = sink{conn: conn}
	h.init(turn, stop)
}

// InitQueue readies h, as Init does, to write through q, the send queue
// of a server's socket, to the one peer of a server Conn, with wake (the
// Conn's, capacity 1) the channel q signals room on, and fb, its
// Listener's Fallback, in place of a dispatch per train. The datagrams of
// a Write wait for room in a full queue until the Conn's end (stop) or the
// Write's deadline; those of Flush until the Conn's end; the Fallback's
// never wait.
//
// A server Conn's binding calls Send with its read queue's length and
// does not count Received: holding the Writes that answer payloads a
// reader goroutine has handed to another goroutine is the dialed Conn's
// way to batch them, where nothing else would (its socket is written
// directly), but a server's Writes from goroutines other than the one
// that reads them already meet in the send queue, whose writer sends
// every Conn's queued datagrams in one batched write while sends come
// together (sendq's batching). Held there, each Conn's answers would
// leave as a train of their own when its writer waits, splitting the
// writer's batch across peers into one send per peer; and a server
// counting them would pay, on the reader goroutine shared by every Conn
// of the socket, a clock read and two atomic adds per Conn per batch for
// a rule its usual writers (one goroutine per Conn that reads and
// answers, or a game loop that writes every Conn once per tick, whose
// Writes are no answers) do not need.
func (h *Held) InitQueue(q *sendq.Queue, wake chan struct{}, turn WriteTurn, stop <-chan struct{}, fb *Fallback) {
	h.sink = sink{q: q, wake: wake}
	h.fb = fb
	h.init(turn, stop)
}

func (h *Held) init(turn WriteTurn, stop <-chan struct{}) {
	h.turn, h.stop = turn, stop
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

// Enable lets Writes be held (on: the Conn's datagrams go to its one
// peer: a connected socket, or a server Conn's send queue) or not. It
// may run beside Write: a dispatch writes in the write turn as a Dial
// that connects its socket enables it.
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
// AnswerWindow. A send queue's sink waits for room until the Conn's end
// or deadline (nil: none).
func (h *Held) Send(ms []transport.Message, queued bool, now time.Time, deadline <-chan struct{}) error {
	owed := h.owed.Load()
	if owed > 0 {
		h.owed.Add(-1)
	}
	t := now.Sub(h.epoch)
	recent := t-time.Duration(h.lastRecv.Load()) < AnswerWindow || t-h.lastSend < AnswerWindow
	h.lastSend = t
	return h.WriteUntil(ms, queued || (owed > 1 && recent), h.stop, deadline)
}

// Write sends ms, in the write turn, after the datagrams held; with
// hold, a lone datagram is held instead if room is left. A datagram the
// socket refuses is lost, as UDP may lose any, but for a lone one
// refused as larger than the path carries (EMSGSIZE, which a WebTransport
// session's datagram limit says too), which would be refused every time:
// Write returns that error. A send queue's sink waits for room until the
// Conn's end: WriteUntil says until when else.
func (h *Held) Write(ms []transport.Message, hold bool) error {
	return h.WriteUntil(ms, hold, h.stop, nil)
}

// WriteUntil is Write with a send queue's sink waiting for room until stop
// or deadline (nil: never) is closed, and failing then as the queue's
// Send does: a Write's deadline, or Close's sendq.NoWait. The datagrams
// held leave, or are lost with those of ms that had no room, either way.
func (h *Held) WriteUntil(ms []transport.Message, hold bool, stop, deadline <-chan struct{}) error {
	if hold && h.on.Load() && len(ms) == 1 && len(h.held.Datagrams) < HeldTrain-1 {
		h.holdOne(ms[0])
		return nil
	}
	if len(h.held.Datagrams) == 0 {
		return h.sink.write(ms, stop, deadline)
	}
	for i := range ms {
		h.holdOne(ms[i])
	}
	err := h.sink.write(h.held.Datagrams, stop, deadline)
	h.held.Reset()
	h.n.Store(0)
	return err
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
	if h.n.Add(1) != 1 || noDispatch.Load() {
		return
	}
	if h.fb != nil {
		if !h.registered {
			h.registered = true
			h.fb.register(h)
		}
		return
	}
	if h.dispatching {
		return
	}
	h.dispatching = true
	go h.dispatchFn()
}

// sweep sends the datagrams held for h's Fallback, if it can take the
// write turn without waiting, and reports whether h is done with (sent,
// nothing held, or the Conn over); false: the Conn's own Write (or Read's
// Flush) has the turn, which sends the train or adds to it, or the send
// queue is busy with no room for the train, and h stays on the list, its
// train held, for the next sweep, one HeldFallback later. It never
// waits, and drops nothing: a Write waits for room in a full queue, and
// so its train waits for the queue's writer to make room.
func (h *Held) sweep() bool {
	select {
	case <-h.stop:
		return true // the Conn is over: its Close sent the held datagrams
	default:
	}
	if !h.turn.TryTake() {
		return false
	}
	if h.n.Load() > 0 {
		if !h.sink.q.TrySend(h.held.Datagrams) {
			h.turn.Give()
			return false
		}
		h.held.Reset()
		h.n.Store(0)
	}
	h.registered = false
	h.turn.Give()
	return true
}

// HeldFallback is how long at most a server Conn's held train waits for
// its Listener's Fallback, on the one path where no other way out comes:
// the writer held an answer and then waits on something other than the
// Conn (a game loop's writer goroutine writing while its reader goroutine
// has not yet drained the read queue). A millisecond keeps a snapshot held
// on that rare path well inside one frame (a 60 Hz game loop ticks every
// 16.7 ms; a client interpolating between snapshots buffers two or three
// of them) and under the jitter of most Internet paths, while the timer
// behind it (a runtime timer, whose arming may break the netpoller or wake
// a thread) is armed at most once per millisecond per Listener while
// anything is held, not per train: at 100k trains a second that is one
// timer for every hundred trains. Shorter bounds buy little (the runtime's
// timers sleep in whole milliseconds while the process is idle) and cost
// more arming; longer ones hold a snapshot for a visible part of a frame.
const HeldFallback = time.Millisecond

// Fallback is a server Listener's bound on its Conns' held Writes, in
// place of a dispatch per train (Held's, which a dialed Conn keeps): a
// Conn whose first datagram is held registers its Held once (until the
// next sweep), and a timer sends every registered Conn's train at most
// HeldFallback later, armed when the list becomes non-empty and re-armed
// by its own sweep only while Conns are left on it. Its lock is a leaf:
// a Conn registers in its write turn, and the sweep takes a Conn's write
// turn only without the lock, and only if it is free (TryTake), so it
// never waits for a Write, nor on the send queue (sweep).
type Fallback struct {
	mu     leafMutex
	list   []*Held // registered, to sweep at the timer's next firing
	spare  []*Held // the list swept last, kept for the next
	armed  bool    // the timer is set, or its sweep runs
	closed bool
	t      *time.Timer
	// armedWG counts armed, which Close waits to end: no sweep outlives
	// the Listener.
	armedWG sync.WaitGroup
}

// NewFallback returns a Fallback with its timer unarmed.
func NewFallback() *Fallback {
	f := &Fallback{}
	f.t = time.AfterFunc(time.Hour, f.fire)
	f.t.Stop()
	return f
}

// register puts h on the list, in h's write turn, arming the timer if it
// was not.
func (f *Fallback) register(h *Held) {
	f.mu.Lock()
	if !f.closed {
		f.list = append(f.list, h)
		if !f.armed {
			f.armed = true
			f.armedWG.Add(1)
			f.t.Reset(HeldFallback)
		}
	}
	f.mu.Unlock()
}

// fire is the timer's callback: it sweeps the registered Conns, keeps
// those whose write turn was taken for the next firing, and re-arms the
// timer while any Conn is on the list.
func (f *Fallback) fire() {
	f.mu.Lock()
	due := f.list
	f.list = f.spare[:0]
	f.mu.Unlock()
	kept := due[:0]
	for _, h := range due {
		if !h.sweep() {
			kept = append(kept, h)
		}
	}
	f.mu.Lock()
	f.list = append(f.list, kept...)
	clear(due)
	f.spare = due[:0]
	if len(f.list) > 0 && !f.closed {
		f.t.Reset(HeldFallback)
	} else {
		f.armed = false
		f.armedWG.Done()
	}
	f.mu.Unlock()
}

// Close stops the timer, waits for a sweep that runs (it never waits
// itself), and forgets the Conns registered (the Listener's Close sends
// what they hold); a Conn that holds afterwards is not registered.
func (f *Fallback) Close() {
	f.mu.Lock()
	f.closed = true
	if f.armed && f.t.Stop() {
		f.armed = false
		f.armedWG.Done()
	}
	clear(f.list)
	f.list = f.list[:0]
	f.mu.Unlock()
	f.armedWG.Wait()
}
