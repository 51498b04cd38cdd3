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

// Errors returned by Client.Send.
var (
	ErrClientGone    = errors.New("netcode/server: client is no longer connected")
	ErrPayloadSize   = errors.New("netcode/server: payload must be 1 to 1200 bytes")
	ErrInvalidConfig = errors.New("netcode/server: invalid configuration")
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
	PrivateKey crypto.Key
	// MaxClients is the number of slots; 0 means DefaultMaxClients.
	MaxClients int
	// Addrs are the addresses this server is known by. A connection request
	// is answered only if its token's server list (the internal addresses)
	// contains one of them. Empty disables the check (tests only).
	Addrs []netip.AddrPort
	// ChallengeKey seals challenge tokens; the zero key means a random one
	// chosen at start, as it should be outside tests.
	ChallengeKey crypto.Key
	// Now is the server's start time; it seeds the global sequence so that a
	// restarted server never reuses a nonce under a still-valid token's keys.
	Now time.Time
	// GlobalSequence, if not zero, is the first sequence number of the
	// packets sent before a connection exists (challenges and denials); zero
	// seeds it from Now. Tests set it to reproduce the reference's packets.
	GlobalSequence uint64
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
	if s.closed {
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
	if packets {
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

type historyEntry struct {
	addr     netip.AddrPort
	expire   uint64
	consumed bool // a connection was made with this token
}

// Stats are counters of what the server did, for monitoring and tests.
type Stats struct {
	Connected          int    // clients now connected
	Mappings           int    // encryption mappings now held
	Ignored            uint64 // datagrams dropped as malformed, unauthenticated or out of place
	Replayed           uint64 // datagrams dropped by replay protection
	ChallengesSent     uint64
	DeniedSent         uint64
	TokenReuseRefused  uint64
	AddressNotInToken  uint64
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
	history   map[[crypto.MACBytes]byte]*historyEntry
	maxMaps   int
	maxHist   int
	lastSweep time.Time
	closed    bool
	gone      goneClients // recently kicked clients, reminded (gone.go)

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
		history:    make(map[[crypto.MACBytes]byte]*historyEntry),
		maxMaps:    cfg.MaxClients * 4,
		maxHist:    max(cfg.MaxClients*32, 4096),
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
	// The reference starts at 2^63; adding the start time in nanoseconds
	// keeps every restart above all sequence numbers an earlier run of this
	// server can have used (it sends far fewer than one packet a nanosecond).
	s.globalSeq = protocol.ServerGlobalSequenceStart + uint64(cfg.Now.UnixNano())&(1<<62-1)
	if cfg.GlobalSequence != 0 {
		s.globalSeq = cfg.GlobalSequence
	}
	return s, nil
}

// MaxClients is the slot count.
func (s *Server) MaxClients() int { return s.maxClients }

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Connected = len(s.byID)
	st.Mappings = len(s.byAddr)
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
		if err == protocol.ErrNoKey && s.answerGone(now, from, data, sink) {
			return
		}
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
	if !s.recordToken(now, mac, from, p.ExpireTimestamp) {
		s.stats.TokenReuseRefused++
		if s.log.Enabled(context.Background(), slog.LevelDebug) { // logging allocates; this path is hostile input
			s.log.Debug("netcode: connect token refused: already used", "from", from)
		}
		return
	}
	if len(s.free) == 0 {
		// Full: say so, keeping no state but the token's history entry.
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
			s.sweepMappings(now)
			if len(s.byAddr) >= s.maxMaps {
				s.stats.Ignored++
				return
			}
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

// recordToken enters the token in the history, or refuses it: a token is
// good for one address, and for one connection.
func (s *Server) recordToken(now time.Time, mac [crypto.MACBytes]byte, from netip.AddrPort, expire uint64) bool {
	if e := s.history[mac]; e != nil {
		return e.addr == from && !e.consumed
	}
	if len(s.history) >= s.maxHist {
		s.sweepHistory(now)
	}
	if len(s.history) >= s.maxHist {
		// Every entry is alive. Forget the one closest to expiry, as the
		// reference forgets its oldest entry: refusing instead would let a
		// burst of valid tokens lock every later client out.
		var victim [crypto.MACBytes]byte
		soonest := uint64(1<<64 - 1)
		for k, e := range s.history {
			if e.expire <= soonest {
				victim, soonest = k, e.expire
			}
		}
		delete(s.history, victim)
	}
	s.history[mac] = &historyEntry{addr: from, expire: expire}
	return true
}

func (s *Server) sweepHistory(now time.Time) {
	t := unixSeconds(now)
	for k, e := range s.history {
		if e.expire <= t {
			delete(s.history, k)
		}
	}
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
	if e := s.history[m.tokenMAC]; e != nil && e.consumed {
		s.stats.TokenReuseRefused++
		return
	}
	if len(s.free) == 0 {
		pkt := protocol.AppendDenied(s.scratch[:0], m.send, s.globalSeq)
		s.globalSeq++
		s.stats.DeniedSent++
		sink.Send(m.addr, pkt)
		return
	}
	idx := s.free[len(s.free)-1]
	s.free = s.free[:len(s.free)-1]
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
	c.sendLocked.seq = firstSequence(p.Sequence)
	c.sendLocked.lastSend = now
	s.slots[idx] = c
	s.byID[c.id] = c
	m.client = c
	if e := s.history[m.tokenMAC]; e != nil {
		e.consumed = true
	}
	s.stats.ConnectionsOpened++
	s.log.Debug("netcode: client connected", "index", idx, "id", c.id, "addr", c.addr)
	s.handler.Connected(c)
	c.keepAlive(now, sink, true)
}

// firstSequence picks the first sequence number of the packets sent to a
// new client, from the sequence of the connection response that created
// it. A server that restarts forgets the tokens it has seen, so the same
// token can connect again with the same keys; the reference starts every
// connection at 0 and so reuses nonces then. A client of this package
// starts its count at the microseconds since the token was created
// (internal/client), and the server follows it, rounded down to a multiple
// of 2^16: a later connection with the token then starts above every
// sequence an earlier one used, unless the server sent more packets in that
// connection than there were microseconds between the two, less 65 ms (a
// restart takes longer). The reference client's response sequence is
// always small, so against it the server starts at 0, as the reference's
// does, byte for byte. Starts too close to the top of the range to count
// from are not followed.
func firstSequence(responseSeq uint64) uint64 {
	if responseSeq >= 1<<62 {
		return 0
	}
	return responseSeq &^ (1<<16 - 1)
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
		if c == nil {
			continue
		}
		if c.timeout > 0 && now.Sub(c.lastRecv) >= c.timeout {
			s.stats.ConnectionsTimeout++
			s.disconnect(c, ReasonTimedOut, sink, false)
			continue
		}
		c.keepAlive(now, sink, false)
	}
	if now.Sub(s.lastSweep) >= time.Second {
		s.lastSweep = now
		s.sweepMappings(now)
		s.sweepHistory(now)
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
	if m := s.byAddr[c.addr]; m != nil && m.client == c {
		delete(s.byAddr, c.addr)
	}
	if why == ReasonLocal {
		s.gone.add(c, s.maxClients)
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
	clear(s.history)
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
