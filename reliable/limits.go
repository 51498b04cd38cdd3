// The package's bounds, batch sizes and timer constants, in one place: the
// defaults of the queues a user sizes (Config, ChannelConfig), then the
// fixed ones.

package reliable

import "time"

// initialSlots is the length of a reliable channel's rings until more
// data is in flight: an idle connection does not pay for its window.
const initialSlots = 64

// maxRefs bounds the chunks one packet carries, so that a packet's record
// has a fixed size.
const maxRefs = 8

// ackEvery is how many packets are received before an ack goes back at
// once; fewer wait up to ackDelay, unless the sender asked for the ack at
// once (flagAckNow). 16 is half the 32 packets an Endpoint ack covers, so
// that one lost ack leaves no packet unacknowledged. It halves the acks
// of 8 (65 against 121 per MiB of a bulk transfer): on a loopback path,
// every ack costs the receiver about 7 µs to send and the sender about 4
// µs to take in.
const ackEvery = 16

// writeLowWater: a Write waiting for room in a reliable channel's send
// queue is woken once 1/writeLowWater of the queue is free, or the room
// for all it has left to write (see relSend.wakeWriter).
const writeLowWater = 4

// inFlightMargin is what a netcode Conn's read queue holds beyond a packet
// per chunk of the windows (see resolved.inFlightPackets).
const inFlightMargin = 64

// ackDelay is how long an ack owed waits for more packets to ack.
const ackDelay = time.Millisecond

// idleAck is how often a quiet connection still sends its acks and
// windows, so a lost window update cannot stall the peer for long; it
// stops idleActive after the last data either way, so idle connections
// cost nothing.
const (
	idleAck    = 100 * time.Millisecond
	idleActive = 2 * time.Second
)

// Resend timeouts.
const (
	initialRTO = 200 * time.Millisecond
	minRTO     = 2 * time.Millisecond
	maxRTO     = time.Second
)

// sendLevels is how many resend timeouts the lists tell apart: from
// minRTO, doubling, the timeout reaches maxRTO by the tenth send.
const sendLevels = 10

// fastList is the index of the list of chunks shown lost by later acks.
const fastList = sendLevels

// giveUpResends is how many times a chunk must have been resent, besides
// being unacknowledged for the ack timeout, before the connection gives
// up: a process that was paused longer than the timeout gets its resends
// a chance first.
const giveUpResends = 5

// trimEvery is how often the buffers of traffic that is over are freed.
const trimEvery = time.Second

// maxBurstPackets bounds a burst, so that one does not overflow a socket's
// receive buffer (Linux's default holds about 200 KB).
const maxBurstPackets = 128

// maxWriteQueue bounds the datagrams waiting for a connection's writer:
// past it, what a flush makes is dropped, as a full socket buffer drops
// it (unreliable messages are lost, reliable data resent). Each flush
// makes at most a burst, so a writer that keeps up never sees it.
const maxWriteQueue = 4 * maxBurstPackets

// piggybackLooks bounds the chunks piggyback looks at for a packet.
const piggybackLooks = 4 * maxRefs

// Defaults: those of the zero fields of Config and ChannelConfig, stated
// there too, and the largest reliable message a zero config allows, which a
// user sizes Receive's buffer by.
const (
	// DefaultMaxReliableMessage is the default MaxMessageSize of a
	// reliable-ordered channel: 256 KiB.
	DefaultMaxReliableMessage = 256 << 10
	// defaultWindowBytes is the default WindowBytes of a reliable channel:
	// the data it keeps in flight, and what its peer can make it buffer
	// out of order. It is sized for a server with hundreds of clients;
	// bulk transfers over long paths want the bandwidth-delay product.
	defaultWindowBytes = 256 << 10
	// defaultMaxWindowBytes is the most a Stream's receive window left at
	// its default grows to (relRecv.tune): 1 MiB, four times the default
	// window and above the 470-800 KB congestion window of a loopback
	// transfer. Measured on the busy 2-core machine, interleaved (docs/performance.md,
	// "Streams against quic-go and TCP"), 1 MiB moved as many bytes as the
	// fixed 256 KiB at less CPU per GB; 2 MiB moved fewer, its larger
	// bursts overflowing socket buffers while a reader was descheduled.
	defaultMaxWindowBytes = 1 << 20
	// defaultSendBuffer is the default number of bytes a reliable channel
	// queues before Send or Write blocks (at least one largest message).
	defaultSendBuffer = 256 << 10
	// defaultQueue is the default number of messages an unreliable
	// channel queues each way.
	defaultQueue = 256
	// defaultQueueBytes is the default QueueBytes of an unreliable
	// channel: the bytes its messages waiting each way may hold.
	defaultQueueBytes = 64 << 10
	// defaultAckTimeout is the default AckTimeout: how long reliable data
	// may go unacknowledged before the connection gives up on the peer.
	defaultAckTimeout = 10 * time.Second
	// defaultTickInterval is the default TickInterval: the step of the
	// send budget's pacing and the grain of resend timeouts.
	defaultTickInterval = 10 * time.Millisecond
	// defaultLinger is how long Close waits by default for the peer to
	// acknowledge what was sent.
	defaultLinger = 5 * time.Second
)
