package core

import (
	"errors"
	"net/netip"
	"time"

	"github.com/gonetcode/netcode/cute/internal/hydro"
	"github.com/gonetcode/netcode/cute/internal/wire"
)

// ServerConfig configures a Server.
type ServerConfig struct {
	// ApplicationID must match the tokens'.
	ApplicationID uint64
	// PublicKey verifies token signatures; SecretKey (its pair, whose
	// last 32 bytes must be PublicKey) opens their secret sections. An
	// all-zero secret scalar is refused.
	PublicKey [hydro.PublicKeyBytes]byte
	SecretKey [hydro.SecretKeyBytes]byte
	// Addrs are the addresses the server is known by (its public address
	// and the addresses it is bound to): a token that lists none of them
	// is refused.
	Addrs []netip.AddrPort
	// MaxClients is the slot count: 0 means DefaultMaxClients, at most
	// MaxMaxClients. CONNECTION_ACCEPTED tells clients this number.
	MaxClients int
	// MaxPending bounds the handshakes in progress: 0 means
	// DefaultMaxPending. A token from a new address when the table is
	// full is refused (and counted), never an older handshake evicted.
	MaxPending int
	// ConnectionTimeout ends a connection that sent nothing for this long;
	// whole seconds (it travels as seconds in CONNECTION_ACCEPTED), 0
	// means DefaultConnectionTimeout.
	ConnectionTimeout time.Duration
	// History remembers consumed tokens. Required: NewServer refuses a
	// nil one rather than run without. NewHistory returns the production
	// one, the module's O(1) expiry-wheel history (internal/history).
	History TokenHistory
}

// ErrServerConfig reports an unusable ServerConfig.
var ErrServerConfig = errors.New("cute/core: invalid server configuration")

// EventKind says what an Event reports.
type EventKind int

// The server events.
const (
	// EventConnected: a client completed the handshake (NEW_CONNECTION).
	EventConnected EventKind = iota + 1
	// EventPayload: a payload from a connected client (PAYLOAD_PACKET).
	EventPayload
	// EventDisconnected: a client left or was removed (DISCONNECTED).
	EventDisconnected
)

// Why a client was disconnected.
const (
	ReasonClient  = "client disconnected"
	ReasonTimeout = "connection timed out"
	ReasonServer  = "disconnected by the server"
)

// Event is something that happened to a client slot.
type Event struct {
	Kind     EventKind
	Index    int    // the client slot
	Gen      uint64 // the connection's generation in its slot: see SendConn
	ClientID uint64
	Addr     netip.AddrPort
	// UserData is the token's user data (EventConnected), read from its
	// place in the secret section.
	UserData [wire.UserDataBytes]byte
	// Payload is a slice of the datagram passed to Receive, decrypted in
	// place (EventPayload); Sequence is its packet sequence.
	Payload  []byte
	Sequence uint64
	// Reason says why (EventDisconnected).
	Reason string
}

// ServerOutput is what one call to a Server did; reused like ClientOutput.
type ServerOutput struct {
	datagrams
	// Events are what happened, in order.
	Events []Event
	// Next is when Update is due. After Update it is the next due time
	// (zero: nothing pending). After another call it is set only if the
	// call made an Update due sooner (a challenge owed, a new
	// connection's keepalives); zero means no change.
	Next time.Time
}

func (o *ServerOutput) reset() {
	o.datagrams.reset()
	clear(o.Events)
	o.Events = o.Events[:0]
	o.Next = time.Time{}
}

// ServerStats counts what the server refused.
type ServerStats struct {
	PendingFull    uint64 // tokens refused because the handshake table was full
	HistoryFull    uint64 // connections refused because the token history was full
	TokenReplayed  uint64 // tokens refused because they were consumed
	Denied         uint64 // CONNECTION_DENIED sent (server full or draining)
	PendingExpired uint64 // handshakes dropped by handshake timeout or token expiry
	// TokenInUse counts tokens refused because the same token is
	// handshaking from another address: one handshake per token.
	TokenInUse uint64
	// TokenUnanswered counts tokens refused because a handshake with them
	// went unanswered for HalfOpenTimeout (until the token expires).
	TokenUnanswered uint64
	// ConnectionsOpened counts handshakes completed: connections made.
	ConnectionsOpened uint64
	// ConnectionsTimedOut counts connections ended because the client
	// fell silent for ConnectionTimeout.
	ConnectionsTimedOut uint64
}
