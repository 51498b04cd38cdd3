// Package netcode implements the netcode 1.02 protocol: secure,
// connection-oriented client/server sessions over UDP for real-time games,
// wire-compatible with the C reference implementation.
//
// A server is a net.Listener:
//
//	l, err := netcode.Listen("udp", ":40000", &netcode.ServerConfig{
//		ProtocolID: protocolID,
//		PrivateKey: privateKey, // shared with the token backend
//	})
//	for {
//		conn, err := l.Accept() // a client completed the handshake
//		...
//	}
//
// A client connects with a connect token minted by the backend (package
// token) and gets a net.Conn:
//
//	conn, err := netcode.Dial(connectToken)
//
// Connections are message-oriented: one Write sends one payload of 1 to
// MaxPayloadBytes bytes as one packet, and one Read returns one payload.
// Payloads are unreliable and unordered, as UDP datagrams are; the protocol
// authenticates and encrypts each one and protects against replays.
// Deadlines, Close and errors behave as in package net: a Read past its
// deadline fails with an error wrapping os.ErrDeadlineExceeded, use after
// Close fails with net.ErrClosed, a clean disconnect by the peer reads as
// io.EOF, and protocol failures wrap the exported Err values.
//
// A server answers nothing to a connection request it refuses, so a token
// already used, a wrong key or protocol id and a server that is down all
// end a Dial the same way: ErrConnectionRequestTimedOut after the token's
// timeout, with a message that lists those causes. When the context given
// to DialContext ends first, the error wraps both the context's error and
// that state of the handshake.
//
// # Goroutines, locks and queues
//
// Each socket is run by the socket engine, internal/engine, whose package
// doc draws its goroutines, timer callbacks, queues and locks with their
// order; both dialects (this package and package cute) bind to it. What
// follows is netcode's binding. A Listener:
//
//	reader ×ReadShards    one per socket: the engine's (engine.Socket.Run,
//	  │                   transport.ReadLoopTurns: recvmmsg
//	  │                   batches), in the socket's read turn, which it
//	  │                   gives to Reads that wait (see Conn.Read below)
//	  │                   → its own server.Receiver and Output →
//	  │                   after the batch, the replies go to its socket's
//	  │                   send queue (dropped if it is full: clients
//	  │                   resend) and the
//	  │                   log records to the Logger; a connected client's
//	  │                   payloads go to its packetq.Queue; a finished
//	  ▼                   handshake makes a Conn and puts it in the Accept
//	                      queue (chan, AcceptBacklog)
//	ticker ×1             server.Update when something is due (the core's
//	                      deadline wheel says when, on the monotonic clock;
//	                      a new client wakes it): timeouts, and the
//	                      keep-alives that are due, handed to the first
//	                      socket's send queue after the core's locks
//	                      (dropped, counted, if it is full)
//	writer ×ReadShards    one per socket, its send queue's (sendqueue.go):
//	                      sends what is queued from its socket, grouped
//	                      by destination, sendmmsg batches of up to 64
//	                      in which each run of datagrams to one client
//	                      is one UDP GSO train where the kernel has it
//	Conn.Write (callers)  in the Conn's write turn: seals under the client's
//	                      send lock, then hands the packet to the send
//	                      queue of the socket that heard the client's
//	                      handshake: written at once if it is idle,
//	                      else queued for the writer; a full queue makes it
//	                      wait until there is room, the Conn ends (Close)
//	                      or its write deadline passes
//	Conn.Read (callers)   takes a payload from the client's packetq.Queue;
//	                      with none queued, reads the socket itself if its
//	                      read turn is free, acting on each datagram as
//	                      the reader does (other Conns' payloads go to
//	                      their queues), else waits on the queue (deadline,
//	                      Close). The reader gives the turn up after a
//	                      batch from one client when one Read waits (with
//	                      several clients sending, its larger batches cost
//	                      less), and takes it back when several send or
//	                      wait, or 20-40 ms after the last Read that read
//	                      the socket. A Read
//	                      waits on the socket at most 200 ms at a time, so
//	                      that it sees a timeout the ticker applied.
//
// With Socket.ReadShards > 1 each socket has its own reader, send queue and
// writer: a reader's replies, and the Writes and Close of the connections
// whose handshake it heard, leave from its socket; the ticker's keep-alives
// and Listener.Close's disconnects leave from the first. A new Conn reaches
// Accept only once the keep-alive that confirms it to the client is in its
// socket's queue, so nothing the Conn sends can overtake it. All the sockets share one
// address, so a client cannot tell which one a packet came from.
//
// Locks, in the order they may be taken, each one's job by where it is
// declared: a socket's read turn (a channel) → a Conn's write turn (a
// channel) → server.Server.tick (Update
// only) or Server.mainMu (Server.Receive only) → server.Server.mu
// (RWMutex over the slot, address, id and token tables; lookups
// read-lock it) → the core's deadline wheel lock, or a client's receive
// lock (its receive AEAD and replay window), or its send lock (send AEAD
// and sequence; held only to seal) → packetq.Queue's lock. The send
// queue's lock is a leaf, never held across a socket write nor while a
// sender waits, and the socket's own locks (mmsgConn.rmu and wmu, in
// internal/transport) are taken by the goroutine reading or writing with
// no other lock held but, for a direct write, its Conn's write turn. The
// core calls no code of this package, no socket and no logger: each call
// reports the datagrams it sealed and its log records in a server.Output
// that the caller acts on once the core's locks are released. No AEAD
// operation and no system call happens under server.Server.mu.
//
// A dialed Conn owns one goroutine, its reader (transport.ReadLoopTurns), and a
// timer (time.AfterFunc) set to the client core's next deadline: a send, a
// timeout or the token's expiry; its callback runs, on a goroutine of its
// own, only then. A Write moves it later (its payload puts the next
// keep-alive off), so that a Conn written to at 10 Hz or more never runs
// it. (The bridge's relay, which dials a Conn per browser, has its Conns'
// timers run on one wheel of its own, internal/timerwheel, instead.) Each call into the core reports what it did in an Output
// (state change, payload, datagrams, log records, next deadline) that the
// caller acts on after the core's lock is released. Its payloads wait in
// its own packetq.Queue. The socket is read by whoever holds the Conn's
// read turn: the reader, or a Read that finds nothing queued and the turn
// free, which then reads the socket itself (with the Conn's read
// deadline), hands what it read to the core and returns the payload with
// no goroutine hand-off. The reader gives the turn up after a batch when
// a Read waits on the queue, stays parked while Reads read the socket,
// and takes it back 20-40 ms after the last one, so that keep-alives and
// payloads are still taken in when nobody reads. Locks: the read turn (a
// channel) → the Conn's write turn (the timer, Write and Close; held from
// the sealing of its packets to their socket write, so that they leave in
// order; Close does not wait for it: it closes the socket under a Write
// held there, as crypto/tls does) → the core's lock; the timer's lock and
// the read deadline's are leaves. Close on either side stops every
// goroutine it owns before it returns.
//
// Every goroutine, by the function it runs (TestGoroutineInventory fails
// if another runs):
//
//	netcode.(*Listener).readLoop  a Listener's reader, one per socket
//	netcode.(*Listener).tickLoop  a Listener's ticker
//	sendq.(*Queue).writer         a Listener's writer, one per socket (internal/sendq)
//	netcode.(*dialConn).readLoop  a dialed Conn's reader
//
// and the engine's timer callbacks, listed in its package doc:
// engine.(*Due).fire runs a dialed Conn's Update; engine.(*Held).dispatch
// writes a dialed Conn's held Writes once its writer stops;
// engine.(*Fallback).fire writes a Listener's server Conns' held Writes
// that nothing else sent within engine.HeldFallback.
package netcode

// Review rule for this module's files (not a test: a count cuts types
// apart): a file holds one concept, and one type's life is in one file.
// A file past about 600 lines is a signal to look for its second concept,
// never a rule to cut at; the engine's package doc (internal/engine) says
// the same for its files.
