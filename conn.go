package netcode

import (
	"io"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetcode/netcode/internal/deadline"
	"github.com/gonetcode/netcode/internal/packetq"

	"github.com/gonetcode/netcode/token"
)

// DefaultReadQueue is how many received payloads a connection holds for Read
// before it drops new ones.
const DefaultReadQueue = 256

// endpoint is the side-specific part of a Conn: how it sends and closes.
type endpoint interface {
	// send sends one payload. If it has to wait (a full send queue), it
	// gives up when stop is closed (the connection ended: Close) or
	// deadline is (the write deadline passed).
	send(now time.Time, payload []byte, stop, deadline <-chan struct{}) error
	close() // ends the connection from this side (sends disconnects)
}

// Conn is a netcode connection, on either side. It implements net.Conn, with
// message semantics: one Read returns one payload, one Write sends one.
//
// Received payloads wait in a bounded queue; when it is full, newly arrived
// payloads are dropped and counted (see Dropped), as a UDP socket would, and
// the network is never blocked by a slow reader.
type Conn struct {
	ep     endpoint
	local  net.Addr
	remote net.Addr

	clientID    uint64
	clientIndex int
	maxClients  int
	userData    [token.UserDataBytes]byte

	// q holds the received payloads; it ends with why the connection
	// ended (io.EOF, a timeout error or net.ErrClosed).
	q         *packetq.Queue
	closeOnce sync.Once
	closed    atomic.Bool // Close was called
	wd        deadline.Deadline
}

// newConn returns a Conn that reads the payloads q receives.
func newConn(ep endpoint, local, remote net.Addr, q *packetq.Queue) *Conn {
	return &Conn{ep: ep, local: local, remote: remote, q: q}
}

// newQueue returns a read queue of n payloads (0: DefaultReadQueue).
func newQueue(n int) *packetq.Queue {
	if n <= 0 {
		n = DefaultReadQueue
	}
	return packetq.New(n)
}

// deliver queues a copy of p for Read, or drops it (counted in Dropped)
// if the queue is full. It never blocks.
func (c *Conn) deliver(p []byte) {
	if len(p) == 0 || len(p) > MaxPayloadBytes {
		return
	}
	c.q.Push(netip.AddrPort{}, p)
}

// end marks the connection as over with err (io.EOF, a timeout error, or
// net.ErrClosed). Queued payloads stay readable.
func (c *Conn) end(err error) { c.q.End(err) }

// Read reads one payload into b and returns its length. If b is too short
// for the payload, Read returns io.ErrShortBuffer and the payload stays
// queued for the next Read. After the peer disconnects cleanly, Read returns
// the payloads already received and then io.EOF. Once the read deadline has
// passed, Read fails with os.ErrDeadlineExceeded even if payloads are queued;
// they are kept for a Read after the deadline is extended or cleared.
func (c *Conn) Read(b []byte) (int, error) {
	if c.closed.Load() {
		return 0, c.opErr("read", net.ErrClosed)
	}
	n, _, err := c.q.ReadMessage(b)
	switch err {
	case nil:
		return n, nil
	case io.EOF:
		return 0, io.EOF // unwrapped, as package net returns it
	}
	return 0, c.opErr("read", err)
}

// Write sends b as one payload of 1 to MaxPayloadBytes bytes. Larger writes
// fail with ErrPayloadTooLarge and empty ones with ErrEmptyPayload; nothing
// is sent then. Write is safe to call from several goroutines at once.
func (c *Conn) Write(b []byte) (int, error) {
	switch {
	case len(b) > MaxPayloadBytes:
		return 0, c.opErr("write", ErrPayloadTooLarge)
	case len(b) == 0:
		return 0, c.opErr("write", ErrEmptyPayload)
	case c.closed.Load():
		return 0, c.opErr("write", net.ErrClosed)
	}
	select {
	case <-c.q.Done():
		return 0, c.opErr("write", c.q.Err())
	default:
	}
	if c.wd.Expired() {
		return 0, c.opErr("write", os.ErrDeadlineExceeded)
	}
	if err := c.ep.send(time.Now(), b, c.q.Done(), c.wd.Wait()); err != nil {
		if err == errStopped {
			err = c.q.Err() // Close, or the connection ended while Write waited
		}
		return 0, c.opErr("write", err)
	}
	return len(b), nil
}

// Close ends the connection: the peer is told with the protocol's redundant
// disconnect packets. Blocked Reads and Writes (a Write waiting for room
// in a full send queue) and later calls return net.ErrClosed: Close does
// not wait behind a Write in progress.
func (c *Conn) Close() error {
	first := false
	c.closeOnce.Do(func() {
		first = true
		c.closed.Store(true)
		c.end(net.ErrClosed)
		c.ep.close()
		c.wd.Stop()
		c.q.Close() // frees what is queued and wakes blocked Reads
	})
	if !first {
		return c.opErr("close", net.ErrClosed)
	}
	return nil
}

func (c *Conn) opErr(op string, err error) error {
	if err == nil {
		err = net.ErrClosed
	}
	return opError(op, c.local, c.remote, err)
}

// LocalAddr returns the local network address.
func (c *Conn) LocalAddr() net.Addr { return c.local }

// RemoteAddr returns the peer's address: the client's on the server side,
// the server's on the client side.
func (c *Conn) RemoteAddr() net.Addr { return c.remote }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	if c.closed.Load() {
		return c.opErr("set", net.ErrClosed)
	}
	c.q.SetReadDeadline(t)
	c.wd.Set(t)
	return nil
}

// SetReadDeadline sets the deadline for Read; a Read blocked past it returns
// an error that wraps os.ErrDeadlineExceeded. The zero time clears it.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if c.closed.Load() {
		return c.opErr("set", net.ErrClosed)
	}
	c.q.SetReadDeadline(t)
	return nil
}

// SetWriteDeadline sets the deadline for Write. A Write blocks only while
// the Listener's send queue is full (backpressure from the socket); the
// deadline ends that wait, and makes Writes after it fail, with an error
// wrapping os.ErrDeadlineExceeded.
func (c *Conn) SetWriteDeadline(t time.Time) error {
	if c.closed.Load() {
		return c.opErr("set", net.ErrClosed)
	}
	c.wd.Set(t)
	return nil
}

// ClientID returns the client id from the connect token. It is known on the
// server side only; on the client side it is 0.
func (c *Conn) ClientID() uint64 { return c.clientID }

// ClientIndex returns the client's slot on the server, 0..MaxClients()-1.
func (c *Conn) ClientIndex() int { return c.clientIndex }

// MaxClients returns the server's number of slots.
func (c *Conn) MaxClients() int { return c.maxClients }

// UserData returns the user data from the connect token. It is known on the
// server side only; on the client side it is all zeros.
func (c *Conn) UserData() [token.UserDataBytes]byte { return c.userData }

// Dropped returns how many received payloads were dropped because the read
// queue was full.
func (c *Conn) Dropped() uint64 { return c.q.Dropped() }

// Done returns a channel that is closed when the connection ends, by either
// side or by a timeout. Err then tells why.
func (c *Conn) Done() <-chan struct{} { return c.q.Done() }

// Err returns nil while the connection is up, and afterwards why it ended:
// io.EOF when the peer disconnected cleanly, ErrConnectionTimedOut, or
// net.ErrClosed when it was closed on this side.
func (c *Conn) Err() error { return c.q.Err() }

var _ net.Conn = (*Conn)(nil)

// takeTurn takes a Conn's write turn (a channel of capacity 1), waiting
// for it until stop or deadline is closed; it reports whether it has it.
// The turn is free almost always: that case costs one channel send.
func takeTurn(turn chan struct{}, stop, deadline <-chan struct{}) bool {
	select {
	case turn <- struct{}{}:
		return true
	default:
	}
	select {
	case turn <- struct{}{}:
		return true
	case <-stop:
	case <-deadline:
	}
	return false
}

// turnErr is why takeTurn gave up: the Conn's end (errStopped) or its
// write deadline.
func turnErr(stop <-chan struct{}) error {
	select {
	case <-stop:
		return errStopped
	default:
		return os.ErrDeadlineExceeded
	}
}
