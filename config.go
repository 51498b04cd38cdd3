package netcode

import (
	"log/slog"
	"time"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/protocol"
	"github.com/gonetcode/netcode/token"
)

// Sizes fixed by the protocol (each defined once, in the package that
// implements its part of the protocol).
const (
	// MaxPayloadBytes is the largest payload one Write may send: 1200.
	MaxPayloadBytes = protocol.MaxPayloadBytes
	// KeyBytes is the size of the private key shared by servers and the
	// token backend: 32.
	KeyBytes = crypto.KeyBytes
	// UserDataBytes is the size of the user data carried in connect
	// tokens: 256.
	UserDataBytes = token.UserDataBytes
	// ConnectTokenBytes is the size of a connect token: 2048.
	ConnectTokenBytes = token.ConnectTokenBytes
)

// ServerConfig configures a Listener.
type ServerConfig struct {
	// ProtocolID must match the protocol id of the connect tokens.
	ProtocolID uint64
	// PrivateKey is shared with the token backend; never ship it to clients.
	// It must not be all zeros: Listen and NewListener refuse that with
	// ErrZeroKey.
	PrivateKey [KeyBytes]byte
	// PreviousPrivateKey, if not all zeros, opens connect tokens too. Set
	// it to the retiring key during a key rotation, for as long as tokens
	// sealed with it may still be presented (their lifetime), then clear
	// it. See the README's token backend section.
	PreviousPrivateKey [KeyBytes]byte
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
	// Logger receives debug logs; nil is silent.
	Logger *slog.Logger

	// AcceptBacklog is how many connected clients may wait for Accept; a
	// client connecting while it is full is disconnected. 0 means MaxClients.
	AcceptBacklog int
	// ReadQueue is how many received payloads each connection holds for
	// Read; 0 means DefaultReadQueue.
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
	// ReadShards is how many sockets Listen opens on the address, each read
	// by its own goroutine, so that that many cores decrypt at once; 0 or
	// 1 means one. With more than one (Linux only; elsewhere Listen opens
	// one), the sockets share the port with SO_REUSEPORT and the kernel
	// spreads clients over them by address, each client always to the
	// same socket. SO_REUSEPORT lets another process of the same user
	// bind the port too. NewListener always reads the one socket it is
	// given. Set it to the cores the server may use (runtime.NumCPU()).
	ReadShards int
	// PacketTagging marks every packet the server sends with DSCP 46
	// (expedited forwarding) in the IPv4 TOS or IPv6 traffic class byte,
	// as the reference's packet tagging does, so that networks that honour
	// it queue game traffic ahead of bulk traffic. Off by default, as in
	// the reference. Where the operating system refuses it, the Listener
	// still works and says so at Warn level in the log.
	PacketTagging bool
}
