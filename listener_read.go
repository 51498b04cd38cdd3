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

	"github.com/gonetcode/netcode/internal/engine"
	"github.com/gonetcode/netcode/internal/server"
	"github.com/gonetcode/netcode/internal/transport"
	"github.com/gonetcode/netcode/protocol"
)

// shard is a Listener's binding to one socket's engine (an
// engine.Socket of role Many): the engine's reader, or a Conn's Read that
// pulls, hands it what it reads, in the socket's read turn (Receive).
// Order: the read turn → the Conns' write turns → the core's locks.
type shard struct {
	l    *Listener
	sock *engine.Socket
	q    *sendQueue // the socket's send queue: the replies to what is read
	reception

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
	now   bool // pushed by a transport.DirectWriter: replies are written at once (Listener.actNow)
}

// send sends what the core's calls put in r.out, through sh's send queue
// or, pushed, at once; it never waits.
func (r *reception) send(sh *shard) {
	if r.now {
		sh.l.actNow(sh.q, &r.out)
		return
	}
	sh.l.actOn(sh.q, &r.out, noWait, nil)
}

func (l *Listener) newShard(sock transport.Conn, q *sendQueue) *shard {
	sh := &shard{l: l, q: q, reception: reception{rcv: l.core.NewReceiver()}}
	sh.sock = engine.NewSocket(sock, engine.Many, readBatch, sh, l.closing)
	return sh
}

// push makes sh act on the datagrams p pushes (transport.Pusher): in the
// goroutine that received them, at once, with a reception of its own. Reads
// then never read the socket: a pulling Read would wait there while its
// payload came pushed.
func (sh *shard) push(p transport.Pusher, direct bool) {
	l := sh.l
	sh.pushed = &sync.Pool{New: func() any { return &reception{rcv: l.core.NewReceiver(), now: direct} }}
	sh.sock.NoPull()
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

// readLoop reads sh's socket until Close, while no Read does (the
// engine's loop, Socket.Run). It keeps the read turn when it ends, so that
// no Read reads the socket after Close, and Close, which waits for it,
// finds no Read acting on a datagram (queueing a Conn for Accept) after it.
func (l *Listener) readLoop(sh *shard) {
	defer l.wg.Done()
	err := sh.sock.Run(func(err error) {
		l.log.Debug("netcode: read error, retrying", "addr", l.addr.String(), "err", err)
	})
	if err != nil {
		l.log.Error("netcode: reading the socket failed; the listener receives nothing more", "addr", l.addr.String(), "err", err)
	}
}

// Receive is engine.Receiver's: it hands a batch of datagrams to the core
// and sends the replies together through the send queue, after the
// core's calls; it runs in the read turn.
func (sh *shard) Receive(ms []transport.Message) {
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

// Bulk is msgconn.Bulker's: nothing to do, a Listener's sockets read
// coalesced trains (GRO) already.
func (e *serverEndpoint) Bulk() {}

// A server Conn's endpoint is a pullEndpoint (newConn).
var _ socketEndpoint = (*serverEndpoint)(nil)
