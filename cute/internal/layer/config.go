package layer

import (
	"errors"
	"time"
)

// The wire's sizes and cute_net.h's limits.
const (
	// AckHeaderBytes is CN_ACK_SYSTEM_HEADER_SIZE: sequence, ack, ack bits.
	AckHeaderBytes = 8
	// HeaderBytes is CN_TRANSPORT_HEADER_SIZE: prefix, message sequence,
	// fragment count, index and size.
	HeaderBytes = 9
	// FragmentBytes is CN_TRANSPORT_MAX_FRAGMENT_SIZE.
	FragmentBytes = 1100
	// MaxDatagram is the largest datagram a Transport sends: both headers
	// and a whole fragment.
	MaxDatagram = AckHeaderBytes + HeaderBytes + FragmentBytes
	// MaxAckPayload is CN_ACK_SYSTEM_MAX_PACKET_SIZE: the ack system sends
	// payloads of at most this size and receives datagrams of at most it.
	MaxAckPayload = 1180
	// MaxMessageBytes is the largest message a C receiver accepts (19,065
	// fragments of 1100 bytes, under its 20 MiB limit, less one byte for
	// fire-and-forget's size rule): the bound of Config.MaxMessageBytes.
	MaxMessageBytes = 20971500
	// MaxInFlight is max_fragments_in_flight: unacknowledged reliable
	// fragments at once.
	MaxInFlight = 32
	// QueueEntries is CN_TRANSPORT_SEND_QUEUE_MAX_ENTRIES and
	// CN_PACKET_QUEUE_MAX_ENTRIES: reliable messages waiting to be sent,
	// and received messages of each kind waiting to be read.
	QueueEntries = 1024
	// ackBuffer is the ack system's and the reassembly's sequence buffer
	// size.
	ackBuffer = 1024
)

// Defaults of the zero fields of Config.
const (
	// DefaultMaxMessageBytes is the default Config.MaxMessageBytes.
	DefaultMaxMessageBytes = 256 << 10
	// DefaultMaxBufferedBytes is the default Config.MaxBufferedBytes.
	DefaultMaxBufferedBytes = 1 << 20
	// DefaultMaxSendQueueBytes is the default Config.MaxSendQueueBytes.
	DefaultMaxSendQueueBytes = 1 << 20
	// DefaultResendRate is cute_net.h's resend_rate, 0.1f seconds.
	DefaultResendRate = 100 * time.Millisecond
	// DefaultAckDelay is the default Config.AckDelay.
	DefaultAckDelay = 10 * time.Millisecond
	// DefaultAckTimeout is the default Config.AckTimeout.
	DefaultAckTimeout = 10 * time.Second
	// giveUpResends is how many resends a fragment gets before AckTimeout
	// can end the connection.
	giveUpResends = 5
)

// Config tunes a Transport. The zero value is the safe default.
type Config struct {
	// MaxMessageBytes is the largest message sent or received, at most
	// MaxMessageBytes (the C code's limit). Default 256 KiB.
	MaxMessageBytes int
	// MaxBufferedBytes bounds what the receiving side holds: fragments in
	// reassembly and messages waiting to be read, counted in 1100-byte
	// fragments, plus one message being delivered. Default 1 MiB; raised to
	// MaxMessageBytes.
	MaxBufferedBytes int
	// MaxSendQueueBytes bounds the reliable messages queued but not yet
	// fully handed out as fragments; a Send past it fails with
	// ErrSendQueueFull. Default 1 MiB; raised to MaxMessageBytes.
	MaxSendQueueBytes int
	// ResendRate is how long a reliable fragment waits for its ack before
	// it is sent again. Default 100 ms (the C code's 0.1f seconds, whose
	// float value the comparison uses, as the C code does).
	ResendRate time.Duration
	// AckDelay is how long received reliable data may wait for an
	// outgoing datagram to carry its ack before an ack-only datagram is
	// sent. Default 10 ms.
	AckDelay time.Duration
	// AckTimeout gives up on a peer that does not acknowledge: Update
	// fails with ErrAckTimeout when a fragment was resent at least 5 times
	// and the peer, still sending, has not acknowledged it this long
	// after it was first sent. A peer that sends nothing at this layer is
	// not given up on: a Cute Framework peer acknowledges only with its
	// own data, and a silent connection is the protocol's timeout to end.
	// Default 10 s; negative never gives up.
	AckTimeout time.Duration
	// PiggybackOnly sends no ack-only datagram: acks ride only on data,
	// as in cute_net.h, and a side that sends nothing never acknowledges.
	// For replaying Cute Framework's recorded runs; a live connection
	// wants the default.
	PiggybackOnly bool
}

// errConfig is the error of an invalid Config.
var errConfig = errors.New("cute/layer: invalid config")

// withDefaults fills the zero fields and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.MaxBufferedBytes == 0 {
		c.MaxBufferedBytes = DefaultMaxBufferedBytes
	}
	if c.MaxSendQueueBytes == 0 {
		c.MaxSendQueueBytes = DefaultMaxSendQueueBytes
	}
	if c.ResendRate == 0 {
		c.ResendRate = DefaultResendRate
	}
	if c.AckDelay == 0 {
		c.AckDelay = DefaultAckDelay
	}
	if c.AckTimeout == 0 {
		c.AckTimeout = DefaultAckTimeout
	}
	if c.MaxMessageBytes < 1 || c.MaxMessageBytes > MaxMessageBytes ||
		c.MaxBufferedBytes < 0 || c.MaxSendQueueBytes < 0 ||
		c.ResendRate < 0 || c.AckDelay < 0 {
		return c, errConfig
	}
	c.MaxBufferedBytes = max(c.MaxBufferedBytes, c.MaxMessageBytes)
	c.MaxSendQueueBytes = max(c.MaxSendQueueBytes, c.MaxMessageBytes)
	return c, nil
}

// Errors of Send, Receive and Update.
var (
	// ErrEmpty is Send's error for a 0-byte message, which cute_net.h's
	// cn_client_send and cn_server_send refuse too.
	ErrEmpty = errors.New("cute/layer: empty message")
	// ErrTooLarge is Send's error for a message over MaxMessageBytes, and
	// Receive's for a datagram over the ack system's limit or claiming a
	// message over it.
	ErrTooLarge = errors.New("cute/layer: message too large")
	// ErrSendQueueFull is Send's error when the reliable send queue holds
	// QueueEntries messages or MaxSendQueueBytes.
	ErrSendQueueFull = errors.New("cute/layer: reliable send queue full")
	// ErrMalformed is Receive's error for a datagram no cute_net.h sender
	// writes; it is not acknowledged.
	ErrMalformed = errors.New("cute/layer: malformed datagram")
	// ErrStale is Receive's error for a datagram older than the ack
	// system's or the reassembly's window.
	ErrStale = errors.New("cute/layer: stale datagram")
	// ErrDuplicate is Receive's error for a reliable fragment of a message
	// already delivered (a resend whose ack was lost); it is acknowledged
	// again.
	ErrDuplicate = errors.New("cute/layer: duplicate of a delivered message")
	// ErrBusy is Receive's error for a fragment refused because the
	// receiving side holds MaxBufferedBytes: a reliable one is not
	// acknowledged (its sender resends it), a fire-and-forget one is lost.
	ErrBusy = errors.New("cute/layer: receive buffer full")
	// ErrDropped is Receive's error for a fire-and-forget message that
	// completed while the reader's queue held QueueEntries messages; it
	// is lost, as in cute_net.h.
	ErrDropped = errors.New("cute/layer: fire-and-forget message dropped, read queue full")
	// ErrAckTimeout is Update's error once the peer has not acknowledged
	// a reliable fragment for Config.AckTimeout: the connection should
	// end.
	ErrAckTimeout = errors.New("cute/layer: peer does not acknowledge")
)
