// Package reliable adds acknowledgements, fragmentation, reliable
// messages and reliable byte streams on top of an unreliable message
// connection such as a *netcode.Conn, whose payloads are datagrams of at
// most 1200 bytes that may be lost, duplicated or reordered.
//
// # Which to use when
//
// There are three layers; pick the highest one that fits. This package
// has the two upper ones; the lowest is package
// [github.com/gonetcode/netcode/reliable/endpoint].
//
//   - Stream is a net.Conn: an ordered, reliable, flow-controlled byte
//     stream, for code written against TCP. net/http, bufio, io.Copy,
//     encoding/gob and the like work unchanged, at any size. Listener turns
//     a *netcode.Listener into a listener of Streams, so http.Serve works
//     over netcode, and Dialer.DialContext fits http.Transport.DialContext.
//     Use it for downloads, uploads, RPC, chat: anything that is a stream.
//
//   - Session carries channels, each reliable-ordered (every message
//     delivered exactly once and in order, up to 256 KiB by default) or
//     unreliable (each message delivered at most once, whole or not at
//     all, never delayed by resends). Use it for a game: state updates on
//     an unreliable channel, events and chat on a reliable one, over one
//     connection. Unreliable messages are sent first under the connection's
//     send budget, so a large reliable message never starves them.
//     Both ends must declare the same channels; a peer with another layout
//     is detected on its first packet and the session ends with
//     ErrConfigMismatch.
//
//   - endpoint.Endpoint is a port of mas-bandwidth/reliable 1.4.0, byte for byte
//     compatible with it on the wire: sequence numbers and acks for the
//     last 32 packets on every packet, fragmentation and reassembly of
//     large packets, and RTT, packet loss and bandwidth estimates computed
//     in float32 exactly as the C library does. It does no I/O and reads no
//     clock. Use it to talk to a C or C++ program that links reliable, or
//     to build your own protocol on its acks.
//
// Stream and Session run on an endpoint.Endpoint: each of their datagrams
// is an Endpoint packet whose payload starts with a hash of the channel layout.
// Reliable data is cut into chunks that are resent when the Endpoint's
// acks show them lost, after a timeout from the measured RTT, and copied
// into spare room of packets sent anyway; a cumulative ack and a receive
// window per channel travel on every packet.
//
// # Backpressure and errors
//
// A reliable channel's Send and a Stream's Write block while the send
// buffer is full (the peer reads slower than this end writes) until the
// write deadline, which fails them with an error wrapping
// os.ErrDeadlineExceeded; Send queues a message whole or not at all. An
// unreliable channel's Send never blocks: it fails with ErrSendQueueFull.
// Errors are *net.OpError values naming both addresses; after Close calls
// fail with net.ErrClosed, and a Stream reads io.EOF after the peer's
// Close.
//
// # Send rate
//
// Congestion control finds the rate: a window of bytes in flight starts
// at 32 packets, doubles every round trip until the first loss, grows
// back after a cut along CUBIC's curve (RFC 9438), and is cut to 0.7 of
// itself when a loss comes with RTT samples that show a queue on the path (every
// sample of the last round trip over the least RTT by half of it and at
// least 1 ms): a queue that overflows delays every packet, jitter and
// reordering only some, so random loss on a radio link does not collapse
// the rate. Packets are paced at 1.25 windows per smoothed RTT (2 in
// slow start). The window never exceeds the receive window (WindowBytes)
// nor the 1536 packets the acks tell apart. Config.SendRate, if set,
// caps the rate: for a transfer that must leave room on a link it
// shares. SessionStats reports the window, the pacing rate and the cuts.
//
// The receiver acks every 16 packets, or after a millisecond, or at once
// when the sender's last packet says it waits for the ack (its window is
// full, or it has nothing more to send).
//
// # What a peer can make a connection hold
//
// Memory is bounded by configuration, not by what the peer withholds. A
// reliable channel buffers at most its receive window (WindowBytes, 256
// KiB by default, rounded up to whole chunks): a peer that withholds the
// first chunk and sends every later one the window takes makes it hold
// about 295 KB with the defaults. A Stream's default window grows while
// its reader keeps up, never past 1 MiB, and only as the reader consumes
// data, so a peer that withholds a chunk cannot grow it. An unreliable channel's receive queue
// holds at most QueueBytes (64 KiB by default) of messages. Buffers left
// by traffic that is over are freed within two seconds. A peer that
// leaves reliable data unacknowledged for AckTimeout (10 s by default,
// after at least five resends) ends the connection with ErrAckTimeout.
//
// # Goroutines, locks and queues
//
// Every goroutine, by the function it runs (TestGoroutineInventory fails
// if another runs):
//
//	reliable.(*conn).readLoop  per Session or Stream: reads datagrams into the core
//	reliable.(*conn).fire      its timer callback, only while something is due
//
// A Session or Stream runs one goroutine of its own, which reads datagrams
// from the message connection, and one timer (time.AfterFunc), whose
// callback runs only when the connection has work due: an ack owed
// (within a millisecond), a resend, the repeat of windows every 100 ms
// for two seconds after the last data, the ack timeout, the trim of
// buffers left by traffic, or pacing while the send budget holds back
// data. An idle connection has none of these: it costs no wake-up at
// all. Both end when the connection ends: Close, the message connection's
// end (netcode's disconnect or timeout), or a protocol error of the peer;
// Close waits for both.
//
// Locks, in order: a Channel's or Stream's read lock or write lock (one
// per direction, serialising that direction's callers); then the
// connection's state lock, held only to compute: the datagrams it makes
// join an ordered write queue before it is released, and are written
// after, by the goroutine that made them or, if another is writing the
// queue already, by that one after its own, so that they leave in the
// order they were made. A *netcode.Conn takes the queue in one batched
// write: it seals each datagram as a packet of its own, as Write does,
// and sends each run of up to 64 (a UDP GSO train) in one system call, or
// one sendmmsg where the kernel has no GSO; over another message
// connection each datagram is one Write. A dialed *netcode.Conn a
// Session or Stream attaches to reads its socket with UDP GRO from then
// on, so that the peer's trains arrive whole. A Write or Send waiting for
// room in the send buffer is woken once it has the room it waits for (a
// quarter of the buffer for a Write, the message for a Send). No write
// (netcode's AEAD and its system call) runs under the state lock and
// nobody waits for another's system call;
// then the write queue's lock and the timer's lock, leaves. The queues:
// each reliable channel's send buffer (SendBuffer bytes, a ring) and
// receive window (WindowBytes); each unreliable channel's send and
// receive queues (Queue messages, QueueBytes); the write queue (what one
// flush makes, bounded by the congestion window and the burst).
package reliable
