package netcode

import (
	"log/slog"
	"syscall"
	"time"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/transport"
	"github.com/gonetcode/netcode/protocol"
)

// MaxPayloadBytes is the largest payload one Write may send: 1200, the
// protocol's limit (protocol.MaxPayloadBytes).
const MaxPayloadBytes = protocol.MaxPayloadBytes

// ServerConfig configures a Listener.
type ServerConfig struct {
	// ProtocolID must match the protocol id of the connect tokens.
	ProtocolID uint64
	// PrivateKey is shared with the token backend; never ship it to clients.
	// It must not be all zeros: Listen and NewListener refuse that with
	// ErrZeroKey.
	PrivateKey crypto.Key
	// PreviousPrivateKey, if not all zeros, opens connect tokens too. Set
	// it to the retiring key during a key rotation, for as long as tokens
	// sealed with it may still be presented (their lifetime), then clear
	// it. See docs/backend.md, Key rotation.
	PreviousPrivateKey crypto.Key
	// PublicAddr is the "host:port" clients were told in their tokens,
	// where it differs from the bound address (a wildcard bind, NAT, a load
	// balancer). A connection request is answered only if its token's
	// internal address list (token.Params.InternalAddrs, which defaults to
	// the client-facing list) names PublicAddr or the bound address; a
	// server bound to a wildcard address is known by every address of the
	// machine's interfaces at its port. So a server behind NAT is reached
	// by tokens that list its public address for clients and its own
	// address as the internal one, and a token for another server is
	// ignored.
	PublicAddr string
	// MaxClients is the number of client slots; 0 means 256. Up to 65536.
	MaxClients int
	// TokenRate is the most new connections per second the server must
	// take, sustained over a token's lifetime: at most the rate at which
	// the token backend mints tokens for it. The token history remembers
	// every token a connection was made with until the token expires, so
	// that none connects twice, and refuses new tokens when it is full
	// rather than forget one; it holds TokenRate × TokenExpiry tokens
	// (at most 2^24), taking at most 200 bytes each, and only as it
	// fills: with the defaults, 15,360 tokens and 3 MB at 256 slots,
	// 491,520 tokens and 98 MB from 8,192 slots up. A token is recorded
	// only when its client answers the challenge with the token's keys, so
	// only completed handshakes fill it. 0 means 2 per slot per second,
	// at least 512 and at most 16,384.
	TokenRate int
	// TokenExpiry is the longest lifetime of the backend's tokens
	// (token.Params.ExpireSeconds), for sizing the token history (see
	// TokenRate); 0 means 30 s, the token package's default. Tokens that
	// live longer are still remembered until they expire: the history
	// then holds fewer per second of their lifetime.
	TokenExpiry time.Duration
	// Logger receives debug logs; nil is silent.
	Logger *slog.Logger

	// AcceptBacklog is how many connected clients may wait for Accept; a
	// client connecting while it is full is disconnected. 0 means MaxClients.
	AcceptBacklog int
	// ReadQueue is how many received payloads each connection holds for
	// Read; 0 means 256.
	ReadQueue int
	// TickInterval is how late a keep-alive or a timeout may be acted on:
	// the Listener files every client under its next deadline in buckets
	// TickInterval wide, and wakes at the end of the first bucket that
	// holds one. So a keep-alive goes 100 ms to 100 ms + TickInterval
	// after the last packet sent to the client, a client times out within
	// TickInterval after its timeout, and the Listener wakes at most once
	// per TickInterval while clients are connected (once a second when
	// none is), doing work for the clients that are due, not for every
	// slot. 0 means 10 ms; a negative value means the same.
	TickInterval time.Duration
	// Socket sets up the server's UDP sockets: their buffers, packet
	// tagging, read shards and a Control hook.
	Socket SocketConfig
}

// SocketConfig is how a Listener or a dialed Conn sets up its UDP socket.
// ServerConfig.Socket and Dialer.Socket hold one; its zero value is the
// default everywhere.
//
// The settings apply to the sockets the package opens (Listen, and Dial
// without Dialer.ListenPacket). On a transport the caller brings
// (NewListener, or Dialer.ListenPacket), Buffer and PacketTagging apply if it
// is a *net.UDPConn (Buffer, if set, is refused on anything else), Control
// cannot apply and is refused, and ReadShards is ignored: that is one
// transport.
type SocketConfig struct {
	// Buffer is the receive and send buffer size in bytes each socket asks
	// for (best effort; the system may cap it); 0 means 4 MiB. Processes
	// that dial many Conns, such as a bridge's relay, save kernel memory
	// with a smaller one.
	Buffer int
	// PacketTagging marks every packet sent with DSCP 46 (expedited
	// forwarding) in the IPv4 TOS or IPv6 traffic class byte, as the
	// reference's packet tagging does, so that networks that honour it
	// queue game traffic ahead of bulk traffic. Off by default, as in the
	// reference. Where the operating system refuses it, the socket still
	// works and says so at Warn level in the log.
	PacketTagging bool
	// ReadShards is how many sockets Listen opens on the address, each read
	// by its own goroutine, so that that many cores decrypt at once; 0 or
	// 1 means one. With more than one (Linux only; elsewhere Listen opens
	// one), the sockets share the port with SO_REUSEPORT and the kernel
	// spreads clients over them by address, each client always to the
	// same socket. SO_REUSEPORT lets another process of the same user
	// bind the port too. Set it to the cores the server may use
	// (runtime.NumCPU()). A dialed Conn has one socket.
	ReadShards int
	// Control, if not nil, is called with each socket after it is created
	// and before it is bound, as net.ListenConfig.Control is: to set socket
	// options this package does not. An error from it fails Listen or Dial.
	Control func(network, address string, c syscall.RawConn) error
}

// options is how the transport sets sockets up by s (one mechanism for
// both dialects: transport.Options), with log for a refused tagging.
func (s *SocketConfig) options(log *slog.Logger) *transport.Options {
	return &transport.Options{Buffer: s.Buffer, PacketTagging: s.PacketTagging, Control: s.Control, Log: log, Dialect: "netcode"}
}

// discardIfNil returns log, or a silent logger for nil.
func discardIfNil(log *slog.Logger) *slog.Logger {
	if log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return log
}
