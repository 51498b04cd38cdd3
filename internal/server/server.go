// Package server is the I/O-free netcode 1.02 server: client slots, encryption
// mappings, the connect-token history, the handshake, keep-alives and
// timeouts. It owns no goroutine, socket or clock: the adapter feeds it
// datagrams and the current time, and it answers through a Sink.
//
// It never calls the adapter. What happens is returned: Receive returns the
// client a datagram connected, if any; every client's received payloads
// wait in its own bounded Queue, which ends, with the error the adapter
// configured for the reason, when the client leaves.
//
// Concurrency: every method may be called from any goroutine, and Receive
// from many at once (each with its own Receiver). No system call (Sink.Send)
// and no AEAD operation is made under the lock shared by all clients:
//
//	Server.tick   serialises Update (its scratch lists, the sweep times).
//	Server.mu     (RWMutex) guards the tables: slots, addresses, ids, the
//	              token history, the kicked-client list, the sequences
//	              handed out before a connection exists. Lookups take it
//	              for reading.
//	deadlineWheel.mu  guards the deadline wheel (wheel.go); a leaf, taken
//	              under mu when a client connects, alone by Update.
//	Client.rmu    guards a client's receive side: its receive AEAD and
//	              replay window. Packets of different clients decrypt in
//	              parallel.
//	Client.send   (sendState.mu) guards its send side: send AEAD, sequence,
//	              buffers. Sink.Send is called with it held: one client's
//	              packets leave in sequence order.
//
// Lock order: tick → mu → (rmu | send.mu | deadlineWheel.mu). rmu, send.mu
// and the wheel's lock are never held together, and none is held while
// taking mu.
package server

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/packetq"
	"github.com/gonetcode/netcode/protocol"
	"github.com/gonetcode/netcode/token"
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

// Sink sends datagrams. Send must have finished with b (sent or copied it)
// when it returns. It is called from any goroutine, with one client's send
// lock held.
type Sink interface {
	Send(to netip.AddrPort, b []byte)
}

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
	// Now is the server's start time; it seeds the global and challenge
	// sequences so that a restarted server never reuses a nonce.
	Now time.Time
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
	// Logger receives debug logs of ignored packets and state changes; nil
	// is silent.
	Logger *slog.Logger
}

// Client is the server's state for one client address: made by a valid
// connection request (an encryption mapping), it holds a slot once the
// handshake completes. Its methods are safe for concurrent use.
type Client struct {
	// Read by every path and written only when the client connects or
	// leaves: what Update reads of every client it takes comes first.
	live    atomic.Bool   // in its slot (written under srv.mu)
	timeout time.Duration // <= 0: never times out; set with c2s below
	srv     *Server
	index   int // set when the handshake completes, as id below
	addr    netip.AddrPort

	sendLocked sendState // written by every send

	// The receive side, written by every packet received: a cache line
	// away from the send side's fields, so that the reader and the
	// senders of one client do not take a line from each other.
	_         [64]byte
	lastRecv  atomic.Int64 // Unix ns of the last packet received
	confirmed atomic.Bool  // a keep-alive or payload arrived
	rmu       sync.Mutex   // guards recv and replay
	recv      *crypto.PacketAEAD
	replay    *protocol.ReplayProtection

	// Set under srv.mu by the request that made or renewed the mapping.
	c2s, s2c crypto.Key
	expire   uint64 // token expire timestamp (Unix seconds)
	tokenMAC [crypto.MACBytes]byte

	// Set under srv.mu when the handshake completes; read-only after.
	id       uint64
	userData [token.UserDataBytes]byte
	loopback bool // a loopback client: no address, keys or packets
	queue    *packetq.Queue
	peer     *packetq.Queue // a loopback client's own end

	reason atomic.Int32 // why it left, once it has
}

// sendState is a client's send side, all of it read for every keep-alive
// but the buffers, which live apart (as the replay window does) so that a
// Client stays small: with many clients, the parts Update touches share
// fewer pages and cache sets.
type sendState struct {
	mu       sync.Mutex
	closed   bool
	seq      uint64
	lastSend atomic.Int64 // Unix ns; read without mu by Update
	send     crypto.PacketAEAD
	bufs     *sendBufs // nil for a loopback client
}

// sendBufs are the buffers a client's packets are sealed in.
type sendBufs struct {
	buf, buf2 [protocol.MaxPacketBytes]byte
}

// Index is the client's slot, 0..MaxClients-1.
func (c *Client) Index() int { return c.index }

// ID is the client id from the connect token.
func (c *Client) ID() uint64 { return c.id }

// Addr is the client's address.
func (c *Client) Addr() netip.AddrPort { return c.addr }

// UserData is the user data from the connect token.
func (c *Client) UserData() [token.UserDataBytes]byte { return c.userData }

// MaxClients is the server's slot count.
func (c *Client) MaxClients() int { return c.srv.maxClients }

// Loopback reports whether c is a loopback client (see
// Server.ConnectLoopback): it exchanges no packets.
func (c *Client) Loopback() bool { return c.loopback }

// Queue holds the payloads received from c, for the adapter to read. It
// ends when c leaves, with Config.EndErrors[Reason()]. For a loopback
// client it holds what the client's end (LoopbackQueue's reader) wrote.
func (c *Client) Queue() *packetq.Queue { return c.queue }

// LoopbackQueue is a loopback client's own end: what the server side
// writes to it. It ends, with Config.EndErrors[ReasonPeerDisconnected],
// when the server side ends the connection. Nil for other clients.
func (c *Client) LoopbackQueue() *packetq.Queue { return c.peer }

// Reason is why c left, or 0 while it is connected.
func (c *Client) Reason() Reason { return Reason(c.reason.Load()) }

// Send seals payload into one packet (preceded by a keep-alive while the
// client has not yet confirmed the connection) and hands it to sink. now is
// the current time, for keep-alive scheduling. A loopback client's
// payloads are pushed to its LoopbackQueue instead.
func (c *Client) Send(now time.Time, payload []byte, sink Sink) error {
	if len(payload) < 1 || len(payload) > protocol.MaxPayloadBytes {
		return ErrPayloadSize
	}
	if c.loopback {
		if !c.live.Load() {
			return ErrClientGone
		}
		c.peer.Push(netip.AddrPort{}, payload)
		return nil
	}
	s := &c.sendLocked
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClientGone
	}
	if !c.confirmed.Load() {
		pkt := protocol.AppendKeepAlive(s.bufs.buf2[:0], &s.send, s.seq, uint32(c.index), uint32(c.srv.maxClients))
		s.seq++
		sink.Send(c.addr, pkt)
	}
	pkt := protocol.AppendPayload(s.bufs.buf[:0], &s.send, s.seq, payload)
	s.seq++
	s.lastSend.Store(now.UnixNano())
	sink.Send(c.addr, pkt)
	return nil
}

// confirm records that the client confirmed the connection, writing only
// the first time: every Send reads the flag.
func (c *Client) confirm() {
	if !c.confirmed.Load() {
		c.confirmed.Store(true)
	}
}

// LoopbackSend passes payload from a loopback client's end to the server
// side's Queue.
func (c *Client) LoopbackSend(payload []byte) error {
	if len(payload) < 1 || len(payload) > protocol.MaxPayloadBytes {
		return ErrPayloadSize
	}
	if !c.loopback || !c.live.Load() {
		return ErrClientGone
	}
	c.queue.Push(netip.AddrPort{}, payload)
	return nil
}

// keepAlive sends a keep-alive if nothing was sent for KeepAliveInterval,
// sealed in buf (nil: the client's own buffer).
func (c *Client) keepAlive(now time.Time, sink Sink, force bool, buf *[protocol.MaxPacketBytes]byte) {
	s := &c.sendLocked
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || (!force && now.UnixNano()-s.lastSend.Load() < int64(KeepAliveInterval)) {
		return
	}
	if buf == nil {
		buf = &s.bufs.buf
	}
	pkt := protocol.AppendKeepAlive(buf[:0], &s.send, s.seq, uint32(c.index), uint32(c.srv.maxClients))
	s.seq++
	s.lastSend.Store(now.UnixNano())
	sink.Send(c.addr, pkt)
}

// shut stops sends; with packets, it first sends the redundant disconnects.
func (c *Client) shut(sink Sink, packets bool) {
	s := &c.sendLocked
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	if packets && !c.loopback {
		for range DisconnectPackets {
			pkt := protocol.AppendDisconnect(s.bufs.buf[:0], &s.send, s.seq)
			s.seq++
			sink.Send(c.addr, pkt)
		}
	}
	s.closed = true
}

// sealChallenge seals and sends a challenge to c's address under c's send
// lock. The sequence was handed out under the server's lock.
func (c *Client) sealChallenge(seq, challengeSeq uint64, sealedToken []byte, sink Sink) {
	s := &c.sendLocked
	s.mu.Lock()
	defer s.mu.Unlock()
	pkt := protocol.AppendChallenge(s.bufs.buf[:0], &s.send, seq, challengeSeq, sealedToken)
	sink.Send(c.addr, pkt)
}

// sealDenied seals and sends a denial to c's address under c's send lock.
func (c *Client) sealDenied(seq uint64, sink Sink) {
	s := &c.sendLocked
	s.mu.Lock()
	defer s.mu.Unlock()
	sink.Send(c.addr, protocol.AppendDenied(s.bufs.buf[:0], &s.send, seq))
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
	MappingsFull       uint64 // requests refused because the mapping table was full
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

// Server is the netcode server state machine.
type Server struct {
	cfg        Config
	maxClients int
	log        *slog.Logger
	challenge  crypto.Key
	tokenKeys  [2]*crypto.Key // the private key and the previous one (nil: none)

	tick       sync.Mutex                    // serialises Update
	taken      []*Client                     // Update's scratch, guarded by tick
	due        []*Client                     // Update's scratch, guarded by tick
	expired    []*Client                     // Update's scratch, guarded by tick
	lastSweep  time.Time                     // guarded by tick
	lastExpire uint64                        // the second of the last history expiry; guarded by tick
	kaBuf      [protocol.MaxPacketBytes]byte // keep-alives are sealed here; guarded by tick

	wheel *deadlineWheel // connected clients by next deadline

	mu           sync.RWMutex
	globalSeq    uint64
	challengeSeq uint64
	slots        []*Client // nil = free
	free         []int     // free slot indexes (stack)
	byAddr       map[netip.AddrPort]*Client
	byID         map[uint64]*Client
	history      *tokenHistory
	maxMaps      int
	closed       bool
	gone         goneClients // recently kicked clients, reminded (gone.go)

	draining atomic.Bool // deny every new connection (Drain)
	stats    counters

	main   *Receiver  // for Server.Receive
	mainMu sync.Mutex // guards main
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
		history:    newTokenHistory(historySize(cfg.MaxClients), unixSeconds(cfg.Now)),
		maxMaps:    cfg.MaxClients * MappingsPerSlot,
		lastSweep:  cfg.Now,
		lastExpire: unixSeconds(cfg.Now),
		wheel:      newDeadlineWheel(cfg.TickInterval, cfg.Now),
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
	s.globalSeq = protocol.ServerGlobalSequenceStart + clockSequence(cfg.Now)
	s.challengeSeq = clockSequence(cfg.Now)
	if cfg.ReferenceSequences {
		s.globalSeq = protocol.ServerGlobalSequenceStart
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
		History:       s.history.len(),
		HistoryLimit:  s.history.limit,
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

// Receiver is one reading goroutine's state: its packet reader (the AEADs
// it uses are not safe for concurrent use) and scratch space. Each
// goroutine that calls Receive concurrently needs its own.
type Receiver struct {
	s         *Server
	reader    protocol.Reader
	challenge *crypto.AEAD
	priv      token.Private
	chTok     [token.ChallengeTokenBytes]byte
	scratch   [protocol.MaxPacketBytes]byte
}

// NewReceiver returns a Receiver for s.
func (s *Server) NewReceiver() *Receiver {
	r := &Receiver{s: s, challenge: crypto.NewAEAD(&s.challenge)}
	r.reader = protocol.Reader{ProtocolID: s.cfg.ProtocolID, Allowed: protocol.ServerAccepts, TokenAEAD: crypto.NewPrivateTokenAEAD(s.tokenKeys[0])}
	if s.tokenKeys[1] != nil {
		r.reader.PreviousTokenAEAD = crypto.NewPrivateTokenAEAD(s.tokenKeys[1])
	}
	return r
}

// Receive processes one datagram from addr with the server's own Receiver
// (serialised); see Receiver.Receive.
func (s *Server) Receive(now time.Time, from netip.AddrPort, data []byte, sink Sink) *Client {
	s.mainMu.Lock()
	defer s.mainMu.Unlock()
	return s.main.Receive(now, from, data, sink)
}

// Receive processes one datagram from addr. data is decrypted in place. It
// returns the client this datagram connected, if it completed a handshake:
// the adapter makes its connection for it. Payloads go to their client's
// Queue.
func (r *Receiver) Receive(now time.Time, from netip.AddrPort, data []byte, sink Sink) *Client {
	s := r.s
	if len(data) == 0 {
		s.stats.ignored.Add(1)
		return nil
	}
	if data[0] == byte(protocol.ConnectionRequest) {
		r.request(now, from, data, sink)
		return nil
	}
	s.mu.RLock()
	c := s.byAddr[from]
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return nil
	}
	if c == nil {
		if !r.answerGone(now, from, data, sink) {
			s.stats.ignored.Add(1)
		}
		return nil
	}
	if !c.live.Load() {
		return r.response(now, c, data, sink)
	}
	// A connected client: its packets decrypt under its own lock.
	var p protocol.Packet
	c.rmu.Lock()
	if t := protocol.PacketType(data[0] & 0x0f); t != protocol.KeepAlive && t != protocol.Payload && t != protocol.Disconnect {
		c.rmu.Unlock()
		s.stats.ignored.Add(1) // a handshake packet after the handshake
		return nil
	}
	err := r.reader.Read(data, unixSeconds(now), c.recv, c.replay, &p)
	c.rmu.Unlock()
	if err != nil {
		if err == protocol.ErrReplayed {
			s.stats.replayed.Add(1)
		} else {
			s.stats.ignored.Add(1)
		}
		return nil
	}
	c.lastRecv.Store(now.UnixNano())
	switch p.Type {
	case protocol.KeepAlive:
		c.confirm()
	case protocol.Payload:
		c.confirm()
		c.queue.Push(netip.AddrPort{}, p.Payload)
	case protocol.Disconnect:
		s.end(c, ReasonPeerDisconnected, nil)
	}
	return nil
}

// request processes a connection request. The private token is opened
// before any lock is taken; the tables are consulted and changed under the
// server's lock; the challenge is sealed and sent after it, under the
// client's send lock.
func (r *Receiver) request(now time.Time, from netip.AddrPort, data []byte, sink Sink) {
	s := r.s
	var p protocol.Packet
	if err := r.reader.Read(data, unixSeconds(now), nil, nil, &p); err != nil {
		s.stats.ignored.Add(1)
		return
	}
	// The token's MAC, the last 16 bytes of the datagram (in-place
	// decryption leaves it), identifies the token in the history.
	var mac [crypto.MACBytes]byte
	copy(mac[:], data[len(data)-crypto.MACBytes:])
	priv := &r.priv
	if err := token.ParsePrivate(p.PrivateToken, priv); err != nil {
		s.stats.ignored.Add(1)
		return
	}
	if len(s.cfg.Addrs) > 0 && !s.knowsAny(priv.ServerAddrs) {
		s.stats.addressNotInToken.Add(1)
		if s.log.Enabled(context.Background(), slog.LevelDebug) { // logging allocates; this path is hostile input
			s.log.Debug("netcode: connection request for another server", "from", from)
		}
		return
	}

	s.mu.Lock()
	c := s.byAddr[from]
	switch {
	case s.closed:
		s.mu.Unlock()
		return
	case c != nil && c.live.Load():
		s.mu.Unlock()
		s.stats.ignored.Add(1) // already connected from this address
		return
	case s.byID[priv.ClientID] != nil:
		s.mu.Unlock()
		s.stats.ignored.Add(1) // this client id is connected (from elsewhere)
		return
	case !s.recordToken(now, &mac, from, p.ExpireTimestamp):
		s.mu.Unlock()
		return
	}
	full := len(s.free) == 0 || s.draining.Load()
	if full {
		// Full or draining: say so, keeping no state but the token's
		// history entry. The denial is smaller than the request, and
		// sealed with the token's key so only its holder can read it.
		seq := s.globalSeq
		s.globalSeq++
		s.mu.Unlock()
		s.stats.deniedSent.Add(1)
		key := crypto.NewPacketAEAD(&priv.ServerToClientKey, s.cfg.ProtocolID)
		sink.Send(from, protocol.AppendDenied(r.scratch[:0], key, seq))
		return
	}
	if c == nil || c.c2s != priv.ClientToServerKey || c.s2c != priv.ServerToClientKey {
		if c == nil && len(s.byAddr) >= s.maxMaps {
			// Update sweeps expired mappings every second; sweeping here
			// would let each hostile request cost a scan of the table.
			s.mu.Unlock()
			s.stats.mappingsFull.Add(1)
			return
		}
		c = &Client{
			srv:    s,
			addr:   from,
			c2s:    priv.ClientToServerKey,
			s2c:    priv.ServerToClientKey,
			recv:   crypto.NewPacketAEAD(&priv.ClientToServerKey, s.cfg.ProtocolID),
			replay: new(protocol.ReplayProtection),
		}
		c.sendLocked.send = *crypto.NewPacketAEAD(&priv.ServerToClientKey, s.cfg.ProtocolID)
		c.sendLocked.bufs = new(sendBufs)
		s.byAddr[from] = c
	}
	c.expire = p.ExpireTimestamp
	c.timeout = time.Duration(priv.TimeoutSeconds) * time.Second
	c.lastRecv.Store(now.UnixNano())
	c.tokenMAC = mac
	seq, chSeq := s.globalSeq, s.challengeSeq
	s.globalSeq++
	s.challengeSeq++
	s.mu.Unlock()

	s.stats.challengesSent.Add(1)
	ch := token.Challenge{ClientID: priv.ClientID, UserData: priv.UserData}
	sealed := token.AppendChallenge(r.chTok[:0], r.challenge, chSeq, &ch)
	c.sealChallenge(seq, chSeq, sealed, sink)
}

// response processes a packet from an address in the handshake: only a
// connection response that opens under its keys and carries a valid
// challenge token completes it.
func (r *Receiver) response(now time.Time, c *Client, data []byte, sink Sink) *Client {
	s := r.s
	if protocol.PacketType(data[0]&0x0f) != protocol.ConnectionResponse {
		s.stats.ignored.Add(1)
		return nil
	}
	var p protocol.Packet
	var ch token.Challenge
	c.rmu.Lock()
	err := r.reader.Read(data, unixSeconds(now), c.recv, nil, &p)
	if err == nil {
		err = token.OpenChallenge(r.challenge, p.ChallengeSequence, p.ChallengeToken, &ch)
	}
	c.rmu.Unlock()
	if err != nil {
		s.stats.ignored.Add(1)
		return nil
	}

	s.mu.Lock()
	if s.closed || s.byAddr[c.addr] != c || c.live.Load() || s.byID[ch.ClientID] != nil {
		s.mu.Unlock()
		s.stats.ignored.Add(1) // replaced, or already connected
		return nil
	}
	c.lastRecv.Store(now.UnixNano())
	e := s.history.find(&c.tokenMAC)
	if e == nil || e.consumed || e.addr != c.addr {
		// Consumed: connected with already. Missing: expired since the
		// request, or from before Close.
		s.mu.Unlock()
		s.stats.tokenReuseRefused.Add(1)
		return nil
	}
	if len(s.free) == 0 || s.draining.Load() {
		seq := s.globalSeq
		s.globalSeq++
		s.mu.Unlock()
		s.stats.deniedSent.Add(1)
		c.sealDenied(seq, sink)
		return nil
	}
	idx := s.popSlot()
	c.index = idx
	c.id = ch.ClientID
	c.userData = ch.UserData
	c.queue = packetq.NewCounted(s.cfg.ReadQueue, &s.stats.payloadsDropped)
	c.sendLocked.seq = s.connectionSequence(now)
	c.sendLocked.lastSend.Store(now.UnixNano())
	s.slots[idx] = c
	s.byID[c.id] = c
	e.consumed = true
	c.live.Store(true)
	s.wheel.mu.Lock()
	s.wheel.file(c, c.deadline())
	s.wheel.mu.Unlock()
	s.mu.Unlock()

	s.stats.connectionsOpened.Add(1)
	s.log.Debug("netcode: client connected", "index", idx, "id", c.id, "addr", c.addr)
	c.keepAlive(now, sink, true, nil)
	return c
}

// MappingsPerSlot is how many encryption mappings (handshakes in progress
// and connections) the server holds per client slot. A request that would
// need one more is dropped and counted in Stats.MappingsFull until expired
// mappings are swept (every second).
const MappingsPerSlot = 4

// knowsAny reports whether one of the server's addresses is in list.
func (s *Server) knowsAny(list []netip.AddrPort) bool {
	for _, a := range list {
		a = netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
		if slices.Contains(s.cfg.Addrs, a) {
			return true
		}
	}
	return false
}

// recordToken enters the token in the history, or refuses it and counts
// why; s.mu is held. A token is good for one address and for one
// connection, and is remembered until it expires: a consumed token never
// connects again to this server, whatever else arrives. When the history
// is full, new tokens are refused rather than old ones forgotten.
//
// A token already connected with is refused even from the address it was
// first used from. The C reference accepts it again there once the session
// has ended; but a reference client starts its packet sequence at 0 on
// every connection, so that second session would seal its packets under
// the first one's keys and nonces.
func (s *Server) recordToken(now time.Time, mac *[crypto.MACBytes]byte, from netip.AddrPort, expire uint64) bool {
	if e := s.history.find(mac); e != nil {
		if e.addr == from && !e.consumed {
			return true // the same handshake, the request sent again
		}
		s.stats.tokenReuseRefused.Add(1)
		if e.addr == from && !e.logged {
			e.logged = true
			if s.log.Enabled(context.Background(), slog.LevelInfo) { // logging allocates; this path is hostile input
				s.log.Info("netcode: connect token refused: it was already connected with (netcode allows one connection per token)", "from", from)
			}
		} else if s.log.Enabled(context.Background(), slog.LevelDebug) {
			s.log.Debug("netcode: connect token refused: already used from another address", "from", from)
		}
		return false
	}
	s.history.expire(unixSeconds(now))
	if s.history.add(mac, from, expire) == nil {
		s.stats.historyFull.Add(1)
		if s.log.Enabled(context.Background(), slog.LevelDebug) {
			s.log.Debug("netcode: connect token refused: token history full", "from", from)
		}
		return false
	}
	return true
}

// sweepMappings forgets handshakes whose token expired or that fell silent
// for the token's timeout; s.mu is held.
func (s *Server) sweepMappings(now time.Time) {
	for a, c := range s.byAddr {
		if !c.live.Load() && handshakeExpired(now, c) {
			delete(s.byAddr, a)
		}
	}
}

func handshakeExpired(now time.Time, c *Client) bool {
	if c.expire <= unixSeconds(now) {
		return true
	}
	return c.timeout > 0 && now.UnixNano()-c.lastRecv.Load() >= int64(c.timeout)
}

// popSlot takes a free slot; there must be one. s.mu is held.
func (s *Server) popSlot() int {
	idx := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
	return idx
}

// connectionSequence is the first sequence number of the packets sent on a
// connection made at now. Every packet the server seals under a token's
// server-to-client key uses a sequence number that no other packet under
// that key used:
//
//   - A token connects at most once to a server while the server runs (the
//     history remembers it until it expires), and a connection counts up
//     from its first sequence number.
//   - A connection made later with the same token, by this server after a
//     restart (Close and Listen, or a new process) or by another server of
//     the token's list, starts at the wall clock in nanoseconds
//     (clockSequence), above every number an earlier connection used: that
//     one started at an earlier clock reading and sealed far fewer than
//     one packet per nanosecond since. This is the one assumption: the
//     clocks of the servers that see one token (one server across its
//     restarts, or the servers of one token's list) do not disagree by
//     more than the time between two connections with the token, which is
//     at least a handshake (a round trip) after the earlier one ended.
//   - Challenges and denials use the global sequence, which starts at 2^63
//     plus the clock and so never meets a connection's (below 2^62).
//
// The cost is eight bytes of sequence number in every packet to the
// client, where the reference, counting from 0, writes one to three.
func (s *Server) connectionSequence(now time.Time) uint64 {
	if s.cfg.ReferenceSequences {
		return 0
	}
	return clockSequence(now)
}

// clockSequence is now in nanoseconds since the Unix epoch, below 2^62
// (until the year 2116), and 0 for times before the epoch.
func clockSequence(now time.Time) uint64 {
	ns := now.UnixNano()
	if ns < 0 {
		return 0
	}
	return uint64(ns) & (1<<62 - 1)
}

// sweepInterval is how often Update forgets expired handshakes.
const sweepInterval = time.Second

// Update sends due keep-alives and times out silent clients and stale
// mappings, at now. It acts on every deadline that passed by now, whenever
// it is called; its work follows the clients whose deadlines came (see
// deadlineWheel), not MaxClients. It returns the time of the next call
// with work to do: the end of the wheel bucket holding the next deadline,
// or the next sweep of expired handshakes, at most a second ahead. A
// client that connects in the meantime may make it earlier: the adapter
// calls Update again when Receive returns a new client.
//
// The tables are changed under the server's lock, taken only when a
// client timed out or once a second for the sweeps; the keep-alives are
// sealed and sent after it.
func (s *Server) Update(now time.Time, sink Sink) (next time.Time) {
	s.tick.Lock()
	defer s.tick.Unlock()
	ns := now.UnixNano()
	taken := s.wheel.take(ns, s.taken[:0])
	due, expired, later := s.due[:0], s.expired[:0], taken[:0]
	for _, c := range taken {
		switch {
		case !c.live.Load():
			// Left since it was filed: forgotten.
		case c.timeout > 0 && ns-c.lastRecv.Load() >= int64(c.timeout):
			expired = append(expired, c)
		case ns-c.sendLocked.lastSend.Load() >= int64(KeepAliveInterval):
			due = append(due, c)
		default:
			later = append(later, c) // moved on by packets: filed again
		}
	}
	sec := unixSeconds(now)
	sweep := now.Sub(s.lastSweep) >= sweepInterval
	if len(expired) > 0 || sweep || sec != s.lastExpire {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			s.release(taken, due, expired)
			return now.Add(sweepInterval)
		}
		for _, c := range expired {
			if s.leave(c, ReasonTimedOut) {
				s.stats.connectionsTimeout.Add(1)
			}
		}
		if sec != s.lastExpire {
			s.lastExpire = sec
			s.history.expire(sec)
		}
		if sweep {
			s.lastSweep = now
			s.sweepMappings(now)
		}
		s.mu.Unlock()
	}
	for _, c := range due {
		// Sealed in Update's own buffer: the client's stays out of the
		// cache.
		c.keepAlive(now, sink, false, &s.kaBuf)
	}

	w := s.wheel
	w.mu.Lock()
	for _, list := range [2][]*Client{later, due} {
		for _, c := range list {
			if c.live.Load() {
				w.file(c, c.deadline())
			}
		}
	}
	next = s.lastSweep.Add(sweepInterval)
	if at, ok := w.next(); ok && at < next.UnixNano() {
		next = time.Unix(0, at)
	}
	w.mu.Unlock()
	s.release(taken, due, expired)
	return next
}

// release clears Update's scratch lists, so that they hold no client, and
// keeps them for the next call. s.tick is held.
func (s *Server) release(taken, due, expired []*Client) {
	clear(taken) // later is a prefix of it
	clear(due)
	clear(expired)
	s.taken, s.due, s.expired = taken[:0], due[:0], expired[:0]
}

// ConnectLoopback puts a loopback client in a free slot: a client in the
// server's own process (a listen server's local player) that takes a slot
// but exchanges no packets. The server side reads what the client's end
// sends (LoopbackSend) from Queue; the client's end reads what the server
// side sends (Send) from LoopbackQueue. The client never times out.
func (s *Server) ConnectLoopback(clientID uint64, userData [token.UserDataBytes]byte) (*Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return nil, ErrClientGone
	case s.byID[clientID] != nil:
		return nil, ErrClientIDInUse
	case len(s.free) == 0:
		return nil, ErrFull
	}
	idx := s.popSlot()
	c := &Client{
		srv:      s,
		index:    idx,
		id:       clientID,
		userData: userData,
		loopback: true,
		queue:    packetq.NewCounted(s.cfg.ReadQueue, &s.stats.payloadsDropped),
		peer:     packetq.New(s.cfg.ReadQueue),
	}
	c.confirmed.Store(true)
	c.live.Store(true)
	s.slots[idx] = c
	s.byID[clientID] = c
	s.stats.connectionsOpened.Add(1)
	s.log.Debug("netcode: loopback client connected", "index", idx, "id", clientID)
	return c, nil
}

// LoopbackLeft ends loopback client c's connection from the client's side:
// the slot is freed and the server side's Queue ends with
// ReasonPeerDisconnected.
func (s *Server) LoopbackLeft(c *Client) {
	if c.loopback {
		s.end(c, ReasonPeerDisconnected, nil)
	}
}

// Disconnect ends c's connection from the server side, sending the
// redundant disconnect packets. It does nothing if c already left.
func (s *Server) Disconnect(c *Client, sink Sink) {
	s.end(c, ReasonLocal, sink)
}

// end takes c out of the tables and, with a sink, sends its disconnect
// packets after the server's lock is released.
func (s *Server) end(c *Client, why Reason, sink Sink) {
	s.mu.Lock()
	left := s.leave(c, why)
	s.mu.Unlock()
	if left {
		c.shut(sink, sink != nil)
	}
}

// leave takes c out of its slot and the tables, records why and ends its
// queues; s.mu is held. It reports false if c had left already. The
// caller sends the disconnect packets, if any, after releasing s.mu.
func (s *Server) leave(c *Client, why Reason) bool {
	if !c.live.Load() {
		return false
	}
	c.live.Store(false)
	c.reason.Store(int32(why))
	s.slots[c.index] = nil
	s.free = append(s.free, c.index)
	delete(s.byID, c.id)
	if !c.loopback && s.byAddr[c.addr] == c {
		delete(s.byAddr, c.addr)
	}
	if why == ReasonLocal && !c.loopback {
		s.gone.add(c, s.maxClients)
	}
	c.queue.End(s.cfg.EndErrors[why])
	if c.loopback {
		c.peer.End(s.cfg.EndErrors[ReasonPeerDisconnected])
	}
	if why == ReasonTimedOut {
		c.sendLocked.mu.Lock()
		c.sendLocked.closed = true
		c.sendLocked.mu.Unlock()
	}
	s.log.Debug("netcode: client disconnected", "index", c.index, "id", c.id, "why", why.String())
	return true
}

// Close disconnects every client with the redundant disconnect packets and
// makes the server ignore everything from then on.
func (s *Server) Close(sink Sink) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	var left []*Client
	for _, c := range s.slots {
		if c != nil && s.leave(c, ReasonLocal) {
			left = append(left, c)
		}
	}
	s.closed = true
	clear(s.byAddr)
	s.history.clear()
	s.wheel.reset()
	s.mu.Unlock()
	for _, c := range left {
		c.shut(sink, true)
	}
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

func unixSeconds(t time.Time) uint64 {
	u := t.Unix()
	if u < 0 {
		return 0
	}
	return uint64(u)
}
