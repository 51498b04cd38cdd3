package netcode

// The read side of a Listener's sockets: each has a reader goroutine
// (readLoop), which reads it while no Read does, and its Conns' Reads,
// which read it themselves (serverEndpoint.Pull, for msgconn.Puller) when
// they find nothing queued and the socket's read turn free. A Read that
// reads the socket acts on every datagram it reads, as the reader does
// (other Conns' payloads go to their read queues, handshakes are
// answered), and takes its own payload with no hand-off between
// goroutines: with few clients that hand-off, a wake of another thread
// per payload, was most of a payload's cost.

import (
	"sync"
	"time"

	"github.com/gonetcode/netcode/internal/server"
	"github.com/gonetcode/netcode/internal/transport"
	"github.com/gonetcode/netcode/protocol"
)

// pullBound bounds a pulling Read's wait on the socket: past it the Read
// looks again at whether its Conn has ended (a peer's timeout, which the
// ticker applies, does not wake a read of the socket). The socket's
// deadline is moved only once less than half of it is left, so that a
// busy Conn does not move a timer per payload.
const pullBound = 200 * time.Millisecond

// shard is one socket's read side. The read turn (rt) goes with ms, its
// reception and the socket's read deadline: a Read that pulls reads with
// its Conn's read deadline, bounded by pullBound (moved by SetReadDeadline
// under dmu while it waits), the reader with none.
// Order: the read turn → the Conns' write turns → the core's locks; dmu is
// a leaf.
type shard struct {
	l    *Listener
	sock transport.Conn
	q    *sendQueue // the socket's send queue: the replies to what is read
	rt   *readTurn

	ms []transport.Message
	reception
	// onePeer: the last batch read came from one address. Only then may
	// the turn go to a Read: with several clients sending, a Read that
	// reads the socket would mostly hand other Conns' payloads over, as
	// the reader does, in smaller batches.
	onePeer bool

	socketPull                 // noPull, and dmu, which also guards puller and its Conns' rdl
	puller     *serverEndpoint // the Conn whose Read reads the socket, if any

	// pushed lends a reception to each goroutine a pushing socket
	// (transport.Pusher) acts on its datagrams in; nil for another socket.
	pushed *sync.Pool
}

// reception is what acting on datagrams takes: the core's Receiver, the
// Output its calls fill and the clients whose handshake a batch completed.
// One goroutine uses it at a time: a shard's own in its read turn, and
// one of its pushed pool in the goroutine that pushes.
type reception struct {
	rcv   *server.Receiver
	out   server.Output
	fresh []*server.Client
	now   bool // pushed: replies are written at once (Listener.actNow)
}

// send sends what the core's calls put in r.out, through sh's send queue
// or, pushed, at once; it never waits.
func (r *reception) send(sh *shard) {
	if r.now {
		sh.l.actNow(sh.q, &r.out)
		return
	}
	sh.l.actOn(sh.q, &r.out, noWait, nil, nil)
}

func (l *Listener) newShard(sock transport.Conn, q *sendQueue) *shard {
	return &shard{
		l:         l,
		sock:      sock,
		q:         q,
		rt:        newReadTurn(true, sock),
		ms:        transport.NewMessages(readBatch),
		reception: reception{rcv: l.core.NewReceiver()},
	}
}

// push makes sh act on the datagrams p pushes (transport.Pusher): in the
// goroutine that received them, at once, with a reception of its own. Reads
// then never read the socket: a pulling Read would wait there while its
// payload came pushed.
func (sh *shard) push(p transport.Pusher) {
	l := sh.l
	sh.pushed = &sync.Pool{New: func() any { return &reception{rcv: l.core.NewReceiver(), now: true} }}
	sh.noPull.Store(true)
	p.Push(sh.take)
}

// take is the sink of a pushing socket: it acts on ms as the reader acts
// on a batch, unless the Listener is closing (Close waits for the socket,
// which waits for its pushing goroutines, before it empties Accept's
// queue).
func (sh *shard) take(ms []transport.Message) {
	select {
	case <-sh.l.closing:
		return
	default:
	}
	r := sh.pushed.Get().(*reception)
	r.act(sh, ms)
	sh.pushed.Put(r)
}

// readLoop reads sh's socket until Close, while no Read does. It keeps
// the read turn when it ends, so that no Read reads the socket after
// Close, and Close, which waits for it, finds no Read acting on a
// datagram (queueing a Conn for Accept) after it.
func (l *Listener) readLoop(sh *shard) {
	defer l.wg.Done()
	if !sh.rt.take(l.closing) {
		return
	}
	err := transport.ReadLoopTurns(sh.sock, sh.ms, l.closing, sh.handle, func(err error) {
		l.log.Debug("netcode: read error, retrying", "addr", l.addr.String(), "err", err)
	}, shardTurn{sh}, true)
	if err != nil {
		l.log.Error("netcode: reading the socket failed; the listener receives nothing more", "addr", l.addr.String(), "err", err)
	}
}

// shardTurn is a socket's read turn as the reader's loop sees it.
type shardTurn struct{ sh *shard }

func (t shardTurn) Wanted() bool {
	return t.sh.onePeer && t.sh.rt.wanted() && !t.sh.noPull.Load()
}

func (t shardTurn) Yield() {
	if t.sh.rt.yield(t.sh.l.closing) {
		t.sh.readerDeadline()
	}
}

// handle hands a batch of datagrams to the core and sends the replies
// together through the send queue, after the core's calls; it runs in the
// read turn.
func (sh *shard) handle(ms []transport.Message) {
	sh.onePeer = fromOnePeer(ms)
	if len(ms) > 1 {
		sh.q.Burst() // their replies leave together
	}
	sh.reception.act(sh, ms)
}

// act hands ms, datagrams read from or pushed by sh's socket, to the core
// with r, and sends the replies together after the core's calls (r.send);
// Conns that ms connected go to Accept's queue.
func (r *reception) act(sh *shard, ms []transport.Message) {
	l, out := sh.l, &r.out
	l.received.AddAll(ms)
	now := time.Now()
	for i := range ms {
		if len(ms[i].Buf) > protocol.MaxPacketBytes {
			continue
		}
		if sc := r.rcv.Receive(now, ms[i].Addr, ms[i].Buf, out); sc != nil {
			r.fresh = append(r.fresh, sc)
		}
	}
	r.send(sh)
	if len(r.fresh) == 0 {
		return
	}
	// Only now, with the keep-alives that confirm them handed to the
	// send queue, may Accept see the new Conns: a Write or Close right
	// after Accept goes through the same queue, behind them, so the
	// client hears that it is connected before any payload or disconnect.
	for i, sc := range r.fresh {
		l.connected(sc, out, sh, r.now)
		r.fresh[i] = nil
	}
	r.fresh = r.fresh[:0]
	l.wakeTicker()
	r.send(sh) // disconnects of a full backlog
}

// fromOnePeer reports whether ms all came from one address.
func fromOnePeer(ms []transport.Message) bool {
	for i := 1; i < len(ms); i++ {
		if ms[i].Addr != ms[0].Addr {
			return false
		}
	}
	return true
}

// readerDeadline clears the socket's read deadline that a Read's Pull
// left, for the reader, which has just taken the read turn back.
func (sh *shard) readerDeadline() {
	sh.dmu.Lock()
	if !sh.sockDL.IsZero() {
		_ = sh.sock.SetReadDeadline(time.Time{})
		sh.sockDL = time.Time{}
	}
	sh.dmu.Unlock()
}

// pullDeadline is the socket's read deadline for a Read whose Conn's read
// deadline is rdl: rdl, or pullBound from now if that is sooner; a
// deadline already set is kept while more than half of pullBound is left.
// sh.dmu is held.
func (sh *shard) pullDeadline(rdl, now time.Time) time.Time {
	bound := now.Add(pullBound)
	if !rdl.IsZero() && !rdl.After(bound) {
		return rdl
	}
	if cur := sh.sockDL; cur.After(now.Add(pullBound/2)) && !cur.After(bound) && (rdl.IsZero() || !cur.After(rdl)) {
		return cur
	}
	return bound
}

// Pull is msgconn.Puller's: a Read reads the socket itself if the read
// turn is free.
func (e *serverEndpoint) Pull() (bool, error) {
	sh := e.sh
	if sh.noPull.Load() || !sh.rt.tryTake() {
		return false, nil
	}
	select {
	case <-sh.l.closing: // the socket is closed or closing: the queue ends
		sh.rt.release(false)
		return false, nil
	default:
	}
	if e.c.Queue().Len() > 0 {
		// A payload was queued after this Read looked and before the
		// turn was free: read it first.
		sh.rt.release(false)
		return true, nil
	}
	return sh.pull(sh.rt, sh.sock, sh.ms, e)
}

// The pullOwner methods of a server Conn: its Reads pull with their own
// deadline, bounded by pullBound (shard.pullDeadline), and the reader
// takes the socket back when the last batch came from several clients.

func (e *serverEndpoint) pullDeadline() time.Time {
	return e.sh.pullDeadline(e.rdl, time.Now())
}

func (e *serverEndpoint) setPulling(on bool) {
	if on {
		e.sh.puller = e
	} else {
		e.sh.puller = nil
	}
}

func (e *serverEndpoint) readDeadline() time.Time        { return e.rdl }
func (e *serverEndpoint) receive(ms []transport.Message) { e.sh.handle(ms) }
func (e *serverEndpoint) giveBack() bool                 { return !e.sh.onePeer }

// A server Conn's endpoint is a pullEndpoint (newConn).
var _ socketEndpoint = (*serverEndpoint)(nil)

// Bulk is msgconn.Bulker's: nothing to do, a Listener's sockets read
// coalesced trains (GRO) already.
func (e *serverEndpoint) Bulk() {}

// Waiting is msgconn.Puller's: Reads waiting on their read queue.
func (e *serverEndpoint) Waiting(delta int32) { e.sh.rt.wait(delta) }

// Freed is msgconn.Puller's: the read turn may be free.
func (e *serverEndpoint) Freed() <-chan struct{} { return e.sh.rt.freed }

// Pass is msgconn.Puller's: a wake from Freed that a Read did not use.
func (e *serverEndpoint) Pass() { e.sh.rt.pass() }

// SetReadDeadline is msgconn.Puller's: the Conn's read deadline, for the
// socket reads of Pull.
func (e *serverEndpoint) SetReadDeadline(t time.Time) {
	sh := e.sh
	sh.dmu.Lock()
	e.rdl = t
	if sh.puller == e {
		dl := sh.pullDeadline(t, time.Now())
		_ = sh.sock.SetReadDeadline(dl)
		sh.sockDL = dl
	}
	sh.dmu.Unlock()
}

// stopPull ends the socket read of a Read of e's Conn, if one is in
// progress: Close does not wait for the next datagram.
func (e *serverEndpoint) stopPull() {
	sh := e.sh
	sh.dmu.Lock()
	if sh.puller == e {
		past := time.Unix(1, 0)
		_ = sh.sock.SetReadDeadline(past)
		sh.sockDL = past
	}
	sh.dmu.Unlock()
}
