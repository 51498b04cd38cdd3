package cute

import (
	"errors"
	"net"
	"sync/atomic"
	"time"

	"github.com/gonetcode/netcode/cute/internal/wire"
	"github.com/gonetcode/netcode/internal/msgconn"
)

// DefaultReadQueue is how many received payloads a connection holds for
// Read before it drops new ones.
const DefaultReadQueue = 256

// connRules are the Cute dialect's payload limits: 0 to MaxPayloadBytes
// bytes (an empty payload is a valid Cute packet).
var connRules = msgconn.Rules{
	Net:        "cute",
	MinPayload: 0,
	MaxPayload: MaxPayloadBytes,
	TooLarge:   ErrPayloadTooLarge,
}

// payloadOverhead is what sealing adds to a payload: a PAYLOAD packet's
// bytes beyond its payload.
const payloadOverhead = wire.MaxPacketBytes - wire.MaxPayloadBytes

// isKeepAlive reports whether a datagram is a KEEPALIVE packet, which a
// full send queue drops (the next follows within 100 ms).
func isKeepAlive(b []byte) bool { return len(b) > 0 && b[0] == byte(wire.KeepAlive) }

// Conn is a Cute connection, on either side. It implements net.Conn with
// message semantics: one Read returns one message, one Write sends one.
//
// By default a Conn speaks what a Cute Framework game speaks: Cute
// Framework's client/server layer (its ack system and reliability
// transport) inside the protocol's PAYLOAD packets. A Write is one
// reliable-in-order message of up to MessageConfig.MaxMessageBytes,
// cf_client_send / cf_server_send with send_reliably true; Send with
// reliable false is a fire-and-forget one; ReadMessage says which kind a
// received message was (cf_client_pop_packet's was_sent_reliably). With
// ServerConfig.BareProtocol or Dialer.BareProtocol a Conn speaks the bare
// protocol layer instead: one Write is one PAYLOAD packet of at most
// MaxPayloadBytes, delivered at most once, for users who bring their own
// layer.
// It is the same machinery as netcode's Conn (internal/msgconn): a bounded
// read queue whose overflow is dropped and counted, deadlines that fail
// with os.ErrDeadlineExceeded, net.ErrClosed after Close, io.EOF after the
// peer's clean disconnect, and errors that name both ends.
type Conn struct {
	m  msgconn.Conn
	ml *messages // the client/server layer; nil on a bare protocol Conn
	// feed is ml once it runs: the read turn hands it each PAYLOAD
	// (deliver). Until then payloads go to m's read queue, which it
	// drains as it starts.
	feed atomic.Pointer[messages]

	clientID   uint64
	index      int
	gen        uint64 // the connection's generation in its slot (server side)
	maxClients int
	userData   [UserDataBytes]byte
}

// deliver hands a received PAYLOAD, in the socket's read turn, to the
// client/server layer, or to the bare Conn's read queue.
func (c *Conn) deliver(p []byte) {
	if ml := c.feed.Load(); ml != nil {
		ml.receive(p)
		return
	}
	c.m.Deliver(p)
	if ml := c.feed.Load(); ml != nil {
		ml.drain() // the feed was set meanwhile, after its own drain
	}
}

// readable reports whether a Read would find something at once: a payload
// in the bare Conn's read queue, or with the client/server layer a whole
// message. A dialed Conn holds a Write made while one does (engine.Held):
// the Reads that follow answer it, and their Writes leave together.
func (c *Conn) readable() bool {
	if c.m.Buffered() > 0 {
		return true
	}
	ml := c.feed.Load()
	return ml != nil && ml.avail.Load()
}

// Read reads one message into b and returns its length, whichever kind it
// is (reliable messages first, as cf_client_pop_packet). If b is too
// short, Read returns io.ErrShortBuffer and the message stays queued.
// After the peer disconnects cleanly, Read returns what was received and
// then io.EOF.
func (c *Conn) Read(b []byte) (int, error) {
	n, _, err := c.ReadMessage(b)
	return n, err
}

// ReadMessage is Read that also reports whether the message was sent
// reliably (cf_client_pop_packet's was_sent_reliably). On a bare protocol
// Conn it is always false.
func (c *Conn) ReadMessage(b []byte) (n int, reliable bool, err error) {
	if c.ml == nil {
		n, err = c.m.Read(b)
		return n, false, err
	}
	return c.ml.read(b)
}

// Write sends b as one reliable-in-order message: Send(b, true). On a bare
// protocol Conn it sends b as one PAYLOAD packet of 0 to MaxPayloadBytes
// bytes (larger ones fail with ErrPayloadTooLarge), delivered at most once.
func (c *Conn) Write(b []byte) (int, error) {
	if c.ml == nil {
		return c.m.Write(b)
	}
	return c.ml.send(b, true)
}

// Send sends b as one message, reliably and in order or fire-and-forget
// (cf_client_send's and cf_server_send's send_reliably). A message is 1 to
// MessageConfig.MaxMessageBytes bytes: an empty one fails with
// ErrEmptyMessage, a larger one with ErrPayloadTooLarge. A reliable one is
// resent until acknowledged; when MessageConfig.MaxSendQueueBytes of them
// wait for acks, Send fails with ErrSendQueueFull. On a bare protocol Conn,
// a fire-and-forget Send is one PAYLOAD packet of 0 to MaxPayloadBytes
// bytes and a reliable one fails with ErrBareProtocol. Send is safe to call
// from several goroutines. A server Conn's packets wait only while the
// socket's send queue is full, until the write deadline or Close. A dialed
// Conn writes its socket directly and, as netcode's does (see
// netcode.Conn.Write), may hold a packet sent while a Read would find
// something at once (a payload in its read queue, or with the
// client/server layer a whole message) for up to about 1.1 ms, to send it
// with the next ones as one train; a Read that finds nothing, the next
// Write that finds nothing and Close send it at once.
func (c *Conn) Send(b []byte, reliable bool) (int, error) {
	if c.ml != nil {
		return c.ml.send(b, reliable)
	}
	if reliable {
		return 0, c.m.OpErr("write", ErrBareProtocol)
	}
	return c.m.Write(b)
}

// Bare reports whether c speaks the bare protocol layer
// (ServerConfig.BareProtocol, Dialer.BareProtocol).
func (c *Conn) Bare() bool { return c.ml == nil }

// Close ends the connection, telling the peer with the protocol's
// redundant DISCONNECT packets. Blocked Reads and Writes and later calls
// return net.ErrClosed. Reliable messages not yet acknowledged are not
// waited for.
func (c *Conn) Close() error {
	if c.ml != nil {
		return c.ml.close()
	}
	return c.m.Close()
}

// LocalAddr returns the local network address.
func (c *Conn) LocalAddr() net.Addr { return c.m.LocalAddr() }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.m.RemoteAddr() }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.SetWriteDeadline(t)
}

// SetReadDeadline sets the deadline for Read; a Read blocked past it fails
// with an error wrapping os.ErrDeadlineExceeded. The zero time clears it.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if c.ml == nil {
		return c.m.SetReadDeadline(t)
	}
	if c.ml.isClosed() {
		return c.m.OpErr("set", net.ErrClosed)
	}
	c.ml.rd.Set(t)
	return nil
}

// SetWriteDeadline sets the deadline for Write's wait on a full send queue.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.m.SetWriteDeadline(t) }

// ClientID returns the client id: from the token on the server side, from
// CONNECTION_ACCEPTED on the client side.
func (c *Conn) ClientID() uint64 { return c.clientID }

// ClientIndex returns the client's slot on the server (server side only).
func (c *Conn) ClientIndex() int { return c.index }

// MaxClients returns the server's number of slots.
func (c *Conn) MaxClients() int { return c.maxClients }

// UserData returns the token's user data (server side only).
func (c *Conn) UserData() [UserDataBytes]byte { return c.userData }

// Dropped returns how many received PAYLOAD packets found the Conn's
// packet queue (ServerConfig.ReadQueue, Dialer.ReadQueue) full and were
// dropped (what they carried of reliable messages is resent), plus, with
// the client/server layer, the fire-and-forget messages lost to a full
// read queue or evicted incomplete.
func (c *Conn) Dropped() uint64 {
	if c.ml != nil {
		return c.m.Dropped() + c.ml.stats().Dropped
	}
	return c.m.Dropped()
}

// Done is closed when the connection ends, by either side or a timeout.
func (c *Conn) Done() <-chan struct{} { return c.m.Done() }

// Err is nil while the connection is up, then why it ended: io.EOF when
// the peer disconnected, ErrConnectionTimedOut, ErrAckTimeout,
// ErrConnectTokenExpired (client side), or net.ErrClosed when it was
// closed on this side.
func (c *Conn) Err() error {
	if c.ml != nil {
		if errors.Is(c.ml.stopErr(), ErrAckTimeout) {
			return ErrAckTimeout
		}
	}
	return c.m.Err()
}

var _ net.Conn = (*Conn)(nil)
