package cute

import (
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetcode/netcode/cute/internal/layer"
	"github.com/gonetcode/netcode/internal/deadline"
	"github.com/gonetcode/netcode/internal/engine"
)

// MaxMessageBytes is the largest message MessageConfig.MaxMessageBytes
// allows: what a Cute Framework receiver accepts.
const MaxMessageBytes = layer.MaxMessageBytes

// DefaultMaxMessageBytes is the largest message of a zero MessageConfig.
const DefaultMaxMessageBytes = layer.DefaultMaxMessageBytes

// MessageConfig tunes Cute Framework's client/server layer on a Conn: the
// ack system and reliability transport that cf_client_send and
// cf_server_send run every message through. The zero value is the safe
// default.
type MessageConfig struct {
	// MaxMessageBytes is the largest message sent or received; 0 means
	// DefaultMaxMessageBytes (256 KiB), at most MaxMessageBytes. A larger
	// Write fails with ErrPayloadTooLarge; a peer's larger message is
	// refused unacknowledged.
	MaxMessageBytes int
	// MaxBufferedBytes bounds what a Conn holds of the peer's messages:
	// fragments being reassembled and messages waiting for Read. 0 means
	// 1 MiB, raised to MaxMessageBytes. Past it, reliable fragments are
	// refused unacknowledged (the peer resends them later) and
	// fire-and-forget ones are dropped.
	MaxBufferedBytes int
	// MaxSendQueueBytes bounds the reliable messages written and not yet
	// handed out as fragments (at most 32 fragments are unacknowledged at
	// once); a Write past it fails with ErrSendQueueFull. 0 means 1 MiB,
	// raised to MaxMessageBytes.
	MaxSendQueueBytes int
	// AckTimeout ends, with ErrAckTimeout, a connection whose peer keeps
	// sending but has not acknowledged a reliable fragment for this long
	// (after 5 resends). A peer that sends nothing is not given up on: a
	// Cute Framework peer acknowledges only with its own messages, and
	// ServerConfig.ConnectionTimeout ends one that is gone. 0 means 10 s;
	// negative never gives up.
	AckTimeout time.Duration
	// Linger is how long Close waits for the peer to acknowledge the
	// reliable messages written before it. 0 means 5 s; negative does not
	// wait.
	Linger time.Duration
}

// DefaultLinger is the default MessageConfig.Linger.
const DefaultLinger = 5 * time.Second

// ErrMessageConfig: a MessageConfig field out of range.
var ErrMessageConfig = errors.New("cute: invalid MessageConfig")

// layerConfig is cfg as package layer takes it.
func (cfg MessageConfig) layerConfig() layer.Config {
	return layer.Config{
		MaxMessageBytes:   cfg.MaxMessageBytes,
		MaxBufferedBytes:  cfg.MaxBufferedBytes,
		MaxSendQueueBytes: cfg.MaxSendQueueBytes,
		AckTimeout:        cfg.AckTimeout,
	}
}

// check reports whether cfg is valid.
func (cfg MessageConfig) check() error {
	if _, err := layer.New(time.Time{}, cfg.layerConfig(), nil); err != nil {
		return ErrMessageConfig
	}
	return nil
}

// Errors of the client/server layer.
var (
	// ErrEmptyMessage: a Write of 0 bytes. Cute Framework refuses them too
	// (cf_client_send, cf_server_send): an empty reliable message would
	// stall its receiver's stream for good.
	ErrEmptyMessage = errors.New("cute: empty message")
	// ErrSendQueueFull: MessageConfig.MaxSendQueueBytes of reliable
	// messages (or 1024 of them) wait for the peer's acks.
	ErrSendQueueFull = errors.New("cute: reliable send queue full")
	// ErrAckTimeout: the peer stopped acknowledging reliable messages.
	ErrAckTimeout = errors.New("cute: peer does not acknowledge")
	// ErrBareProtocol: a reliable Send on a Conn of the bare protocol
	// layer, which has no reliability.
	ErrBareProtocol = errors.New("cute: reliable send on a bare protocol Conn")
)

// messages runs the client/server layer (package layer's Transport) over
// a Conn's protocol payloads: every message goes out as layer datagrams,
// each sealed into one PAYLOAD packet by the Conn's bare Write, and every
// PAYLOAD the bare Conn receives is a layer datagram. The socket's read
// turn hands each PAYLOAD to the layer (receive), in the reader's batch,
// with no hand-off to another goroutine. The layer's Update runs when it
// is due on the socket engine's deadline mechanism (engine.Due: a timer
// whose callback, fire, runs only then), so an idle Conn costs no
// goroutine; nothing of the layer reads the socket. The bare Conn's end
// (the peer's disconnect, a timeout, Close) ends the layer's Reads, which
// watch its Done channel.
//
// Lock order: sendMu → mu. mu guards the Transport and is held for no
// I/O: datagrams the layer emits under it are sent after it is released,
// under sendMu alone, which keeps the layer's ack sequence in send order.
type messages struct {
	c *Conn

	sendMu sync.Mutex
	mu     sync.Mutex
	t      *layer.Transport
	pend   [][]byte // datagrams emitted under mu, sent under sendMu
	npend  int
	err    error // why the layer stopped (ErrAckTimeout), or nil
	closed bool  // Close was called

	ready chan struct{} // a message may be waiting
	// avail: a message waits for Read (set under mu, read without it:
	// a dialed Conn holds its Writes while one does, see Conn.readable).
	avail atomic.Bool
	// flushHeld, on a dialed Conn, sends the Writes it holds for a train
	// (engine.Held.Flush): a Read that finds no message calls it before
	// it waits, as a bare Conn's Read does before it pulls.
	flushHeld func()
	progress  chan struct{} // the layer took a datagram or ran Update
	linger    time.Duration
	ended     chan struct{} // closed when the layer stops (err is set)
	due       engine.Due    // runs fire when the layer's Update is due
	rd        deadline.Deadline
}

// startMessages makes c speak the client/server layer and arms its timer.
// Call it once the connection exists, before c is handed out; flushHeld
// (nil for a server Conn) sends the Writes a dialed Conn holds.
func (c *Conn) startMessages(now time.Time, cfg MessageConfig, flushHeld func()) error {
	ml := &messages{c: c, ready: make(chan struct{}, 1), progress: make(chan struct{}, 1),
		ended: make(chan struct{}), linger: cfg.Linger, flushHeld: flushHeld}
	if ml.linger == 0 {
		ml.linger = DefaultLinger
	}
	t, err := layer.New(now, cfg.layerConfig(), ml.emit)
	if err != nil {
		return err
	}
	ml.t = t
	ml.due.Init(nil, c.m.Done(), ml.fire)
	c.ml = ml
	c.feed.Store(ml)
	ml.drain() // what the bare Conn queued before the feed was set
	ml.mu.Lock()
	ml.rearm()
	ml.mu.Unlock()
	return nil
}

// emit keeps a datagram the layer sends, for flush. Called under mu.
func (ml *messages) emit(b []byte) {
	if ml.npend == len(ml.pend) {
		ml.pend = append(ml.pend, make([]byte, 0, layer.MaxDatagram))
	}
	ml.pend[ml.npend] = append(ml.pend[ml.npend][:0], b...)
	ml.npend++
}

// flush sends the datagrams emitted, each as one PAYLOAD, several (a
// message's fragments, Update's resends) with one batched write a train
// (the bare Conn's WriteBatch). Called under sendMu, without mu.
func (ml *messages) flush() error {
	var err error
	switch ml.npend {
	case 0:
	case 1:
		_, err = ml.c.m.Write(ml.pend[0])
	default:
		_, err = ml.c.m.WriteBatch(ml.pend[:ml.npend])
	}
	ml.npend = 0
	return err
}

// rearm arms the timer for the layer's next due time, when that is sooner
// than the one armed (engine.Due.Schedule: a timer that fires early only
// runs an Update with nothing to do, and one reset for every message
// would cost a timer each); fire, whose deadline passed, arms it anew.
// Called under mu, so that the latest due time is the one armed.
func (ml *messages) rearm() { ml.due.Schedule(ml.t.NextDue()) }

// settle, after the layer took a datagram or gave a message out, records
// whether a message waits for Read (avail) and arms the timer for its
// next due time; it reports whether one waits. Called under mu.
func (ml *messages) settle() bool {
	_, _, ok := ml.t.Peek()
	ml.avail.Store(ok)
	ml.rearm()
	return ok
}

// fire is the timer's callback: the layer's Update, when it is due. A
// peer that stopped acknowledging ends the Conn.
func (ml *messages) fire() {
	if err := ml.update(); err != nil {
		ml.stop(ml.c.m.OpErr("read", err))
		ml.c.m.Close()
		return
	}
	ml.progressed()
}

// drain gives the layer what the bare Conn queued before the read turn
// fed the layer (Conn.deliver), if anything.
func (ml *messages) drain() {
	var buf [MaxPayloadBytes]byte
	for {
		n, err := ml.c.m.TryRead(buf[:])
		if err != nil {
			return
		}
		ml.receive(buf[:n])
	}
}

// endErr is the error a Read or Write gets once the bare Conn has ended
// (its Read's: io.EOF after the peer's disconnect), or nil.
func (ml *messages) endErr(op string) error {
	select {
	case <-ml.c.m.Done():
	default:
		return nil
	}
	err := ml.c.m.Err()
	if err == io.EOF && op == "read" {
		return io.EOF // unwrapped, as package net returns it
	}
	return ml.c.m.OpErr(op, err)
}

// receive gives the layer a datagram the peer sent. It is called in the
// socket's read turn, and holds mu only.
func (ml *messages) receive(p []byte) {
	ml.mu.Lock()
	_ = ml.t.Receive(p) // refusals are counted in the layer's Stats
	ok := ml.settle()
	ml.mu.Unlock()
	if ok {
		ml.signal()
	}
	ml.progressed()
}

// update runs the layer's Update and sends what it emits. It fails only
// with ErrAckTimeout: a send that fails because the connection ended is
// the next Read's to report.
func (ml *messages) update() error {
	ml.sendMu.Lock()
	defer ml.sendMu.Unlock()
	ml.mu.Lock()
	err := ml.t.Update(time.Now())
	ml.rearm()
	ml.mu.Unlock()
	_ = ml.flush()
	if errors.Is(err, layer.ErrAckTimeout) {
		return ErrAckTimeout
	}
	return nil
}

// stop records why the layer stopped and wakes every Read; the first
// call counts.
func (ml *messages) stop(err error) {
	ml.mu.Lock()
	first := ml.err == nil
	if first {
		ml.err = err
	}
	ml.mu.Unlock()
	if first {
		close(ml.ended)
	}
}

// signal wakes one waiting Read.
func (ml *messages) signal() {
	select {
	case ml.ready <- struct{}{}:
	default:
	}
}

// send sends one message.
func (ml *messages) send(b []byte, reliable bool) (int, error) {
	ml.sendMu.Lock()
	defer ml.sendMu.Unlock()
	ml.mu.Lock()
	if ml.closed || ml.err != nil || ml.endErr("write") != nil {
		var err error = net.ErrClosed
		if !ml.closed {
			switch {
			case errors.Is(ml.err, ErrAckTimeout):
				err = ErrAckTimeout
			case ml.c.m.Err() != nil:
				err = ml.c.m.Err() // io.EOF, a timeout: as the bare Conn's Write says
			}
		}
		ml.mu.Unlock()
		return 0, ml.c.m.OpErr("write", err)
	}
	err := ml.t.Send(b, reliable)
	if err == nil && reliable {
		// Hand the fragments out now rather than at the next Update.
		err = ml.t.Update(time.Now())
	}
	ml.rearm()
	ml.mu.Unlock()
	ferr := ml.flush()
	switch {
	case errors.Is(err, layer.ErrEmpty):
		return 0, ml.c.m.OpErr("write", ErrEmptyMessage)
	case errors.Is(err, layer.ErrTooLarge):
		return 0, ml.c.m.OpErr("write", ErrPayloadTooLarge)
	case errors.Is(err, layer.ErrSendQueueFull):
		return 0, ml.c.m.OpErr("write", ErrSendQueueFull)
	case errors.Is(err, layer.ErrAckTimeout):
		return 0, ml.c.m.OpErr("write", ErrAckTimeout)
	case ferr != nil && reliable && errors.Is(ferr, os.ErrDeadlineExceeded):
		// The layer holds the message and resends its fragments: it is
		// taken, and failing would make a retry send it twice.
		return len(b), nil
	case ferr != nil:
		return 0, ferr
	}
	return len(b), nil
}

// read reads one message.
func (ml *messages) read(b []byte) (int, bool, error) {
	for {
		ml.mu.Lock()
		if ml.closed {
			ml.mu.Unlock()
			return 0, false, ml.c.m.OpErr("read", net.ErrClosed)
		}
		if m, reliable, ok := ml.t.Peek(); ok {
			if len(b) < len(m) {
				ml.mu.Unlock()
				return 0, reliable, io.ErrShortBuffer
			}
			n := copy(b, m)
			ml.t.Pop()
			more := ml.settle()
			ml.mu.Unlock()
			if more {
				ml.signal()
			}
			return n, reliable, nil
		}
		err := ml.err
		ml.mu.Unlock()
		if err == nil {
			err = ml.endErr("read")
		}
		if err != nil {
			return 0, false, err
		}
		if ml.rd.Expired() {
			return 0, false, ml.c.m.OpErr("read", os.ErrDeadlineExceeded)
		}
		if ml.flushHeld != nil {
			ml.flushHeld() // the Writes held while messages waited leave now
		}
		select {
		case <-ml.ready:
		case <-ml.ended:
		case <-ml.c.m.Done():
		case <-ml.rd.Wait():
		}
	}
}

// close waits up to the linger for the peer to acknowledge what was
// sent, then ends the connection and stops the timer (waiting for a
// callback running).
func (ml *messages) close() error {
	ml.mu.Lock()
	was := ml.closed
	ml.closed = true
	ml.mu.Unlock()
	if ml.flushHeld != nil {
		ml.flushHeld() // what it holds is sent now, not after the linger
	}
	if !was && ml.linger > 0 {
		ml.lingerOn()
	}
	err := ml.c.m.Close()
	ml.due.Stop()
	ml.rd.Stop()
	if was {
		return err
	}
	return nil
}

// lingerOn waits until the peer acknowledged every reliable message, the
// connection ended or the linger passed.
func (ml *messages) lingerOn() {
	timer := time.NewTimer(ml.linger)
	defer timer.Stop()
	for {
		ml.mu.Lock()
		left := ml.t.Unacked() + ml.t.Queued()
		ml.mu.Unlock()
		if left == 0 {
			return
		}
		select {
		case <-ml.progress:
		case <-ml.ended:
			return
		case <-ml.c.m.Done():
			return
		case <-timer.C:
			return
		}
	}
}

// progressed wakes a lingering Close.
func (ml *messages) progressed() {
	select {
	case ml.progress <- struct{}{}:
	default:
	}
}

// isClosed reports whether Close was called.
func (ml *messages) isClosed() bool {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	return ml.closed
}

// stopErr is why the layer stopped (ErrAckTimeout), or nil.
func (ml *messages) stopErr() error {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	return ml.err
}

// stats returns the layer's counters.
func (ml *messages) stats() layer.Stats {
	ml.mu.Lock()
	defer ml.mu.Unlock()
	return ml.t.Stats()
}
