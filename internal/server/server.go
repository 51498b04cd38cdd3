// Package server is the I/O-free netcode 1.02 server: client slots, encryption
// mappings, the connect-token history, the handshake, keep-alives and
// timeouts. It owns no goroutine, socket or clock: the adapter feeds it
// datagrams and the current time.
//
// It never calls the adapter, the socket or the logger. What happens is
// returned: every call that seals packets or has something to log appends
// them to an Output the caller passes in (the datagrams to send, the log
// records), for the caller to act on once the call returned; Receive
// returns the client a datagram connected, if any; every client's
// received payloads wait in its own bounded Queue, which ends, with the
// error the adapter configured for the reason, when the client leaves.
//
// Time: every interval (keep-alives, timeouts, the deadline wheel, the
// sweeps, the reminders to kicked clients) is measured on the monotonic
// clock, as now.Sub(start) of the times passed in, which time.Now() gives
// with Go's monotonic reading: a step of the wall clock moves none of
// them. The wall clock is read only where the protocol means it: token
// expiry (Unix timestamps in the tokens) and the sequence seeds.
//
// Concurrency: every method may be called from any goroutine, and Receive
// from many at once (each with its own Receiver). No lock is held across
// a call into other code, and no AEAD operation is made under the lock
// shared by all clients. The locks, in the order they may be taken:
//
//	Server.tick   serialises Update (its scratch lists, the sweep times).
//	Server.mainMu serialises Server.Receive (its own Receiver).
//	Server.mu     (RWMutex) guards the tables: slots, addresses, ids, the
//	              token history, the handshakes in progress, the
//	              kicked-client list, the sequences handed out before a
//	              connection exists. Lookups take it for reading.
//	deadlineWheel.mu  guards the deadline wheel (wheel.go); a leaf, taken
//	              under mu when a client connects, alone by Update.
//	Client.rmu    guards a client's receive side: its receive AEAD and
//	              replay window. Packets of different clients decrypt in
//	              parallel.
//	Client.sendLocked.mu  guards its send side: send AEAD and sequence.
//	              It is held only to seal packets into an Output; the
//	              datagrams leave after it is released.
//
// Lock order: (tick | mainMu) → mu → (rmu | sendLocked.mu |
// deadlineWheel.mu). tick and mainMu are never held together; rmu,
// sendLocked.mu and the wheel's lock are never held together, and none is
// held while taking mu. Nothing taken under mu waits on I/O: a client's
// send lock is held for one sealing at most. The adapter's locks come
// before all of these (the Listener's Conn write turns) or after none
// (its send queue's, the socket's): the core calls no adapter code.
package server

import (
	"errors"
	"log/slog"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetcode/netcode/crypto"
)

// Protocol timing, as in the reference implementation.
const (
	// KeepAliveInterval is how long a connection may go without a packet
	// sent before a keep-alive is sent (10 Hz).
	KeepAliveInterval = 100 * time.Millisecond
	// DisconnectPackets is how many redundant disconnect packets are sent
	// when the server ends a connection.
	DisconnectPackets = 10
	// DefaultMaxClients is the slot count when Config.MaxClients is 0.
	DefaultMaxClients = 256
	// MaxMaxClients is the largest supported slot count.
	MaxMaxClients = 1 << 16
	// DefaultReadQueue is each client's payload queue when
	// Config.ReadQueue is 0.
	DefaultReadQueue = 256
)

// Errors returned by New, Client.Send and ConnectLoopback.
var (
	ErrClientGone    = errors.New("netcode/server: client is no longer connected")
	ErrPayloadSize   = errors.New("netcode/server: payload must be 1 to 1200 bytes")
	ErrInvalidConfig = errors.New("netcode/server: invalid configuration")
	// ErrZeroKey: the private key is all zeros, so anyone could mint
	// tokens for the server.
	ErrZeroKey = errors.New("netcode/server: private key is all zeros")
	// ErrFull: no free slot for a loopback client.
	ErrFull = errors.New("netcode/server: no free client slot")
	// ErrClientIDInUse: a client with that id is connected.
	ErrClientIDInUse = errors.New("netcode/server: client id already connected")
)

// Reason tells why a client left.
type Reason int

// Reasons a client left.
const (
	// ReasonPeerDisconnected: the client sent a disconnect packet (or a
	// loopback client's end was closed).
	ReasonPeerDisconnected Reason = iota + 1
	// ReasonTimedOut: nothing arrived from the client within its timeout.
	ReasonTimedOut
	// ReasonLocal: the server side ended the connection (Disconnect or Close).
	ReasonLocal
	numReasons
)

// String describes the reason in words.
func (r Reason) String() string {
	switch r {
	case ReasonPeerDisconnected:
		return "peer disconnected"
	case ReasonTimedOut:
		return "timed out"
	case ReasonLocal:
		return "closed locally"
	}
	return "unknown"
}

// Error is the error a client's queue ends with when the adapter set none
// for the reason (Config.EndErrors).
type Error struct{ Reason Reason }

func (e *Error) Error() string { return "netcode/server: client " + e.Reason.String() }

// Config configures a Server.
type Config struct {
	ProtocolID uint64
	// PrivateKey opens the private part of connect tokens; it must not be
	// all zeros.
	PrivateKey crypto.Key
	// PreviousPrivateKey, if not all zeros, also opens connect tokens:
	// during a key rotation the server accepts tokens sealed with either.
	PreviousPrivateKey crypto.Key
	// MaxClients is the number of slots; 0 means DefaultMaxClients.
	MaxClients int
	// ReadQueue is how many received payloads each client's Queue holds;
	// 0 means DefaultReadQueue.
	ReadQueue int
	// History is how many connect tokens the token history remembers
	// (HistorySize gives it from a connection rate and a token lifetime);
	// 0 means HistorySize(MaxClients, 0, 0).
	History int
	// EndErrors are the errors a client's Queue ends with, by Reason
	// (nil: an *Error). The adapter maps them to its own API's errors.
	EndErrors [numReasons]error
	// Addrs are the addresses this server is known by. A connection request
	// is answered only if its token's server list (the internal addresses)
	// contains one of them. Empty disables the check (tests only).
	Addrs []netip.AddrPort
	// ChallengeKey seals challenge tokens; the zero key means a random one
	// chosen at start, as it should be outside tests.
	ChallengeKey crypto.Key
	// Now is the server's start time: it seeds the global and challenge
	// sequences (by its wall reading) so that a restarted server never
	// reuses a nonce, and it is the origin of the monotonic clock every
	// interval is measured on (see the package doc). The zero Time means
	// time.Now().
	Now time.Time
	// Wall, if set, is read for the wall clock (token expiry, connection
	// sequences) instead of the wall reading of the times passed to the
	// methods: a test steps it while the times passed in run steadily.
	// Nil outside tests.
	Wall func() time.Time
	// ReferenceSequences starts every sequence where the C reference
	// does: the global sequence at 2^63, challenge tokens and every
	// connection at 0. It reproduces the reference's packets byte for byte,
	// for tests only: a server restarted with it reuses nonces.
	ReferenceSequences bool
	// TickInterval is the width of the deadline wheel's buckets; <= 0 means
	// DefaultTickInterval. Update acts on every deadline that passed, at
	// whatever times it is called; the next time it returns is the end of
	// the first bucket holding a deadline, so a caller that sleeps until
	// then acts on each at most TickInterval late.
	TickInterval time.Duration
	// Logger receives the records of refused requests and state changes,
	// written by Server.Log when the adapter calls it; nil is silent.
	Logger *slog.Logger
}

// Stats are counters of what the server did, for monitoring and tests.
type Stats struct {
	Connected          int    // clients now connected
	Mappings           int    // encryption mappings now held
	MappingsLimit      int    // most encryption mappings held at once
	History            int    // connect tokens now remembered
	HistoryLimit       int    // most connect tokens remembered at once
	Ignored            uint64 // datagrams dropped as malformed, unauthenticated or out of place
	Replayed           uint64 // datagrams dropped by replay protection
	ChallengesSent     uint64
	DeniedSent         uint64
	TokenReuseRefused  uint64 // requests with a token used from another address or already connected with
	AddressNotInToken  uint64
	HistoryFull        uint64 // requests with a new token refused because the history was full
	MappingsFull       uint64 // requests that found the mapping table full and dropped the oldest handshake in progress
	ConnectionsOpened  uint64
	ConnectionsTimeout uint64
	PayloadsDropped    uint64 // received payloads dropped by full client queues
}

// counters are Stats' counts, updated without the server's lock.
type counters struct {
	ignored, replayed, challengesSent, deniedSent, tokenReuseRefused,
	addressNotInToken, historyFull, mappingsFull, connectionsOpened,
	connectionsTimeout, payloadsDropped atomic.Uint64
}

// GlobalSequenceStart is where the reference server starts the sequence
// numbers of packets sent outside a client slot (challenges and denials), so
// that they never collide with the per-client sequences that start at 0.
const GlobalSequenceStart uint64 = 1 << 63

// Server is the netcode server state machine.
type Server struct {
	cfg        Config
	maxClients int
	log        *slog.Logger
	challenge  crypto.Key
	tokenKeys  [2]*crypto.Key // the private key and the previous one (nil: none)

	start      time.Time  // the origin of the monotonic clock (Config.Now)
	tick       sync.Mutex // serialises Update; first in the lock order (see the package doc), beside mainMu
	taken      []*Client  // Update's scratch, guarded by tick
	due        []*Client  // Update's scratch, guarded by tick
	expired    []*Client  // Update's scratch, guarded by tick
	lastSweep  int64      // monotonic ns; guarded by tick
	lastExpire uint64     // the second (wall) of the last history expiry; guarded by tick

	wheel *deadlineWheel // connected clients by next deadline

	mu           sync.RWMutex // after tick or mainMu; before the wheel's and the clients' locks
	globalSeq    uint64
	challengeSeq uint64
	slots        []*Client // nil = free
	free         []int     // free slot indexes (stack)
	byAddr       map[netip.AddrPort]*Client
	// handshakes are the mappings of byAddr whose handshake is in
	// progress (not live), oldest first (handshake.go).
	handshakes handshakes
	byID       map[uint64]*Client
	history    *tokenHistory
	maxMaps    int
	closed     bool
	gone       goneClients // recently kicked clients, reminded (gone.go)

	draining atomic.Bool // deny every new connection (Drain)
	stats    counters

	main   *Receiver  // for Server.Receive
	mainMu sync.Mutex // guards main; first in the lock order, beside tick
}

// New returns a server.
func New(cfg Config) (*Server, error) {
	if cfg.MaxClients == 0 {
		cfg.MaxClients = DefaultMaxClients
	}
	if cfg.MaxClients < 1 || cfg.MaxClients > MaxMaxClients {
		return nil, ErrInvalidConfig
	}
	if cfg.PrivateKey == (crypto.Key{}) {
		return nil, ErrZeroKey
	}
	if cfg.ReadQueue <= 0 {
		cfg.ReadQueue = DefaultReadQueue
	}
	if cfg.History <= 0 {
		cfg.History = HistorySize(cfg.MaxClients, 0, 0)
	}
	for r := ReasonPeerDisconnected; r < numReasons; r++ {
		if cfg.EndErrors[r] == nil {
			cfg.EndErrors[r] = &Error{r}
		}
	}
	if cfg.ChallengeKey == (crypto.Key{}) {
		k, err := crypto.GenerateKey()
		if err != nil {
			return nil, err
		}
		cfg.ChallengeKey = k
	}
	if cfg.Now.IsZero() {
		cfg.Now = time.Now()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		cfg:        cfg,
		maxClients: cfg.MaxClients,
		log:        log,
		challenge:  cfg.ChallengeKey,
		slots:      make([]*Client, cfg.MaxClients),
		free:       make([]int, 0, cfg.MaxClients),
		byAddr:     make(map[netip.AddrPort]*Client),
		byID:       make(map[uint64]*Client),
		history:    newTokenHistory(cfg.History, unixSeconds(cfg.Now)),
		maxMaps:    cfg.MaxClients * MappingsPerSlot,
		start:      cfg.Now,
		lastExpire: unixSeconds(cfg.Now),
		wheel:      newDeadlineWheel(cfg.TickInterval),
	}
	s.tokenKeys[0] = &s.cfg.PrivateKey
	if cfg.PreviousPrivateKey != (crypto.Key{}) {
		s.tokenKeys[1] = &s.cfg.PreviousPrivateKey
	}
	for i := cfg.MaxClients - 1; i >= 0; i-- {
		s.free = append(s.free, i)
	}
	// The reference starts the global sequence at 2^63 and challenge tokens
	// at 0; adding the start time in nanoseconds keeps every restart above
	// all sequence numbers an earlier run can have used (see clockSequence).
	s.globalSeq = GlobalSequenceStart + clockSequence(cfg.Now)
	s.challengeSeq = clockSequence(cfg.Now)
	if cfg.ReferenceSequences {
		s.globalSeq = GlobalSequenceStart
		s.challengeSeq = 0
	}
	s.main = s.NewReceiver()
	return s, nil
}

// MaxClients is the slot count.
func (s *Server) MaxClients() int { return s.maxClients }

// Drain makes the server deny every new connection request, as if it were
// full; connected clients are not affected. It cannot be undone.
func (s *Server) Drain() { s.draining.Store(true) }

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	s.mu.RLock()
	st := Stats{
		Connected:     len(s.byID),
		Mappings:      len(s.byAddr),
		MappingsLimit: s.maxMaps,
		History:       s.history.Len(),
		HistoryLimit:  s.history.Limit(),
	}
	s.mu.RUnlock()
	c := &s.stats
	st.Ignored = c.ignored.Load()
	st.Replayed = c.replayed.Load()
	st.ChallengesSent = c.challengesSent.Load()
	st.DeniedSent = c.deniedSent.Load()
	st.TokenReuseRefused = c.tokenReuseRefused.Load()
	st.AddressNotInToken = c.addressNotInToken.Load()
	st.HistoryFull = c.historyFull.Load()
	st.MappingsFull = c.mappingsFull.Load()
	st.ConnectionsOpened = c.connectionsOpened.Load()
	st.ConnectionsTimeout = c.connectionsTimeout.Load()
	st.PayloadsDropped = c.payloadsDropped.Load()
	return st
}

// ClientByIndex returns the client in slot i, or nil.
func (s *Server) ClientByIndex(i int) *Client {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if i < 0 || i >= len(s.slots) {
		return nil
	}
	return s.slots[i]
}

// mono is now on the server's monotonic clock: nanoseconds since its
// start, measured with the monotonic readings when both times have one.
func (s *Server) mono(now time.Time) int64 { return int64(now.Sub(s.start)) }

// at is the time of monotonic instant ns, for the adapter's timer.
func (s *Server) at(ns int64) time.Time { return s.start.Add(time.Duration(ns)) }

// wall is the wall clock at now: now's own reading, or Config.Wall's.
func (s *Server) wall(now time.Time) time.Time {
	if s.cfg.Wall != nil {
		return s.cfg.Wall()
	}
	return now
}

func unixSeconds(t time.Time) uint64 {
	u := t.Unix()
	if u < 0 {
		return 0
	}
	return uint64(u)
}
