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
// A Listener:
//
//	reader ×ReadShards    one per socket: transport.ReadLoop (recvmmsg batches)
//	  │                   → its own server.Receiver → replies batched per socket
//	  │                   → a connected client's payloads go to that client's
//	  │                     packetq.Queue; a finished handshake makes a Conn
//	  ▼                     and puts it in the Accept queue (chan, AcceptBacklog)
//	ticker ×1             server.Update when something is due (the core's
//	                      deadline wheel says when; a new client wakes it):
//	                      timeouts, and the keep-alives that are due, sealed
//	                      after the core's lock
//	Conn.Write (callers)  seals under the client's send lock, then the
//	                      combining sink: the caller that finds the socket idle
//	                      writes, others queue behind it (one sendmmsg for many)
//	Conn.Read (callers)   blocks on the client's packetq.Queue (deadline, Close)
//
// Locks, in the order they may be taken: server.Server.tick (Update only) →
// server.Server.mu (RWMutex over the slot, address, id and token tables;
// lookups read-lock it) → the core's deadline wheel lock (a leaf, never
// held with a client's locks) or a client's receive lock (its receive AEAD
// and replay window) or its send lock (send AEAD, sequence, buffers; held
// across the sink's Send so one client's packets leave in order) → the
// combining sink's lock → packetq.Queue's lock (a leaf). No AEAD operation and no system call
// happens under server.Server.mu, and the core never calls back into this
// package: it returns the clients that connect and ends their queues when
// they leave.
//
// A dialed Conn owns one goroutine, its reader (transport.ReadLoop), and a
// timer (time.AfterFunc) set to the client core's next deadline: a send, a
// timeout or the token's expiry; its callback runs, on a goroutine of its
// own, only then. Each call into the core reports what it did in an Output
// (state change, payload, datagrams, next deadline) that the caller acts on
// after the core's lock is released. Locks: the Conn's send lock (the
// timer, Write and Close; held across the socket write so its packets leave
// in order) → the core's lock; the timer's lock is a leaf. Its payloads
// wait in its own packetq.Queue. Close on either side stops every goroutine
// it owns before it returns.
package netcode
