package netcode

import (
	"net"
	"time"

	"github.com/gonetcode/netcode/internal/msgconn"
	"github.com/gonetcode/netcode/internal/packetq"

	"github.com/gonetcode/netcode/token"
)

// defaultReadQueue is how many received payloads a connection holds for Read
// before it drops new ones.
const defaultReadQueue = 256

// endpoint is the side-specific part of a Conn: how it sends and closes.
type endpoint interface {
	// send sends one payload. If it has to wait (a full send queue), it
	// gives up when stop is closed (the connection ended: Close) or
	// deadline is (the write deadline passed).
	send(now time.Time, payload []byte, stop, deadline <-chan struct{}) error
	// sendBatch sends each of ps as one payload, in order, waiting as
	// send does, and hands the packets to the socket together; it
	// returns how many it sent.
	sendBatch(now time.Time, ps [][]byte, stop, deadline <-chan struct{}) (int, error)
	close() // ends the connection from this side (sends disconnects)
}

// msgEndpoint presents an endpoint to the shared Conn machinery.
type msgEndpoint struct{ ep endpoint }

func (m msgEndpoint) SendPayload(now time.Time, p []byte, stop, deadline <-chan struct{}) error {
	return m.ep.send(now, p, stop, deadline)
}
func (m msgEndpoint) SendPayloads(now time.Time, ps [][]byte, stop, deadline <-chan struct{}) (int, error) {
	return m.ep.sendBatch(now, ps, stop, deadline)
}
func (m msgEndpoint) ClosePeer() { m.ep.close() }

// connRules are netcode's payload limits for the shared Conn machinery.
var connRules = msgconn.Rules{
	Net:        "netcode",
	MinPayload: 1,
	MaxPayload: MaxPayloadBytes,
	TooLarge:   ErrPayloadTooLarge,
	TooSmall:   ErrEmptyPayload,
}

// Conn is a netcode connection, on either side. It implements net.Conn, with
// message semantics: one Read returns one payload, one Write sends one.
//
// Received payloads wait in a bounded queue; when it is full, newly arrived
// payloads are dropped and counted (see Dropped), as a UDP socket would, and
// the network is never blocked by a slow reader.
type Conn struct {
	m msgconn.Conn // the read queue, deadlines and Close, shared with package cute
	// batchHook lets package reliable send its datagrams in batches
	// (msgconn.BatchWriterOf), with no exported method.
	batchHook

	clientID    uint64
	clientIndex int
	maxClients  int
	userData    [token.UserDataBytes]byte
}

// batchHook is msgconn.Hook under an unexported name, for embedding.
type batchHook = msgconn.Hook

// pullEndpoint is an endpoint whose Reads may read its socket themselves
// (a dialed Conn's, or a server Conn's, whose socket is the Listener's),
// and for which a bulk transfer may ask for coalesced reads.
type pullEndpoint struct {
	msgEndpoint
	socketEndpoint
}

// socketEndpoint is what a pullEndpoint adds to an endpoint.
type socketEndpoint interface {
	msgconn.Puller
	msgconn.Bulker
}

// newConn returns a Conn that reads the payloads q receives.
func newConn(ep endpoint, local, remote net.Addr, q *packetq.Queue) *Conn {
	c := &Conn{}
	var m msgconn.Endpoint = msgEndpoint{ep}
	if p, ok := ep.(socketEndpoint); ok {
		m = pullEndpoint{msgEndpoint{ep}, p}
	}
	c.m.Init(m, &connRules, local, remote, q)
	c.batchHook = msgconn.NewHook(&c.m)
	return c
}

// newQueue returns a read queue of n payloads (0: defaultReadQueue).
func newQueue(n int) *packetq.Queue { return msgconn.NewQueue(n, defaultReadQueue) }

// deliver queues a copy of p for Read, or drops it (counted in Dropped)
// if the queue is full. It never blocks.
func (c *Conn) deliver(p []byte) { c.m.Deliver(p) }

// end marks the connection as over with err (io.EOF, a timeout error, or
// net.ErrClosed). Queued payloads stay readable.
func (c *Conn) end(err error) { c.m.End(err) }

// Read reads one payload into b and returns its length. If b is too short
// for the payload, Read returns io.ErrShortBuffer and the payload stays
// queued for the next Read. After the peer disconnects cleanly, Read returns
// the payloads already received and then io.EOF. Once the read deadline has
// passed, Read fails with os.ErrDeadlineExceeded even if payloads are queued;
// they are kept for a Read after the deadline is extended or cleared.
func (c *Conn) Read(b []byte) (int, error) { return c.m.Read(b) }

// Write sends b as one payload of 1 to MaxPayloadBytes bytes. Larger writes
// fail with ErrPayloadTooLarge and empty ones with ErrEmptyPayload; nothing
// is sent then. Write is safe to call from several goroutines at once.
//
// A dialed Conn whose socket is connected to its server (a UDP socket of
// its own on Linux) may return before its packet leaves: a Write that more
// Writes are expected to follow (payloads still wait in the read queue, or
// more payloads were received than answered and the Write comes within
// 500 µs of the last one's arrival or of the Write before it: a burst
// being answered one by one, from the goroutine that reads or from
// another) is held, sealed, to leave with the Writes after it as one
// train, one system call. It leaves with the Write expected to be the
// burst's last, when a Read finds the read queue empty, when 16 are held,
// before anything else is sent, and at the latest when the goroutine that
// wrote it stops writing (its next wait, on a Read, a channel or a lock):
// no timer is involved. On loopback a held Write's payload reached the
// server's Read 19-27 µs (p50) after Write returned, as a Write sent at
// once did (21-26 µs); 300 trials, load average 9-10. See
// internal/engine (Held).
//
// A server Conn (not a bridge Mux's WebSocket peer, whose Writes go at
// once) holds a Write made while payloads still wait in its read queue
// (a burst being answered by the goroutine that reads it) in the same
// way, by the same mechanism, and its held Writes leave through the
// Listener's send queue as one train to the client, one GSO send from the
// writing goroutine when the queue is idle: with the Write that finds the
// read queue empty, when a Read finds it empty, when 16 are held, before
// WriteBatch and Close (the Conn's or the Listener's, before the
// disconnects), and at the latest 1 ms after the first was held, by the
// Listener's one fallback timer for all its Conns, if the writer then
// waits on something other than the Conn (a game loop's writer whose
// reader has not yet drained the read queue). A server Conn starts no
// goroutine per train, as a dialed Conn does: on a server that goroutine's
// wake-up of an idle core cost what the train saved. A server counts no
// answers owed: Writes from goroutines other than the reader's meet in
// the send queue, which batches them across clients.
func (c *Conn) Write(b []byte) (int, error) { return c.m.Write(b) }

// Close ends the connection: the peer is told with the protocol's redundant
// disconnect packets. Blocked Reads and Writes (a Write waiting for room
// in a full send queue) and later calls return net.ErrClosed: Close does
// not wait behind a Write in progress.
func (c *Conn) Close() error { return c.m.Close() }

// LocalAddr returns the local network address.
func (c *Conn) LocalAddr() net.Addr { return c.m.LocalAddr() }

// RemoteAddr returns the peer's address: the client's on the server side,
// the server's on the client side.
func (c *Conn) RemoteAddr() net.Addr { return c.m.RemoteAddr() }

// SetDeadline sets the read and write deadlines.
func (c *Conn) SetDeadline(t time.Time) error { return c.m.SetDeadline(t) }

// SetReadDeadline sets the deadline for Read; a Read blocked past it returns
// an error that wraps os.ErrDeadlineExceeded. The zero time clears it.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.m.SetReadDeadline(t) }

// SetWriteDeadline sets the deadline for Write. A Write blocks only while
// the Listener's send queue is full (backpressure from the socket); the
// deadline ends that wait, and makes Writes after it fail, with an error
// wrapping os.ErrDeadlineExceeded.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.m.SetWriteDeadline(t) }

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
func (c *Conn) Dropped() uint64 { return c.m.Dropped() }

// Buffered returns how many received payloads wait in the read queue: that
// many Reads return at once. A relay uses it to send what is waiting
// together.
func (c *Conn) Buffered() int { return c.m.Buffered() }

// Done returns a channel that is closed when the connection ends, by either
// side or by a timeout. Err then tells why.
func (c *Conn) Done() <-chan struct{} { return c.m.Done() }

// Err returns nil while the connection is up, and afterwards why it ended:
// io.EOF when the peer disconnected cleanly, ErrConnectionTimedOut, or
// net.ErrClosed when it was closed on this side.
func (c *Conn) Err() error { return c.m.Err() }

var _ net.Conn = (*Conn)(nil)
