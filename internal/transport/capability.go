package transport

import "net"

// The optional features of a socket, each a named interface that New, the
// read loops and the socket engine (internal/engine) look for by an
// assertion on the exported interface, never on an unexported method. A
// socket without one works all the same, through the fallback each names;
// what follows says what a caller's wrapper around one of this module's
// sockets (a net.PacketConn that embeds or forwards to a *net.UDPConn, a
// bridge Mux or a bridge client) loses by hiding it.
// TestCapabilityFallbacks runs every fallback over a plain net.PacketConn
// wrapper.
//
//   - Batcher, batch I/O: without it, New reads and writes one datagram
//     per call (ReadFrom and WriteTo). A wrapper of a *net.UDPConn loses
//     recvmmsg/sendmmsg, UDP GSO trains and GRO: a system call per
//     datagram. A wrapper of a Mux loses the read of its queue in batches.
//   - AddrPortIO, allocation-free single datagrams: without it, each
//     datagram's address is converted from and to a *net.UDPAddr (an
//     allocation per datagram).
//   - Pusher, the push path: without it, every datagram goes through
//     ReadBatch, read by the socket's reader goroutine or a pulling Read.
//     A wrapper of a Mux loses the delivery of its WebSocket sessions'
//     datagrams on their own goroutines: a hand-off to the reader and
//     back per datagram.
//   - DirectWriter, direct writes to pushed peers: without it, the
//     replies to a pushed peer go through the socket's send queue and its
//     writer goroutine, a wake of the writer per reply.
//   - WaitReporter, lone reads: without it, a pulling Read asks for a
//     whole batch at every read (one more look at the empty socket per
//     datagram while they come one at a time).
//   - HeldReader, held reads: without it, a Listener's reader reads the
//     socket once per readiness, one read more per lone datagram.
//
// A connected socket (Connect: connect(2) to the one peer of a dialed
// Conn) is a feature of the recvmmsg/sendmmsg path only, so a wrapper
// loses it with Batcher: a dialed Conn then neither connects its socket
// nor holds its Writes for a train.
//
// A type of this module that must not export such methods itself (their
// signatures name this package's types, which its users cannot name)
// embeds a Batched under an unexported name: Batched is a Capable, which
// says what the type offers through a method its users cannot call.

// Pusher is a socket some of whose datagrams arrive on goroutines of their
// own: the WebSocket sessions of the bridge's Mux, each read by its own
// goroutine. A reader of the socket that can act on a datagram at once, on
// any goroutine, gives it a sink (Push); from then on those datagrams go
// to the sink on the goroutine that received them, one batch at a time,
// instead of through a queue that ReadBatch reads. It saves the hand-off
// to the reader's goroutine and back.
//
// The sink acts on ms at once and never blocks on a peer (it drops what
// has no room, as a full socket buffer would); it may modify the
// datagrams' bytes, which are the pusher's and reused after it returns.
// It is called concurrently, from every session's goroutine.
type Pusher interface {
	Push(sink func(ms []Message))
}

// DirectWriter is a Pusher whose writes to the peers it pushes never
// block (the Mux's WebSocket sessions, whose writes go to a bounded queue
// of their own) and may run beside its writer's: the replies to those
// peers may be written at once, by WriteBatch or WriteTo, from the
// goroutine that acts on what they sent, past the send queue.
type DirectWriter interface {
	WritesDirect() bool
}

// WaitReporter is a socket that tells whether its last ReadBatch waited
// for its datagram (found the socket empty): a pulling Read that keeps
// waiting for one datagram then asks for one only.
type WaitReporter interface {
	ReadWaited() bool
}

// HeldReader is a Conn that can read batch after batch within one wait
// for readability: ReadHeld calls handle with each batch until stop is
// closed (it then returns a nil error), a read fails, or handle returns
// false, and reports whether it read anything.
type HeldReader interface {
	ReadHeld(ms []Message, stop <-chan struct{}, handle func([]Message) (hold bool)) (handled bool, err error)
}

// Capabilities are the optional features a net.PacketConn offers.
type Capabilities struct {
	Batcher    Batcher    // nil: one datagram per call
	AddrPortIO AddrPortIO // nil: addresses as *net.UDPAddr
	Pusher     Pusher     // nil: no push path
	Direct     bool       // writes to pushed peers never block (DirectWriter)
}

// Capable is a net.PacketConn that says what it offers; a Batched it
// embeds makes it one. Its method takes a Key, which the module's users
// cannot name: a public type that is Capable has no method they can call.
type Capable interface {
	SocketCapabilities(Key) Capabilities
}

// Key is the argument of Capable's method.
type Key struct{}

// CapabilitiesOf returns what pc offers: what it says (Capable), and
// for what it does not say, what its own methods are.
func CapabilitiesOf(pc net.PacketConn) Capabilities {
	var caps Capabilities
	if c, ok := pc.(Capable); ok {
		caps = c.SocketCapabilities(Key{})
	}
	if caps.Batcher == nil {
		caps.Batcher, _ = pc.(Batcher)
	}
	if caps.AddrPortIO == nil {
		caps.AddrPortIO, _ = pc.(AddrPortIO)
	}
	if caps.Pusher == nil {
		caps.Pusher, _ = pc.(Pusher)
		if d, ok := pc.(DirectWriter); ok && caps.Pusher != nil {
			caps.Direct = d.WritesDirect()
		}
	}
	return caps
}

// Batched is embedded, under an unexported name, by a net.PacketConn of
// this module that has I/O of its own beyond net.PacketConn's (a Mux, a
// bridge client's Conn): batched (B), by netip.AddrPort (P), pushed (S,
// whose writes to its pushed peers never block: a DirectWriter). Any may
// be nil. The type then exports no method its users could call:
// SocketCapabilities takes a Key.
type Batched struct {
	B Batcher
	P AddrPortIO
	S Pusher
}

// SocketCapabilities is Capable's.
func (b Batched) SocketCapabilities(Key) Capabilities {
	caps := Capabilities{Batcher: b.B, AddrPortIO: b.P, Pusher: b.S}
	if d, ok := b.S.(DirectWriter); ok {
		caps.Direct = d.WritesDirect()
	}
	return caps
}
