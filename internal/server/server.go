// Package server is the I/O-free netcode 1.02 server: client slots, encryption
// mappings, the connect-token history, the handshake, keep-alives and
// timeouts. It owns no goroutine, socket or clock: the adapter feeds it
// datagrams and the current time, and it answers through a Sink and reports
// through a Handler.
//
// Concurrency: Receive, Update, Disconnect and Close may be called from any
// goroutine; they serialise on one mutex. Sending a payload (Client.Send) takes
// only that client's own lock, so writers on different connections never
// contend, and never contend with the receive path except on their own client.
// Handler methods run with the server's mutex held: they must not block and
// must not call back into the Server.
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
	// ReasonPeerDisconnected: the client sent a disconnect packet.
	ReasonPeerDisconnected Reason = iota + 1
	// ReasonTimedOut: nothing arrived from the client within its timeout.
	ReasonTimedOut
	// ReasonLocal: the server side ended the connection (Disconnect or Close).
	ReasonLocal
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

// Sink sends datagrams. Send must have finished with b (sent or copied it)
// when it returns.
type Sink interface {
	Send(to netip.AddrPort, b []byte)
}

// Handler receives the server's events. Its methods run with the server's
// mutex held; they must be quick and must not call into the Server.
type Handler interface {
	// Connected reports a client that completed the handshake.
	Connected(c *Client)
	// Payload delivers one payload from c; p is valid only during the call.
	Payload(c *Client, p []byte)
	// Disconnected reports that c left; c accepts no more sends.
	Disconnected(c *Client, why Reason)
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
	// Logger receives debug logs of ignored packets and state changes; nil
	// is silent.
	Logger *slog.Logger
}

// Client is one connected client. Its methods are safe for concurrent use.
type Client struct {
	srv      *Server
	index    int
	id       uint64
	addr     netip.AddrPort
	userData [token.UserDataBytes]byte
	timeout  time.Duration // <= 0: never times out

	// Read side, guarded by srv.mu.
	recv       *crypto.PacketAEAD
	replay     protocol.ReplayProtection
	lastRecv   time.Time
	connected  bool // guarded by srv.mu: in its slot
	confirmed  atomic.Bool
	loopback   bool // a loopback client: no address, keys or packets
	sendLocked sendState

	// Tag is free for the adapter (set it in Handler.Connected).
	Tag any
}

type sendState struct {
	mu       sync.Mutex
	closed   bool
	send     *crypto.PacketAEAD
	seq      uint64
	lastSend time.Time
	buf      [protocol.MaxPacketBytes]byte
	buf2     [protocol.MaxPacketBytes]byte
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
// Server.ConnectLoopback): it exchanges no packets, and its payloads are
// passed by the adapter directly.
func (c *Client) Loopback() bool { return c.loopback }

// Send seals payload into one packet (preceded by a keep-alive while the
// client has not yet confirmed the connection) and hands it to sink. now is
// the current time, for keep-alive scheduling.
func (c *Client) Send(now time.Time, payload []byte, sink Sink) error {
	if len(payload) < 1 || len(payload) > protocol.MaxPayloadBytes {
		return ErrPayloadSize
	}
	s := &c.sendLocked
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || c.loopback {
		return ErrClientGone
	}
	if !c.confirmed.Load() {
		pkt := protocol.AppendKeepAlive(s.buf2[:0], s.send, s.seq, uint32(c.index), uint32(c.srv.maxClients))
		s.seq++
		sink.Send(c.addr, pkt)
	}
	pkt := protocol.AppendPayload(s.buf[:0], s.send, s.seq, payload)
	s.seq++
	s.lastSend = now
	sink.Send(c.addr, pkt)
	return nil
}

// keepAlive sends a keep-alive if nothing was sent for KeepAliveInterval.
func (c *Client) keepAlive(now time.Time, sink Sink, force bool) {
	s := &c.sendLocked
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || (!force && now.Sub(s.lastSend) < KeepAliveInterval) {
		return
	}
	pkt := protocol.AppendKeepAlive(s.buf[:0], s.send, s.seq, uint32(c.index), uint32(c.srv.maxClients))
	s.seq++
	s.lastSend = now
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
			pkt := protocol.AppendDisconnect(s.buf[:0], s.send, s.seq)
			s.seq++
			sink.Send(c.addr, pkt)
		}
	}
	s.closed = true
}

// mapping is an encryption mapping: the keys for one address, made by a
// valid connection request and kept while the handshake and the connection
// last.
type mapping struct {
	addr       netip.AddrPort
	c2s, s2c   crypto.Key
	recv, send *crypto.PacketAEAD
	expire     uint64        // token expire timestamp (unix seconds)
	timeout    time.Duration // <= 0: none
	lastAccess time.Time
	tokenMAC   [crypto.MACBytes]byte
	client     *Client
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
}

// Server is the netcode server state machine.
type Server struct {
	mu         sync.Mutex
	cfg        Config
	maxClients int
	handler    Handler
	log        *slog.Logger
	reader     protocol.Reader
	challenge  *crypto.AEAD

	globalSeq    uint64
	challengeSeq uint64

	slots     []*Client // nil = free
	free      []int     // free slot indexes (stack)
	byAddr    map[netip.AddrPort]*mapping
	byID      map[uint64]*Client
	history   *tokenHistory
	maxMaps   int
	lastSweep time.Time
	closed    bool
	draining  atomic.Bool // deny every new connection (Drain); read without mu

	scratch [protocol.MaxPacketBytes]byte
	chTok   [token.ChallengeTokenBytes]byte
	priv    token.Private
	stats   Stats
}

// New returns a server. The handler receives its events.
func New(cfg Config, h Handler) (*Server, error) {
	if cfg.MaxClients == 0 {
		cfg.MaxClients = DefaultMaxClients
	}
	if cfg.MaxClients < 1 || cfg.MaxClients > MaxMaxClients {
		return nil, ErrInvalidConfig
	}
	if h == nil {
		return nil, ErrInvalidConfig
	}
	if cfg.PrivateKey == (crypto.Key{}) {
		return nil, ErrZeroKey
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
		handler:    h,
		log:        log,
		challenge:  crypto.NewAEAD(&cfg.ChallengeKey),
		slots:      make([]*Client, cfg.MaxClients),
		free:       make([]int, 0, cfg.MaxClients),
		byAddr:     make(map[netip.AddrPort]*mapping),
		byID:       make(map[uint64]*Client),
		history:    newTokenHistory(historySize(cfg.MaxClients), unixSeconds(cfg.Now)),
		maxMaps:    cfg.MaxClients * MappingsPerSlot,
		lastSweep:  cfg.Now,
	}
	for i := cfg.MaxClients - 1; i >= 0; i-- {
		s.free = append(s.free, i)
	}
	s.reader = protocol.Reader{
		ProtocolID: cfg.ProtocolID,
		Allowed:    protocol.ServerAccepts,
		TokenAEAD:  crypto.NewPrivateTokenAEAD(&cfg.PrivateKey),
	}
	if cfg.PreviousPrivateKey != (crypto.Key{}) {
		s.reader.PreviousTokenAEAD = crypto.NewPrivateTokenAEAD(&cfg.PreviousPrivateKey)
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
	return s, nil
}

// MaxClients is the slot count.
func (s *Server) MaxClients() int { return s.maxClients }

// Drain makes the server deny every new connection request, as if it were
// full; connected clients are not affected. It cannot be undone.
func (s *Server) Drain() { s.draining.Store(true) }

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Connected = len(s.byID)
	st.Mappings = len(s.byAddr)
	st.MappingsLimit = s.maxMaps
	st.History = s.history.len()
	st.HistoryLimit = s.history.limit
	return st
}

// Receive processes one datagram from addr. data is decrypted in place.
func (s *Server) Receive(now time.Time, from netip.AddrPort, data []byte, sink Sink) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	m := s.lookup(now, from)
	var key *crypto.PacketAEAD
	var replay *protocol.ReplayProtection
	if m != nil {
		key = m.recv
		if m.client != nil {
			replay = &m.client.replay
		}
	}
	var p protocol.Packet
	if err := s.reader.Read(data, unixSeconds(now), key, replay, &p); err != nil {
		if err == protocol.ErrReplayed {
			s.stats.Replayed++
		} else {
			s.stats.Ignored++
		}
		return
	}
	switch p.Type {
	case protocol.ConnectionRequest:
		// The token's MAC, the last 16 bytes of the datagram (in-place
		// decryption leaves it), identifies the token in the history.
		var mac [crypto.MACBytes]byte
		copy(mac[:], data[len(data)-crypto.MACBytes:])
		s.processRequest(now, from, &p, mac, sink)
	case protocol.ConnectionResponse:
		s.processResponse(now, m, &p, sink)
	case protocol.KeepAlive, protocol.Payload, protocol.Disconnect:
		m.lastAccess = now
		c := m.client
		if c == nil {
			s.stats.Ignored++
			return
		}
		c.lastRecv = now
		switch p.Type {
		case protocol.KeepAlive:
			c.confirmed.Store(true)
		case protocol.Payload:
			c.confirmed.Store(true)
			s.handler.Payload(c, p.Payload)
		case protocol.Disconnect:
			s.disconnect(c, ReasonPeerDisconnected, sink, false)
		}
	}
}

// lookup returns the live encryption mapping for addr, dropping it if it
// expired.
func (s *Server) lookup(now time.Time, addr netip.AddrPort) *mapping {
	m := s.byAddr[addr]
	if m == nil {
		return nil
	}
	if m.client == nil && s.mappingExpired(now, m) {
		delete(s.byAddr, addr)
		return nil
	}
	return m
}

func (s *Server) mappingExpired(now time.Time, m *mapping) bool {
	if m.expire <= unixSeconds(now) {
		return true
	}
	return m.timeout > 0 && now.Sub(m.lastAccess) >= m.timeout
}

func (s *Server) processRequest(now time.Time, from netip.AddrPort, p *protocol.Packet, mac [crypto.MACBytes]byte, sink Sink) {
	priv := &s.priv
	if err := token.ParsePrivate(p.PrivateToken, priv); err != nil {
		s.stats.Ignored++
		return
	}
	if len(s.cfg.Addrs) > 0 && !s.knowsAny(priv.ServerAddrs) {
		s.stats.AddressNotInToken++
		if s.log.Enabled(context.Background(), slog.LevelDebug) { // logging allocates; this path is hostile input
			s.log.Debug("netcode: connection request for another server", "from", from)
		}
		return
	}
	if m := s.byAddr[from]; m != nil && m.client != nil {
		s.stats.Ignored++ // already connected from this address
		return
	}
	if s.byID[priv.ClientID] != nil {
		s.stats.Ignored++ // this client id is connected (from elsewhere)
		return
	}
	if !s.recordToken(now, &mac, from, p.ExpireTimestamp) {
		return
	}
	if len(s.free) == 0 || s.draining.Load() {
		// Full or draining: say so, keeping no state but the token's history entry.
		// The denial is smaller than the request, and sealed with the
		// token's key so only its holder can read it.
		key := crypto.NewPacketAEAD(&priv.ServerToClientKey, s.cfg.ProtocolID)
		pkt := protocol.AppendDenied(s.scratch[:0], key, s.globalSeq)
		s.globalSeq++
		s.stats.DeniedSent++
		sink.Send(from, pkt)
		return
	}
	m := s.byAddr[from]
	if m == nil || m.c2s != priv.ClientToServerKey || m.s2c != priv.ServerToClientKey {
		if m == nil && len(s.byAddr) >= s.maxMaps {
			// Update sweeps expired mappings every second; sweeping here
			// would let each hostile request cost a scan of the table.
			s.stats.MappingsFull++
			return
		}
		m = &mapping{
			addr: from,
			c2s:  priv.ClientToServerKey,
			s2c:  priv.ServerToClientKey,
			recv: crypto.NewPacketAEAD(&priv.ClientToServerKey, s.cfg.ProtocolID),
			send: crypto.NewPacketAEAD(&priv.ServerToClientKey, s.cfg.ProtocolID),
		}
		s.byAddr[from] = m
	}
	m.expire = p.ExpireTimestamp
	m.timeout = time.Duration(priv.TimeoutSeconds) * time.Second
	m.lastAccess = now
	m.tokenMAC = mac
	ch := token.Challenge{ClientID: priv.ClientID, UserData: priv.UserData}
	sealed := token.AppendChallenge(s.chTok[:0], s.challenge, s.challengeSeq, &ch)
	pkt := protocol.AppendChallenge(s.scratch[:0], m.send, s.globalSeq, s.challengeSeq, sealed)
	s.challengeSeq++
	s.globalSeq++
	s.stats.ChallengesSent++
	sink.Send(from, pkt)
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
// why. A token is good for one address and for one connection, and is
// remembered until it expires: a consumed token never connects again to
// this server, whatever else arrives. When the history is full, new tokens
// are refused rather than old ones forgotten.
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
		s.stats.TokenReuseRefused++
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
		s.stats.HistoryFull++
		if s.log.Enabled(context.Background(), slog.LevelDebug) {
			s.log.Debug("netcode: connect token refused: token history full", "from", from)
		}
		return false
	}
	return true
}

func (s *Server) sweepMappings(now time.Time) {
	for a, m := range s.byAddr {
		if m.client == nil && s.mappingExpired(now, m) {
			delete(s.byAddr, a)
		}
	}
}

func (s *Server) processResponse(now time.Time, m *mapping, p *protocol.Packet, sink Sink) {
	var ch token.Challenge
	if err := token.OpenChallenge(s.challenge, p.ChallengeSequence, p.ChallengeToken, &ch); err != nil {
		s.stats.Ignored++
		return
	}
	m.lastAccess = now
	if m.client != nil || s.byID[ch.ClientID] != nil {
		s.stats.Ignored++ // already connected
		return
	}
	e := s.history.find(&m.tokenMAC)
	if e == nil || e.consumed || e.addr != m.addr {
		// Consumed: connected with already. Missing: expired since the
		// request, or from before Close.
		s.stats.TokenReuseRefused++
		return
	}
	if len(s.free) == 0 || s.draining.Load() {
		pkt := protocol.AppendDenied(s.scratch[:0], m.send, s.globalSeq)
		s.globalSeq++
		s.stats.DeniedSent++
		sink.Send(m.addr, pkt)
		return
	}
	idx := s.popSlot()
	c := &Client{
		srv:       s,
		index:     idx,
		id:        ch.ClientID,
		addr:      m.addr,
		userData:  ch.UserData,
		timeout:   m.timeout,
		recv:      m.recv,
		lastRecv:  now,
		connected: true,
	}
	c.sendLocked.send = m.send
	c.sendLocked.seq = s.connectionSequence(now)
	c.sendLocked.lastSend = now
	s.slots[idx] = c
	s.byID[c.id] = c
	m.client = c
	e.consumed = true
	s.stats.ConnectionsOpened++
	s.log.Debug("netcode: client connected", "index", idx, "id", c.id, "addr", c.addr)
	s.handler.Connected(c)
	c.keepAlive(now, sink, true)
}

// popSlot takes a free slot; there must be one.
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

// Update sends due keep-alives and times out silent clients and stale
// mappings. Call it often (every 10 ms or so).
func (s *Server) Update(now time.Time, sink Sink) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	for _, c := range s.slots {
		if c == nil || c.loopback {
			continue
		}
		if c.timeout > 0 && now.Sub(c.lastRecv) >= c.timeout {
			s.stats.ConnectionsTimeout++
			s.disconnect(c, ReasonTimedOut, sink, false)
			continue
		}
		c.keepAlive(now, sink, false)
	}
	s.history.expire(unixSeconds(now))
	if now.Sub(s.lastSweep) >= time.Second {
		s.lastSweep = now
		s.sweepMappings(now)
	}
}

// ConnectLoopback puts a loopback client in a free slot: a client in the
// server's own process (a listen server's local player) that takes a slot
// but exchanges no packets. The adapter passes its payloads both ways
// itself; the server only counts the slot and reports it through
// Handler.Connected and Handler.Disconnected. The client never times out.
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
		srv:       s,
		index:     idx,
		id:        clientID,
		userData:  userData,
		connected: true,
		loopback:  true,
	}
	c.confirmed.Store(true)
	s.slots[idx] = c
	s.byID[clientID] = c
	s.stats.ConnectionsOpened++
	s.log.Debug("netcode: loopback client connected", "index", idx, "id", clientID)
	s.handler.Connected(c)
	return c, nil
}

// LoopbackLeft ends loopback client c's connection from the client's side:
// the slot is freed and the handler told that the peer disconnected.
func (s *Server) LoopbackLeft(c *Client) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.loopback {
		s.disconnect(c, ReasonPeerDisconnected, nil, false)
	}
}

// Disconnect ends c's connection from the server side, sending the redundant
// disconnect packets. It does nothing if c already left.
func (s *Server) Disconnect(c *Client, sink Sink) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.disconnect(c, ReasonLocal, sink, true)
}

func (s *Server) disconnect(c *Client, why Reason, sink Sink, packets bool) {
	if !c.connected {
		return
	}
	c.shut(sink, packets)
	c.connected = false
	s.slots[c.index] = nil
	s.free = append(s.free, c.index)
	delete(s.byID, c.id)
	if m := s.byAddr[c.addr]; !c.loopback && m != nil && m.client == c {
		delete(s.byAddr, c.addr)
	}
	s.log.Debug("netcode: client disconnected", "index", c.index, "id", c.id, "why", why.String())
	s.handler.Disconnected(c, why)
}

// Close disconnects every client with the redundant disconnect packets and
// makes the server ignore everything from then on.
func (s *Server) Close(sink Sink) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	for _, c := range s.slots {
		if c != nil {
			s.disconnect(c, ReasonLocal, sink, true)
		}
	}
	s.closed = true
	clear(s.byAddr)
	s.history.clear()
}

// ClientByIndex returns the client in slot i, or nil.
func (s *Server) ClientByIndex(i int) *Client {
	s.mu.Lock()
	defer s.mu.Unlock()
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
