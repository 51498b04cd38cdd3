package cute

import (
	"net"
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

// isKeepAlive reports whether a datagram is a KEEPALIVE packet, which a
// full send queue drops (the next follows within 100 ms).
func isKeepAlive(b []byte) bool { return len(b) > 0 && b[0] == byte(wire.KeepAlive) }

// Conn is a Cute connection, on either side. It implements net.Conn with
// message semantics: one Read returns one payload, one Write sends one.
// It is the same machinery as netcode's Conn (internal/msgconn): a bounded
// read queue whose overflow is dropped and counted, deadlines that fail
// with os.ErrDeadlineExceeded, net.ErrClosed after Close, io.EOF after the
// peer's clean disconnect, and errors that name both ends.
type Conn struct {
	m msgconn.Conn

	clientID   uint64
	index      int
	gen        uint64 // the connection's generation in its slot (server side)
	maxClients int
	userData   [UserDataBytes]byte
}

// Read reads one payload into b and returns its length. If b is too short,
// Read returns io.ErrShortBuffer and the payload stays queued. After the
// peer disconnects cleanly, Read returns what was received and then io.EOF.
func (c *Conn) Read(b []byte) (int, error) { return c.m.Read(b) }

// Write sends b as one payload of 0 to MaxPayloadBytes bytes; larger ones
// fail with ErrPayloadTooLarge. It is safe to call from several goroutines.
// A server Conn's Write blocks only while the socket's send queue is full,
// until the write deadline or Close. A dialed Conn writes its socket
// directly and, as netcode's does (see netcode.Conn.Write), may hold a
// Write made while its read queue holds payloads for up to about 1.1 ms,
// to send it with the next ones as one train.
func (c *Conn) Write(b []byte) (int, error) { return c.m.Write(b) }

// Close ends the connection, telling the peer with the protocol's
// redundant DISCONNECT packets. Blocked Reads and Writes and later calls
// return net.ErrClosed.
func (c *Conn) Close() error { return c.m.Close() }

// LocalAddr returns the local network address.
func (c *Conn) LocalAddr() net.Addr { return c.m.LocalAddr() }

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.m.RemoteAddr() }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error { return c.m.SetDeadline(t) }

// SetReadDeadline sets the deadline for Read; a Read blocked past it fails
// with an error wrapping os.ErrDeadlineExceeded. The zero time clears it.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.m.SetReadDeadline(t) }

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

// Dropped returns how many received payloads were dropped because the read
// queue was full.
func (c *Conn) Dropped() uint64 { return c.m.Dropped() }

// Done is closed when the connection ends, by either side or a timeout.
func (c *Conn) Done() <-chan struct{} { return c.m.Done() }

// Err is nil while the connection is up, then why it ended: io.EOF when
// the peer disconnected, ErrConnectionTimedOut, ErrConnectTokenExpired
// (client side), or net.ErrClosed when it was closed on this side.
func (c *Conn) Err() error { return c.m.Err() }

var _ net.Conn = (*Conn)(nil)
