package reliable

import (
	"errors"
	"fmt"
	"github.com/gonetcode/netcode/reliable/endpoint"
	"hash/fnv"
	"io"
	"log/slog"
	"math"
	"time"

	"github.com/gonetcode/netcode"
)

// ChannelKind says how a channel delivers messages.
type ChannelKind uint8

const (
	// ReliableOrdered channels deliver every message exactly once and in
	// order, resending until the peer acknowledges it. A message can be
	// up to the channel's MaxMessageSize (default DefaultMaxReliableMessage).
	ReliableOrdered ChannelKind = iota + 1
	// Unreliable channels send each message once; it arrives at most once,
	// in any order, whole or not at all. A message larger than one packet
	// is fragmented, and lost if any fragment is.
	Unreliable
	// kindStream is the byte stream of a Stream: reliable and ordered,
	// without message boundaries, ended by a FIN.
	kindStream
)

func (k ChannelKind) String() string {
	switch k {
	case ReliableOrdered:
		return "reliable-ordered"
	case Unreliable:
		return "unreliable"
	case kindStream:
		return "stream"
	}
	return fmt.Sprintf("ChannelKind(%d)", uint8(k))
}

// Wire constants of the channel layer, inside each Endpoint packet.
const (
	layoutBytes      = 4 // every packet starts with the layout hash
	entryChunk       = 1 // channel u8, flags u8, sequence u32, length u16, data
	entryMessage     = 2 // channel u8, length u16, data
	entryWindow      = 3 // channel u8, all chunks before u32 received, take chunks before u32
	chunkEntryHeader = 1 + 1 + 1 + 4 + 2
	msgEntryHeader   = 1 + 1 + 2
	windowEntryBytes = 1 + 1 + 4 + 4
	flagFIN          = 1
	flagAckNow       = 2 // the sender waits for this ack: do not delay it
	messageLenBytes  = 4 // a reliable message's length prefix in its stream
	fragmentsPerMsg  = 16
	minPacketBytes   = 64
	maxWindowBytes   = 1 << 30
	layoutVersion    = "gonetcode-reliable/2" // 2: flagAckNow
)

// ChannelConfig describes one channel. Both ends must have the same
// channels, in the same order, with the same settings.
type ChannelConfig struct {
	// Kind is ReliableOrdered or Unreliable.
	Kind ChannelKind
	// MaxMessageSize is the largest message. Reliable default 256 KiB;
	// unreliable default and maximum: 16 fragments of a packet.
	MaxMessageSize int
	// WindowBytes (reliable) is the receive window: how many bytes of
	// data the peer may have in flight, which is what it can make this
	// end buffer while it withholds an earlier chunk. It is rounded up to
	// whole chunks (a packet's worth each, 1168 bytes with the defaults)
	// and raised to hold one largest message (plus a chunk) on a
	// reliable-ordered channel. Both ends must agree on it. Default
	// Config.WindowBytes.
	WindowBytes int
	// SendBuffer (reliable) is how many bytes Send queues before it
	// blocks; it is raised to hold one largest message. Default 256 KiB.
	SendBuffer int
	// Queue (unreliable) is how many messages wait to be sent, and how
	// many received wait for Receive, before more are refused or dropped.
	// Default 256.
	Queue int
	// QueueBytes (unreliable) bounds the buffers of the messages waiting
	// each way, in bytes; a received message past it is dropped (counted
	// in SessionStats.UnreliableDropped), a Send past it fails with
	// ErrSendQueueFull. It is raised to hold one largest message. Default
	// 64 KiB.
	QueueBytes int
}

// Config configures a Session or a Stream. The zero value is usable.
type Config struct {
	// Channels are a Session's channels; nil means one ReliableOrdered
	// channel (0) and one Unreliable channel (1). A Stream ignores it.
	Channels []ChannelConfig
	// MaxPacketBytes is the largest datagram the message connection
	// carries; default netcode.MaxPayloadBytes (1200).
	MaxPacketBytes int
	// TickInterval is how long data the send budget holds back waits
	// before the budget is refilled (a burst is two of them), and the
	// grain added to resend timeouts. No timer ticks at this period: an
	// idle connection sleeps until something is due. Default 10 ms.
	TickInterval time.Duration
	// SendRate, if set, caps the send rate in bytes per second, shared
	// by all channels; unreliable messages go first, so a large reliable
	// transfer never delays them. Zero (the default) leaves the rate to
	// congestion control, which finds it: a window of bytes in flight
	// that doubles every RTT from 32 packets until the first loss, is
	// cut to 0.7 of itself at a loss that comes with a queue, and grows
	// back along CUBIC's curve, paced over the smoothed RTT. It is bounded by the receive window
	// (WindowBytes) and by the 1536 packets the acks can tell apart.
	// Set SendRate to keep a transfer from taking all of a link it
	// shares, such as a server's uplink.
	SendRate int
	// Linger is how long Close waits for the peer to acknowledge what was
	// sent before closing the message connection. Default 5 s.
	Linger time.Duration
	// WindowBytes is a Stream's receive window, and that of the reliable
	// channels whose own ChannelConfig.WindowBytes is 0 (see there):
	// what the peer can make this end buffer. Set, it is fixed. Zero, a
	// Session's channels have 256 KiB and a Stream's window starts at
	// 256 KiB and grows, doubling, up to 1 MiB while the reader takes a
	// window's worth in less than 4 round trips (the window, not the
	// reader, bounds the transfer); what a peer that withholds a chunk
	// can make a Stream buffer is then up to 1 MiB. A server of many
	// untrusted Streams that wants the lower bound sets 256 KiB; a bulk
	// transfer over a long path wants the bandwidth-delay product, on
	// both ends.
	WindowBytes int
	// AckTimeout gives up on a peer that does not acknowledge reliable
	// data, as TCP's user timeout does: when a chunk has gone
	// unacknowledged this long since it was first sent, and was resent
	// at least 5 times, the connection ends with ErrAckTimeout. (A peer
	// whose netcode connection is silent altogether is noticed sooner by
	// netcode's own timeout.) Default 10 s; negative
	// never gives up.
	AckTimeout time.Duration
	// Logger receives debug logs; nil is silent.
	Logger *slog.Logger
}

// errConfig is the error of an invalid Config.
var errConfig = errors.New("netcode/reliable: invalid config")

// ErrConfigMismatch is the error of a connection whose peer has another
// channel layout (or stream versus channels): its packets carry another
// layout hash. The connection is closed.
var ErrConfigMismatch = errors.New("netcode/reliable: peer's channel layout differs")

// ErrProtocol is the error of a connection whose peer sent a packet that
// breaks the channel protocol. The connection is closed.
var ErrProtocol = errors.New("netcode/reliable: protocol violation by peer")

// ErrMessageTooLarge is returned by Send for a message over the channel's
// MaxMessageSize.
var ErrMessageTooLarge = errors.New("netcode/reliable: message too large")

// ErrSendQueueFull is returned by an unreliable channel's Send when Queue
// messages are already waiting: unreliable sends never block.
var ErrSendQueueFull = errors.New("netcode/reliable: send queue full")

// ErrAckTimeout is the error of a connection whose peer left reliable data
// unacknowledged for Config.AckTimeout: it is gone, or hostile.
var ErrAckTimeout = errors.New("netcode/reliable: peer did not acknowledge data within the ack timeout")

// errUnexpectedEOF is the error of a Stream's Read when the message
// connection ended before the peer closed the stream: io.ErrUnexpectedEOF
// for errors.Is, as a truncated stream reads in package io and crypto/tls.
var errUnexpectedEOF = fmt.Errorf("netcode/reliable: connection ended before the peer closed the stream: %w", io.ErrUnexpectedEOF)

// chanSpec is a resolved ChannelConfig.
type chanSpec struct {
	kind       ChannelKind
	maxMessage int
	window     int // in chunks: the receive window at first
	maxWindow  int // in chunks: the most it grows to (window if WindowBytes was set)
	sendBuffer int
	queue      int
	queueBytes int
}

// resolved is a Config with defaults applied and sizes derived.
type resolved struct {
	chans      []chanSpec
	maxPacket  int // datagram
	maxPayload int // largest unfragmented Endpoint payload
	chunkMax   int // data bytes of a chunk
	tick       time.Duration
	rate       float64
	linger     time.Duration
	ackTimeout time.Duration // <= 0: never give up
	log        *slog.Logger
	layout     uint32
	endpoint   endpoint.Config
}

// inFlightPackets is how many packets a peer may have in flight towards
// this end: one per chunk of the reliable windows (a chunk fills a
// packet), and a margin for acks, resends and unreliable messages.
func (r *resolved) inFlightPackets() int {
	n := inFlightMargin
	for _, s := range r.chans {
		if s.kind != Unreliable {
			n += s.maxWindow
		}
	}
	return n
}

func (cfg *Config) resolve(stream bool) (*resolved, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	r := &resolved{
		maxPacket:  c.MaxPacketBytes,
		tick:       c.TickInterval,
		rate:       float64(c.SendRate),
		linger:     c.Linger,
		ackTimeout: c.AckTimeout,
		log:        c.Logger,
	}
	if r.maxPacket == 0 {
		r.maxPacket = netcode.MaxPayloadBytes
	}
	if r.maxPacket < minPacketBytes {
		return nil, fmt.Errorf("%w: MaxPacketBytes %d is under %d", errConfig, r.maxPacket, minPacketBytes)
	}
	if r.tick <= 0 {
		r.tick = defaultTickInterval
	}
	if r.rate <= 0 {
		r.rate = math.Inf(1) // congestion control alone
	}
	if r.linger <= 0 {
		r.linger = defaultLinger
	}
	if r.ackTimeout == 0 {
		r.ackTimeout = defaultAckTimeout
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	chans := c.Channels
	switch {
	case stream:
		chans = []ChannelConfig{{Kind: kindStream}}
	case chans == nil:
		chans = []ChannelConfig{{Kind: ReliableOrdered}, {Kind: Unreliable}}
	case len(chans) == 0 || len(chans) > 255:
		return nil, fmt.Errorf("%w: %d channels", errConfig, len(chans))
	}
	nrel := 0
	for _, ch := range chans {
		if ch.Kind != Unreliable {
			nrel++
		}
	}
	fragmentSize := r.maxPacket - endpoint.FragmentHeaderBytes - endpoint.MaxPacketHeaderBytes
	r.maxPayload = r.maxPacket - endpoint.MaxPacketHeaderBytes
	r.chunkMax = r.maxPayload - layoutBytes - nrel*windowEntryBytes - chunkEntryHeader
	if r.chunkMax < 16 {
		return nil, fmt.Errorf("%w: %d reliable channels leave no room in a %d-byte packet", errConfig, nrel, r.maxPacket)
	}
	maxUnreliable := fragmentsPerMsg*fragmentSize - layoutBytes - msgEntryHeader
	h := fnv.New32a()
	h.Write([]byte(layoutVersion))
	for i, ch := range chans {
		s := chanSpec{kind: ch.Kind, maxMessage: ch.MaxMessageSize, sendBuffer: ch.SendBuffer, queue: ch.Queue, queueBytes: ch.QueueBytes}
		if s.maxMessage < 0 || ch.WindowBytes < 0 || c.WindowBytes < 0 || c.WindowBytes > maxWindowBytes || s.sendBuffer < 0 || s.queue < 0 || s.queueBytes < 0 || ch.WindowBytes > maxWindowBytes {
			return nil, fmt.Errorf("%w: channel %d: negative or huge size", errConfig, i)
		}
		switch ch.Kind {
		case ReliableOrdered, kindStream:
			if s.maxMessage == 0 {
				s.maxMessage = DefaultMaxReliableMessage
			}
			wb := ch.WindowBytes
			if wb == 0 {
				wb = c.WindowBytes
			}
			maxWB := wb
			if wb == 0 {
				// A Stream's default window grows (relRecv.tune); a
				// Session's channels keep theirs, sized for a server
				// with hundreds of clients.
				wb, maxWB = defaultWindowBytes, defaultWindowBytes
				if stream {
					maxWB = defaultMaxWindowBytes
				}
			}
			s.window = max((wb+r.chunkMax-1)/r.chunkMax, 2)
			s.maxWindow = (maxWB + r.chunkMax - 1) / r.chunkMax
			if s.sendBuffer == 0 {
				s.sendBuffer = defaultSendBuffer
			}
			if ch.Kind == ReliableOrdered {
				// A message is read whole, so the receive window must
				// hold the largest, and the send buffer must take it.
				s.window = max(s.window, (s.maxMessage+messageLenBytes+r.chunkMax-1)/r.chunkMax+1)
				s.sendBuffer = max(s.sendBuffer, s.maxMessage+messageLenBytes)
			}
			s.maxWindow = max(s.maxWindow, s.window)
		case Unreliable:
			if s.maxMessage == 0 {
				s.maxMessage = maxUnreliable
			}
			if s.maxMessage > maxUnreliable {
				return nil, fmt.Errorf("%w: channel %d: MaxMessageSize %d over the unreliable maximum %d", errConfig, i, s.maxMessage, maxUnreliable)
			}
			if s.queue == 0 {
				s.queue = defaultQueue
			}
			if s.queueBytes == 0 {
				s.queueBytes = defaultQueueBytes
			}
			s.queueBytes = max(s.queueBytes, s.maxMessage)
		default:
			return nil, fmt.Errorf("%w: channel %d: kind %v", errConfig, i, ch.Kind)
		}
		r.chans = append(r.chans, s)
		var b [13]byte
		b[0] = byte(s.kind)
		putU32(b[1:], uint32(s.maxMessage))
		putU32(b[5:], uint32(s.window))
		putU32(b[9:], uint32(r.maxPacket))
		h.Write(b[:])
	}
	r.layout = h.Sum32()
	r.endpoint = endpoint.Config{
		Name:                         "reliable",
		MaxPacketSize:                fragmentsPerMsg * fragmentSize,
		FragmentAbove:                r.maxPayload,
		MaxFragments:                 fragmentsPerMsg,
		FragmentSize:                 fragmentSize,
		AckBufferSize:                2048,
		SentPacketsBufferSize:        2048,
		ReceivedPacketsBufferSize:    2048,
		FragmentReassemblyBufferSize: 16,
	}
	return r, nil
}

func putU32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}
