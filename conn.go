package netcode

import (
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetcode/netcode/internal/deadline"
)

// DefaultReadQueue is how many received payloads a connection holds for Read
// before it drops new ones.
const DefaultReadQueue = 256

// endpoint is the side-specific part of a Conn: how it sends and closes.
type endpoint interface {
	send(now time.Time, payload []byte) error
	close() // ends the connection from this side (sends disconnects)
}

// payloadBuf is a pooled buffer holding one received payload.
type payloadBuf struct {
	n int
	b [MaxPayloadBytes]byte
}

var payloadPool = sync.Pool{New: func() any { return new(payloadBuf) }}

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
	userData    [UserDataBytes]byte

	queue   chan *payloadBuf
	readMu  sync.Mutex
	pending *payloadBuf // a payload left by io.ErrShortBuffer; guarded by readMu

	done      chan struct{} // closed when the connection has ended
	endOnce   sync.Once
	endErr    error // why it ended; written before done is closed
	closeOnce sync.Once
	closed    atomic.Bool // Close was called

	rd, wd  deadline.Deadline
	dropped atomic.Uint64
}

func newConn(ep endpoint, local, remote net.Addr, queue int) *Conn {
	if queue <= 0 {
		queue = DefaultReadQueue
	}
	return &Conn{
		ep:     ep,
		local:  local,
		remote: remote,
		queue:  make(chan *payloadBuf, queue),
		done:   make(chan struct{}),
	}
}

// deliver queues a copy of p for Read, or drops it if the queue is full or
// the connection has ended. It never blocks.
func (c *Conn) deliver(p []byte) {
	if len(p) == 0 || len(p) > MaxPayloadBytes {
		return
	}
	select {
	case <-c.done:
		return
	default:
	}
	b := payloadPool.Get().(*payloadBuf)
	b.n = copy(b.b[:], p)
	select {
	case c.queue <- b:
	default:
		payloadPool.Put(b)
		c.dropped.Add(1)
	}
}

// end marks the connection as over with err (io.EOF, a timeout error, or
// net.ErrClosed). Queued payloads stay readable.
func (c *Conn) end(err error) {
	c.endOnce.Do(func() {
		c.endErr = err
		close(c.done)
	})
}

// Read reads one payload into b and returns its length. If b is too short
// for the payload, Read returns io.ErrShortBuffer and the payload stays
// queued for the next Read. After the peer disconnects cleanly, Read returns
// the payloads already received and then io.EOF. Once the read deadline has
// passed, Read fails with os.ErrDeadlineExceeded even if payloads are queued;
// they are kept for a Read after the deadline is extended or cleared.
func (c *Conn) Read(b []byte) (int, error) {
	c.readMu.Lock()
	defer c.readMu.Unlock()
	if c.closed.Load() {
		return 0, c.opErr("read", net.ErrClosed)
	}
	// As in package net, a passed deadline fails the Read even when a
	// payload is waiting; the payload stays queued for a later Read.
	if c.rd.Expired() {
		return 0, c.opErr("read", os.ErrDeadlineExceeded)
	}
	if c.pending != nil {
		return c.take(b, c.pending)
	}
	select {
	case p := <-c.queue:
		return c.take(b, p)
	case <-c.done:
		select {
		case p := <-c.queue:
			return c.take(b, p)
		default:
		}
		if c.closed.Load() {
			return 0, c.opErr("read", net.ErrClosed)
		}
		if c.endErr == io.EOF {
			return 0, io.EOF
		}
		return 0, c.opErr("read", c.endErr)
	case <-c.rd.Wait():
		return 0, c.opErr("read", os.ErrDeadlineExceeded)
	}
}

func (c *Conn) take(b []byte, p *payloadBuf) (int, error) {
	if len(b) < p.n {
		c.pending = p
		return 0, c.opErr("read", io.ErrShortBuffer)
	}
	c.pending = nil
	n := copy(b, p.b[:p.n])
	payloadPool.Put(p)
	return n, nil
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
	case <-c.done:
		return 0, c.opErr("write", c.endErr)
	default:
	}
	if c.wd.Expired() {
		return 0, c.opErr("write", os.ErrDeadlineExceeded)
	}
	if err := c.ep.send(time.Now(), b); err != nil {
		return 0, c.opErr("write", err)
	}
	return len(b), nil
}

// Close ends the connection: the peer is told with the protocol's redundant
// disconnect packets. Blocked Reads and later calls return net.ErrClosed.
func (c *Conn) Close() error {
	first := false
	c.closeOnce.Do(func() {
		first = true
		c.closed.Store(true)
		c.end(net.ErrClosed)
		c.ep.close()
		c.rd.Stop()
		c.wd.Stop()
		// Free what is queued; Read takes readMu, so release after it.
		c.readMu.Lock()
		if c.pending != nil {
			payloadPool.Put(c.pending)
			c.pending = nil
		}
		c.readMu.Unlock()
		for {
			select {
			case p := <-c.queue:
				payloadPool.Put(p)
			default:
				return
			}
		}
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
	c.rd.Set(t)
	c.wd.Set(t)
	return nil
}

// SetReadDeadline sets the deadline for Read; a Read blocked past it returns
// an error that wraps os.ErrDeadlineExceeded. The zero time clears it.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if c.closed.Load() {
		return c.opErr("set", net.ErrClosed)
	}
	c.rd.Set(t)
	return nil
}

// SetWriteDeadline sets the deadline for Write. Writes never block for
// long (a datagram is handed to the socket), so the deadline only makes
// Writes after it fail.
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
func (c *Conn) UserData() [UserDataBytes]byte { return c.userData }

// Dropped returns how many received payloads were dropped because the read
// queue was full.
func (c *Conn) Dropped() uint64 { return c.dropped.Load() }

// Done returns a channel that is closed when the connection ends, by either
// side or by a timeout. Err then tells why.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns nil while the connection is up, and afterwards why it ended:
// io.EOF when the peer disconnected cleanly, ErrConnectionTimedOut, or
// net.ErrClosed when it was closed on this side.
func (c *Conn) Err() error {
	select {
	case <-c.done:
		return c.endErr
	default:
		return nil
	}
}

var _ net.Conn = (*Conn)(nil)
