// Package sendq is the one send path of a socket (after quic-go's send
// queue): a bounded queue of datagrams that one writer goroutine drains
// with batched writes, shared by netcode's Listener and dialed Conns and
// by the Cute adapters. A full queue is a signal, never a wait inside the
// queue under a lock.
package sendq

import (
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"

	"github.com/gonetcode/netcode/internal/transport"
)

// Batch is the most datagrams one batched write carries.
const Batch = 64

// Len bounds the datagrams waiting for a server socket's writer.
const Len = 4 * Batch

// ClientLen bounds the datagrams waiting for a dialed Conn's writer: a
// client sends little at a time (its payloads, 10 keep-alives a second),
// and each slot, twice over (the queue and the batch being written), is a
// datagram buffer the Conn keeps: 48 KB at 16, against 768 KB at Len.
const ClientLen = Batch / 4

// Queue is a socket's one send path: a
// bounded queue of datagrams that one writer goroutine drains with
// batched writes. Every sender (Conn.Write, the readers' replies, the
// ticker's keep-alives, the disconnects of Conn.Close and Listener.Close)
// goes through it, with datagrams the server core sealed into an Output,
// and holds no lock of the core or of a connection while it does.
//
// A send that finds the queue empty and no write in progress writes its
// datagrams at once (one batched write), so a lone client pays no
// hand-off; otherwise it queues copies and returns, and the writer sends
// the queue in batches. Where the socket sends a batch to many
// destinations in one system call (sendmmsg), sends that come together
// (one finds a write in progress, or a reader took several datagrams at
// once: Burst) all queue for a while, even on an idle queue (but for a
// send of several datagrams, a batch already), so that the writer sends
// the replies of many connections with one system call instead of each
// sender making its own; the queue writes directly again once the
// writer's batches are lone datagrams. No sender ever writes another's
// datagrams, so none is held up for longer than its own write. A full
// queue is a signal, not a wait inside the queue: a keep-alive that does
// not fit is dropped and counted (it is redundant by nature: the next one
// follows within 100 ms); for any other datagram the sender selects on
// the queue's room channel (closed when the writer takes the queue)
// together with its own stop and deadline channels, so Conn.Close and a
// write deadline end the wait. Datagrams of one send leave in order.
//
// Lock order: Queue.mu is a leaf, never held across a write to the
// socket nor while the sender waits; the socket's own locks
// (transport's write lock) are taken by the writing goroutine with no
// other lock held.
type Queue struct {
	tc        transport.Conn
	droppable func(datagram []byte) bool // a redundant datagram (a keep-alive) a full queue drops

	mu      sync.Mutex
	queue   []transport.Message
	spare   []transport.Message
	n       int             // datagrams queued
	busy    bool            // a write is in progress (direct or the writer's)
	closed  bool            // no more sends; the writer sends what is queued and exits
	waiters []chan struct{} // senders waiting for room, each woken by a send on its channel

	// batching is set, where the socket sends a batch in one system call
	// (canBatch), when sends come together: a sender finds a write in
	// progress, a direct write ends with datagrams queued behind it, or a
	// reader took several datagrams at once (Burst). Every send then
	// queues, and the writer sends what queued meanwhile as one batch, to
	// however many destinations. singles counts the writer's lone
	// datagrams in a row (a batch of several sets it to 0); at
	// leaveBatching batching ends, and while it stays there (no batch of
	// several since) the next lone datagram ends batching again at once,
	// so that under light load a reader's occasional burst costs one
	// hand-off, not leaveBatching of them.
	batching bool
	singles  int
	canBatch bool

	// byDest is the writer's scratch for grouping a batch by destination
	// (group), made on its first use; only the writer uses it.
	byDest *grouper

	wake    chan struct{} // capacity 1: the queue has datagrams
	done    chan struct{} // closed when the writer exits
	dropped atomic.Uint64 // keep-alives dropped on a full queue
	refused atomic.Uint64 // datagrams the socket refused to send
	sent    Traffic       // datagrams the socket took
}

// New returns a Queue of n datagrams (at most Len; Len for a server's
// socket, ClientLen for a dialed Conn's) that sends to tc, with its writer
// goroutine started; Close stops it. droppable tells the datagrams that a
// full queue drops (counted) rather than waits for: the dialect's
// keep-alives.
func New(tc transport.Conn, droppable func(datagram []byte) bool, n int) *Queue {
	if n <= 0 || n > Len {
		n = Len
	}
	q := &Queue{
		tc:        tc,
		droppable: droppable,
		canBatch:  transport.SendsBatches(tc),
		queue:     newMessages(n),
		spare:     newMessages(n),
		wake:      make(chan struct{}, 1),
		done:      make(chan struct{}),
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

// NoWait, as Send's stop, makes it drop what a full queue has no room for
// instead of waiting: for the readers' replies (a client resends its
// handshake packets at 10 Hz) and a Conn's disconnects (redundant; the
// peer times out without them), so that no reader and no Close ever waits
// on the socket.
var NoWait = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// ErrStopped is what Send returns when its stop channel closed first; the
// caller knows why it closed (Conn.Write: the connection's end).
var ErrStopped = errors.New("sendq: send abandoned")

// Send sends msgs in order: at once if the queue is idle and not
// batching (or msgs are several, a batch already), else through the
// writer. It has finished with msgs when it returns. A full queue drops
// keep-alives (counted) and makes Send wait for room until stop or
// deadline is closed (nil: never), which fail it with ErrStopped or
// os.ErrDeadlineExceeded; wake (capacity 1; nil: one is made if needed)
// is the sender's own channel the writer signals when there is room.
// After Close it fails with net.ErrClosed.
func (q *Queue) Send(msgs []transport.Message, stop, deadline <-chan struct{}, wake chan struct{}) error {
	for len(msgs) > 0 {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return net.ErrClosed
		}
		if q.idleFor(msgs) {
			q.writeIdle(msgs)
			return nil
		}
		if q.busy {
			q.startBatching()
		}
		queued := false
		for len(msgs) > 0 {
			if q.n < len(q.queue) {
				q.push(msgs[0])
				queued = true
			} else if q.droppable(msgs[0].Buf) {
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
		case <-stop: // NoWait, or the sender's end came: no room to wait for
			q.mu.Unlock()
			if queued {
				q.signal()
			}
			return ErrStopped
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
			return ErrStopped
		case <-deadline:
			q.forget(wake)
			return os.ErrDeadlineExceeded
		}
	}
	return nil
}

// TrySend sends msgs as Send does, but all or none, and never waits: it
// reports false, having sent and queued none of them, when the queue is
// busy and has no room for them all, so that a sender that may neither
// wait nor drop them (a Listener's fallback for its Conns' held Writes)
// keeps them and tries again later. After Close it reports true, sending
// none, as Send fails then.
func (q *Queue) TrySend(msgs []transport.Message) bool {
	q.mu.Lock()
	switch {
	case q.closed || len(msgs) == 0:
		q.mu.Unlock()
		return true
	case q.idleFor(msgs):
		q.writeIdle(msgs)
		return true
	case len(q.queue)-q.n < len(msgs):
		q.mu.Unlock()
		return false
	}
	if q.busy {
		q.startBatching()
	}
	for _, m := range msgs {
		q.push(m)
	}
	q.mu.Unlock()
	q.signal()
	return true
}

// idleFor reports whether msgs leave at once, written by their sender:
// the queue is idle, and not batching, or msgs are several, a batch
// already (the ticker's keep-alives, a reader's replies, a Conn's train),
// which on an idle queue leave at once even while batching, never waiting
// for, or dropped by, a queue they may not fit. q.mu is held.
func (q *Queue) idleFor(msgs []transport.Message) bool {
	return !q.busy && q.n == 0 && (!q.batching || len(msgs) > 1)
}

// writeIdle writes msgs from the sender's goroutine, the queue being idle
// (idleFor); q.mu is held on entry and released.
func (q *Queue) writeIdle(msgs []transport.Message) {
	q.busy = true
	q.mu.Unlock()
	q.write(msgs)
	q.mu.Lock()
	q.busy = false
	if q.n > 0 {
		q.startBatching() // senders queued behind this write
	}
	wake := q.n > 0 || q.closed // the writer may be waiting for this write to end
	// A sender woken for room that wrote directly instead left that room
	// unclaimed: wake waiters for what there is.
	q.openRoom(len(q.queue) - q.n)
	q.mu.Unlock()
	if wake {
		q.signal()
	}
}

// push copies m into the queue, which has room for it; q.mu is held.
func (q *Queue) push(m transport.Message) {
	e := &q.queue[q.n]
	e.Buf = append(e.Buf[:0], m.Buf...)
	e.Addr = m.Addr
	q.n++
}

// forget takes wake out of the waiters, if the writer has not woken it.
// One the writer woke gives up the room it was woken for: it wakes the
// next waiter in its place, so that no room is left unclaimed while
// senders wait (the writer wakes only as many as there is room for). A
// signal that came meanwhile stays in wake, and makes its next wait look
// again at once: harmless.
func (q *Queue) forget(wake chan struct{}) {
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
	if q.n < len(q.queue) {
		q.openRoom(1)
	}
}

func (q *Queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// writer sends the queue, in batches, whenever a direct write is not in
// progress; after close it sends what is left and exits.
func (q *Queue) writer() {
	defer close(q.done)
	for {
		<-q.wake
		q.mu.Lock()
		for q.n > 0 && !q.busy {
			msgs := q.queue[:q.n]
			q.queue, q.spare, q.n = q.spare, q.queue, 0
			q.busy = true
			q.openRoom(len(q.queue))
			q.mu.Unlock()
			if transport.GSO(q.tc) {
				// Datagrams to one destination side by side: the
				// socket sends each run of them as one train.
				if q.byDest == nil {
					q.byDest = new(grouper)
				}
				msgs = q.byDest.group(msgs)
			}
			q.write(msgs)
			q.mu.Lock()
			q.busy = false
			q.wrote(len(msgs))
		}
		last := q.closed && q.n == 0 && !q.busy
		q.mu.Unlock()
		if last {
			return
		}
	}
}

// leaveBatching is how many lone datagrams in a row from the writer end
// the Queue's batching: sends then write directly again.
const leaveBatching = 8

// startBatching makes every send queue for the writer; q.mu is held.
func (q *Queue) startBatching() {
	q.batching = q.canBatch
}

// Burst tells q that several sends are coming at once: a reader took
// several datagrams from the socket in one read, and the replies to them
// (the core's, and the Writes of the goroutines their payloads wake)
// follow. They then queue for the writer, which sends each batch that
// formed meanwhile with one batched write to their several
// destinations, instead of each sender writing its own.
func (q *Queue) Burst() {
	if !q.canBatch {
		return
	}
	q.mu.Lock()
	q.startBatching()
	q.mu.Unlock()
}

// wrote notes the writer's batch of n datagrams; q.mu is held.
func (q *Queue) wrote(n int) {
	if n > 1 {
		q.singles = 0 // batches form
		return
	}
	if q.n > 0 {
		return // more came meanwhile: the next batch tells
	}
	q.singles = min(q.singles+1, leaveBatching)
	if q.singles == leaveBatching {
		q.batching = false
	}
}

// grouper reorders a batch of datagrams so that those to one destination
// are side by side, without allocating: a counting sort by destination,
// in the order the destinations first appear, that keeps the order of
// each destination's datagrams (their sequence order).
type grouper struct {
	gen    uint32
	slots  [2 * Len]groupSlot // open addressing over the destinations of one batch
	gids   [Len]uint16        // each datagram's destination, by first appearance
	starts [Len]int
	out    [Len]transport.Message
}

type groupSlot struct {
	addr netip.AddrPort
	gen  uint32 // the batch it was filled in; older is empty
	gid  uint16
}

// group returns msgs (at most Len) grouped by destination: msgs itself
// when no destination repeats, else g's own array, whose entries share
// msgs' buffers.
func (g *grouper) group(msgs []transport.Message) []transport.Message {
	g.gen++
	if g.gen == 0 { // wrapped: forget every slot
		g.slots = [2 * Len]groupSlot{}
		g.gen = 1
	}
	n := 0 // destinations
	for i := range msgs {
		a := msgs[i].Addr
		s := hashAddr(a) % uint64(len(g.slots))
		for g.slots[s].gen == g.gen && g.slots[s].addr != a {
			s = (s + 1) % uint64(len(g.slots))
		}
		sl := &g.slots[s]
		if sl.gen != g.gen {
			*sl = groupSlot{addr: a, gen: g.gen, gid: uint16(n)}
			g.starts[n] = 0
			n++
		}
		g.gids[i] = sl.gid
		g.starts[sl.gid]++
	}
	if n == len(msgs) {
		return msgs
	}
	at := 0
	for d := range n {
		at, g.starts[d] = at+g.starts[d], at
	}
	for i := range msgs {
		d := g.gids[i]
		g.out[g.starts[d]] = msgs[i]
		g.starts[d]++
	}
	return g.out[:len(msgs)]
}

// hashAddr mixes an address and port for grouper's table.
func hashAddr(a netip.AddrPort) uint64 {
	b := a.Addr().As16()
	h := binary.LittleEndian.Uint64(b[:8])*0x9e3779b97f4a7c15 ^ binary.LittleEndian.Uint64(b[8:])
	h = (h ^ uint64(a.Port())) * 0xff51afd7ed558ccd
	return h ^ h>>32
}

// openRoom wakes the first n senders waiting for room, in the order they
// began to wait; q.mu is held. The writer wakes as many as the queue has
// room for, each needing one or two slots, not every waiter: with
// thousands of connections waiting on a full queue, waking them all for
// each batch would make each batch cost a wake-up per connection, most
// of which find the queue full again.
func (q *Queue) openRoom(n int) {
	n = min(n, len(q.waiters))
	for i, w := range q.waiters[:n] {
		select {
		case w <- struct{}{}:
		default: // a signal is pending already
		}
		q.waiters[i] = nil
	}
	rest := copy(q.waiters, q.waiters[n:])
	clear(q.waiters[rest:])
	q.waiters = q.waiters[:rest]
}

// Close sends what is queued and stops the writer; later sends fail, and
// sends waiting for room give up. Call it after the last send that
// matters (the Listener's Close, after the core's disconnects) and before
// closing the socket.
func (q *Queue) Close() {
	q.mu.Lock()
	q.closed = true
	q.openRoom(len(q.waiters))
	q.mu.Unlock()
	q.signal()
	<-q.done
}

// Traffic counts datagrams and their bytes, one way, with two atomic adds
// per batch.
type Traffic struct{ packets, bytes atomic.Uint64 }

// Add counts packets datagrams of bytes bytes in all.
func (t *Traffic) Add(packets, bytes int) {
	t.packets.Add(uint64(packets))
	t.bytes.Add(uint64(bytes))
}

// AddAll counts every datagram of ms.
func (t *Traffic) AddAll(ms []transport.Message) {
	n := 0
	for i := range ms {
		n += len(ms[i].Buf)
	}
	t.Add(len(ms), n)
}

// WriteNow writes msgs at once from the caller's goroutine, outside the
// queue's order and its writer, and counts them as the queue's. It is for
// destinations whose writes never block and may run beside the queue's
// (a bridge Mux's WebSocket sessions, each with a send queue of its own):
// it never waits.
func (q *Queue) WriteNow(msgs []transport.Message) { q.write(msgs) }

// write sends msgs with WriteAll and counts what the socket took and
// what it refused.
func (q *Queue) write(msgs []transport.Message) {
	refused, refusedBytes := WriteAll(q.tc, msgs)
	q.refused.Add(uint64(refused))
	n := 0
	for i := range msgs {
		n += len(msgs[i].Buf)
	}
	q.sent.Add(len(msgs)-refused, n-refusedBytes)
}

// WriteAll sends msgs with as few batched writes as the socket allows,
// skipping datagrams it refuses, and returns how many it refused and
// their bytes.
func WriteAll(tc transport.Conn, msgs []transport.Message) (refused, refusedBytes int) {
	for len(msgs) > 0 {
		batch := msgs[:min(len(msgs), Batch)]
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

// Dropped is the number of droppable datagrams (keep-alives) dropped on a
// full queue.
func (q *Queue) Dropped() uint64 { return q.dropped.Load() }

// Refused is the number of datagrams the socket refused to send.
func (q *Queue) Refused() uint64 { return q.refused.Load() }

// Sent returns the datagrams the socket took and their bytes.
func (q *Queue) Sent() (packets, bytes uint64) { return q.sent.Packets(), q.sent.Bytes() }

// Packets is the number of datagrams counted.
func (t *Traffic) Packets() uint64 { return t.packets.Load() }

// Bytes is the number of bytes counted.
func (t *Traffic) Bytes() uint64 { return t.bytes.Load() }
