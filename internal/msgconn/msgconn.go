// Package msgconn is the dialect-free part of a message-oriented
// connection, shared by netcode's Conn and package cute's: the bounded read
// queue (one packetq.Queue per connection), the write deadline, Close, the
// write turn, and the errors of package net (os.ErrDeadlineExceeded,
// net.ErrClosed, io.EOF unwrapped), each naming both ends. The dialect
// supplies how a payload is sent and how the connection is closed towards
// the peer. Accept is the Listeners' side: taking a connection from the
// accept queue.
package msgconn

import (
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetcode/netcode/internal/deadline"
	"github.com/gonetcode/netcode/internal/monoclock"
	"github.com/gonetcode/netcode/internal/packetq"
	"github.com/gonetcode/netcode/internal/sendq"
)

// Endpoint is the dialect- and side-specific part of a Conn.
type Endpoint interface {
	// SendPayload sends one payload. If it has to wait (a full send
	// queue, the write turn), it gives up when stop is closed (the
	// connection ended) with sendq.ErrStopped or when deadline is (the
	// write deadline passed) with os.ErrDeadlineExceeded.
	SendPayload(now time.Time, payload []byte, stop, deadline <-chan struct{}) error
	// ClosePeer ends the connection from this side (sends the
	// disconnects). It must not wait on the socket.
	ClosePeer()
}

// BatchEndpoint is an Endpoint that sends several payloads at once: sealed
// one packet each, as SendPayload seals one, and handed to the socket
// together, so that a socket with batched writes sends them in one system
// call (a UDP GSO train, or one sendmmsg).
type BatchEndpoint interface {
	// SendPayloads sends ps in order, each as one payload, waiting and
	// giving up as SendPayload does. It returns how many it sent; if
	// fewer than len(ps), err says why the rest were not.
	SendPayloads(now time.Time, ps [][]byte, stop, deadline <-chan struct{}) (int, error)
}

// Puller is an Endpoint whose Reads may take datagrams straight from its
// socket: a lone Read then reads the socket itself instead of waiting for
// a reader goroutine to hand it the payload through the read queue.
type Puller interface {
	// Pull reads the socket once on the caller's goroutine, if no other
	// goroutine is reading it, waiting until datagrams come, the read
	// deadline passes or the connection ends; it acts on them as the
	// reader goroutine would (a payload goes to the read queue) and
	// reports true, with os.ErrDeadlineExceeded once the read deadline
	// has passed. It reports false at once if the socket is being read
	// elsewhere: the Read then waits on the queue, with Waiting(1)
	// before and Waiting(-1) after, and until Freed's channel says
	// the socket may be free. A Read that took a wake from Freed and
	// then found its payload queued, without pulling, calls Pass, so
	// that another Read waiting gets the wake.
	Pull() (bool, error)
	Waiting(delta int32)
	Freed() <-chan struct{}
	Pass()
	// SetReadDeadline tells the Puller the Conn's read deadline, for the
	// socket reads Pull makes.
	SetReadDeadline(t time.Time)
}

// Bulker is an Endpoint with a socket of its own that may read trains of
// datagrams coalesced (UDP GRO), which costs it read buffers: it does so
// once Bulk says the connection carries bulk traffic (package reliable).
type Bulker interface {
	Bulk()
}

// Rules are a dialect's payload limits and names.
type Rules struct {
	Net        string // the net.OpError's Net: "netcode", "cute"
	MinPayload int    // the smallest payload Write sends
	MaxPayload int
	TooLarge   error // Write's error for a payload over MaxPayload
	TooSmall   error // Write's error for one under MinPayload
}

// Conn is a message-oriented connection: one Read returns one payload,
// one Write sends one. The zero value is not usable: Init it.
//
// Lock order: Conn has no lock of its own held across a call; its read
// queue's lock is a leaf.
type Conn struct {
	ep     Endpoint
	pull   Puller        // ep, if it is one
	batch  BatchEndpoint // ep, if it is one
	bulk   Bulker        // ep, if it is one
	rules  *Rules
	local  net.Addr
	remote net.Addr

	// q holds the received payloads; it ends with why the connection
	// ended (io.EOF, a timeout error or net.ErrClosed).
	q         *packetq.Queue
	closeOnce sync.Once
	closed    atomic.Bool // Close was called
	wd        deadline.Deadline
}

// NewQueue returns a read queue of n payloads (0 or less: def, the
// dialect's default).
func NewQueue(n, def int) *packetq.Queue {
	if n <= 0 {
		n = def
	}
	return packetq.New(n)
}

// Init readies c to read the payloads q receives and to send through ep.
func (c *Conn) Init(ep Endpoint, rules *Rules, local, remote net.Addr, q *packetq.Queue) {
	c.ep, c.rules, c.local, c.remote, c.q = ep, rules, local, remote, q
	c.pull, _ = ep.(Puller)
	c.batch, _ = ep.(BatchEndpoint)
	c.bulk, _ = ep.(Bulker)
}

// TryRead reads one payload queued for Read into b, without waiting: it
// fails with packetq.ErrEmpty when none is (package cute's client/server
// layer takes what was queued before it was fed directly).
func (c *Conn) TryRead(b []byte) (int, error) {
	n, _, err := c.q.TryReadMessage(b)
	return n, err
}

// Endpoint is the Endpoint c sends through (Init's ep).
func (c *Conn) Endpoint() Endpoint { return c.ep }

// SetRemote sets the peer's address (a dialed Conn learns it on connecting).
func (c *Conn) SetRemote(a net.Addr) { c.remote = a }

// Deliver queues a copy of p for Read, or drops it (counted in Dropped)
// if the queue is full. It never blocks.
func (c *Conn) Deliver(p []byte) {
	if len(p) < c.rules.MinPayload || len(p) > c.rules.MaxPayload {
		return
	}
	c.q.Push(netip.AddrPort{}, p)
}

// End marks the connection as over with err (io.EOF, a timeout error, or
// net.ErrClosed). Queued payloads stay readable.
func (c *Conn) End(err error) { c.q.End(err) }

// Read reads one payload into b: see the dialects' Conn.Read.
func (c *Conn) Read(b []byte) (int, error) {
	if c.closed.Load() {
		return 0, c.OpErr("read", net.ErrClosed)
	}
	var (
		n   int
		err error
	)
	if c.pull != nil {
		n, err = c.pullRead(b)
	} else {
		n, _, err = c.q.ReadMessage(b)
	}
	switch err {
	case nil:
		return n, nil
	case io.EOF:
		return 0, io.EOF // unwrapped, as package net returns it
	}
	return 0, c.OpErr("read", err)
}

// pullRead is Read's wait for a Puller: a payload already queued, else
// one it reads from the socket itself, else (the socket being read
// elsewhere) one from the queue.
func (c *Conn) pullRead(b []byte) (int, error) {
	woken := false
	for {
		n, _, err := c.q.TryReadMessage(b)
		if err != packetq.ErrEmpty {
			if woken {
				c.pull.Pass()
			}
			return n, err
		}
		pulled, err := c.pull.Pull()
		if err != nil {
			return 0, err
		}
		if pulled {
			woken = false // the wake was used
			continue
		}
		c.pull.Waiting(1)
		n, _, err = c.q.ReadMessageUntil(b, c.pull.Freed())
		c.pull.Waiting(-1)
		if err != packetq.ErrWoken {
			return n, err
		}
		woken = true
	}
}

// Write sends b as one payload: see the dialects' Conn.Write.
func (c *Conn) Write(b []byte) (int, error) {
	if err := c.checkSize(b); err != nil {
		return 0, err
	}
	if err := c.writable(); err != nil {
		return 0, err
	}
	if err := c.ep.SendPayload(monoclock.TimeNow(), b, c.q.Done(), c.wd.Wait()); err != nil {
		return 0, c.writeErr(err)
	}
	return len(b), nil
}

// WriteBatch sends each of ps as one payload, in order, as that many
// Writes would, with the same errors, deadline and Close; an Endpoint
// that is a BatchEndpoint seals them all and hands them to its socket
// together. It returns how many payloads it sent: fewer than len(ps)
// with the error that stopped it (a payload of the wrong size stops it
// before anything is sent).
func (c *Conn) WriteBatch(ps [][]byte) (int, error) {
	for _, p := range ps {
		if err := c.checkSize(p); err != nil {
			return 0, err
		}
	}
	if c.batch == nil {
		for i, p := range ps {
			if _, err := c.Write(p); err != nil {
				return i, err
			}
		}
		return len(ps), nil
	}
	if err := c.writable(); err != nil {
		return 0, err
	}
	n, err := c.batch.SendPayloads(monoclock.TimeNow(), ps, c.q.Done(), c.wd.Wait())
	if err != nil {
		return n, c.writeErr(err)
	}
	return n, nil
}

// checkSize is Write's check of a payload's size.
func (c *Conn) checkSize(b []byte) error {
	switch {
	case len(b) > c.rules.MaxPayload:
		return c.OpErr("write", c.rules.TooLarge)
	case len(b) < c.rules.MinPayload:
		return c.OpErr("write", c.rules.TooSmall)
	}
	return nil
}

// writable is nil if a Write may send now: the Conn is neither closed nor
// ended, and its write deadline has not passed.
func (c *Conn) writable() error {
	if c.closed.Load() {
		return c.OpErr("write", net.ErrClosed)
	}
	select {
	case <-c.q.Done():
		return c.OpErr("write", c.q.Err())
	default:
	}
	if c.wd.Expired() {
		return c.OpErr("write", os.ErrDeadlineExceeded)
	}
	return nil
}

// writeErr is Write's error for what its Endpoint returned.
func (c *Conn) writeErr(err error) error {
	if err == sendq.ErrStopped {
		err = c.q.Err() // Close, or the connection ended while Write waited
	}
	return c.OpErr("write", err)
}

// BatchWriter is a connection that sends several payloads at once (see
// Conn.WriteBatch).
type BatchWriter interface {
	WriteBatch(ps [][]byte) (int, error)
}

// Hook is embedded, under an unexported name, by a dialect's public Conn
// type, so that BatchWriterOf and MarkBulk find its Conn: a Hook is a
// Capable. The public type then exports no method its users could call
// (they cannot name Key).
type Hook struct{ c *Conn }

// NewHook returns the Hook of c.
func NewHook(c *Conn) Hook { return Hook{c} }

// Key is the argument of Capable's method: a type the module's users
// cannot name, so that a public Conn embedding a Hook has no method they
// can call.
type Key struct{}

// Capable is a connection of the module whose message machinery other
// packages of the module (package reliable) may use beyond net.Conn's:
// its batched writes and its bulk mode. A user's wrapper of such a
// connection hides it, and loses both: reliable then writes one payload at
// a time and reads with the connection's own read queue and reads.
type Capable interface {
	MessageConn(Key) *Conn
}

// MessageConn is Capable's.
func (h Hook) MessageConn(Key) *Conn { return h.c }

// conn returns x's Conn if x is Capable, else nil.
func conn(x any) *Conn {
	if h, ok := x.(Capable); ok {
		return h.MessageConn(Key{})
	}
	return nil
}

// BatchWriterOf returns x's batched write if x is Capable (embeds a
// Hook), else nil: the caller (package reliable) then writes one payload
// at a time.
func BatchWriterOf(x any) BatchWriter {
	if c := conn(x); c != nil {
		return c
	}
	return nil
}

// MarkBulk tells x, if it is Capable, that it carries bulk traffic of
// up to packets payloads in flight (package reliable calls it as it
// attaches, with its windows): its read queue holds that many (0: as it
// is), so that a window the peer may fill is not dropped at the queue
// whenever the reader falls behind, and an Endpoint that is a Bulker
// reads trains coalesced.
func MarkBulk(x any, packets int) {
	c := conn(x)
	if c == nil {
		return
	}
	c.q.Raise(packets)
	if c.bulk != nil {
		c.bulk.Bulk()
	}
}

// Close ends the connection: see the dialects' Conn.Close.
func (c *Conn) Close() error {
	first := false
	c.closeOnce.Do(func() {
		first = true
		c.closed.Store(true)
		c.End(net.ErrClosed)
		c.ep.ClosePeer()
		c.wd.Stop()
		c.q.Close() // frees what is queued and wakes blocked Reads
	})
	if !first {
		return c.OpErr("close", net.ErrClosed)
	}
	return nil
}

// OpErr wraps err in a *net.OpError naming both ends.
func (c *Conn) OpErr(op string, err error) error {
	if err == nil {
		err = net.ErrClosed
	}
	return &net.OpError{Op: op, Net: c.rules.Net, Source: c.local, Addr: c.remote, Err: err}
}

// LocalAddr returns the local network address.
func (c *Conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	if c.closed.Load() {
		return c.OpErr("set", net.ErrClosed)
	}
	c.setReadDeadline(t)
	c.wd.Set(t)
	return nil
}

// SetReadDeadline sets the deadline for Read.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if c.closed.Load() {
		return c.OpErr("set", net.ErrClosed)
	}
	c.setReadDeadline(t)
	return nil
}

func (c *Conn) setReadDeadline(t time.Time) {
	c.q.SetReadDeadline(t)
	if c.pull != nil {
		c.pull.SetReadDeadline(t)
	}
}

// SetWriteDeadline sets the deadline for Write.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	if c.closed.Load() {
		return c.OpErr("set", net.ErrClosed)
	}
	c.wd.Set(t)
	return nil
}

// Dropped returns how many received payloads were dropped because the
// read queue was full.
func (c *Conn) Dropped() uint64 { return c.q.Dropped() }

// Buffered is how many received payloads wait in the read queue.
func (c *Conn) Buffered() int { return c.q.Len() }

// Done is closed when the connection ends.
func (c *Conn) Done() <-chan struct{} { return c.q.Done() }

// Err is nil while the connection is up, and afterwards why it ended.
func (c *Conn) Err() error { return c.q.Err() }

// NewAcceptQueue returns a Listener's accept queue, the one rule of both
// dialects: n connected clients wait for Accept, or, for n of 0 or less,
// maxClients (every slot). A client that connects while the queue is full
// is disconnected, so the default turns no client away while the server
// has a slot for it, however long Accept lags behind a burst of players
// (a match's start).
func NewAcceptQueue[C any](n, maxClients int) chan C {
	if n <= 0 {
		n = maxClients
	}
	return make(chan C, n)
}

// Accept takes the next connection from a Listener's accept queue,
// preferring one already queued to a close or a cancelled ctx. Once
// closing is closed it fails with net.ErrClosed, and when ctx ends with its
// error, each in a *net.OpError of network netw at addr.
func Accept[C any](ctx context.Context, queue <-chan C, closing <-chan struct{}, netw string, addr net.Addr) (C, error) {
	select {
	case c := <-queue:
		return c, nil
	default:
	}
	var none C
	select {
	case c := <-queue:
		return c, nil
	case <-closing:
		return none, &net.OpError{Op: "accept", Net: netw, Addr: addr, Err: net.ErrClosed}
	case <-ctx.Done():
		return none, &net.OpError{Op: "accept", Net: netw, Addr: addr, Err: ctx.Err()}
	}
}
