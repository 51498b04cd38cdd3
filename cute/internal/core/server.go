package core

import (
	"crypto/subtle"
	"errors"
	"math"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetcode/netcode/cute/internal/hydro"
	"github.com/gonetcode/netcode/cute/internal/wire"
	"github.com/gonetcode/netcode/internal/history"
)

// Server defaults and limits.
const (
	// DefaultMaxClients is CN_PROTOCOL_SERVER_MAX_CLIENTS, also the value
	// CONNECTION_ACCEPTED carries.
	DefaultMaxClients = 32
	// MaxMaxClients bounds ServerConfig.MaxClients.
	MaxMaxClients = 4096
	// DefaultMaxPending is CN_PROTOCOL_ENCRYPTION_STATES_MAX: handshakes in
	// progress at once.
	DefaultMaxPending = 64
	// DefaultConnectionTimeout is Cute Framework's default.
	DefaultConnectionTimeout = 10 * time.Second
	// HalfOpenTimeout is how long a handshake may stay half-open: from the
	// first connect token of a handshake to the challenge response that
	// completes it. Resent tokens do not extend it, so a flood that keeps
	// resending its tokens holds no entry longer than this. A live client
	// answers a challenge within one round trip and one frame (Cute
	// Framework's client sends its response on its next update), and
	// resends its token or response every SendRate, so one second is ten
	// tries at any round trip under about 900 ms; waiting longer would only
	// let a flood hold the table. The C server never expires handshakes.
	HalfOpenTimeout = time.Second
	// unansweredPerPending sizes the memory of tokens whose handshake went
	// unanswered (this many per ServerConfig.MaxPending entry, from
	// minUnanswered to maxUnanswered, about 150 bytes each): each is
	// refused a new handshake until it expires, so a flood's token holds
	// an entry for HalfOpenTimeout once, not again every time it is
	// resent. When that memory is full a token simply is not remembered
	// (it may try again): it only ever sheds load, it never guards against
	// replay (the History does).
	unansweredPerPending = 64
	minUnanswered        = 4096
	maxUnanswered        = 1 << 16
)

// TokenID names a connect token for the history: see wire.ServerToken.ID.
type TokenID = [hydro.HeaderBytes]byte

// TokenHistory remembers every connect token a connection was made with
// until the token expires, so that none is accepted twice. It must never
// forget a token before its expiry (an LRU that evicts, as the C code's
// 256-entry cache does, lets a token be replayed); when full it refuses.
// The Server calls it under its lock; it must not call back.
type TokenHistory interface {
	// Consumed reports whether id was consumed and has not expired at now
	// (Unix seconds).
	Consumed(id *TokenID, now uint64) bool
	// Consume records id as consumed until expires (Unix seconds). It
	// returns false, recording nothing, when the history is full.
	Consume(id *TokenID, expires, now uint64) bool
}

// slot is a client slot: its lock and the connection it holds.
type slot struct {
	mu  sync.Mutex
	ivs ivSource // the slot's connections' IVs, kept from one to the next
	conn
}

// conn is a connection's state. Its identity (connected, gen, clientID,
// addr) changes only with both Server.mu and the slot's mu held, so either
// lock is enough to read it; the rest is guarded by the slot's mu.
type conn struct {
	connected bool
	gen       uint64 // counts the slot's connections: a stale index fails the check
	clientID  uint64
	addr      netip.AddrPort

	confirmed bool // a KEEPALIVE or PAYLOAD arrived from it
	seq       uint64
	c2s, s2c  wire.PacketKey
	replay    wire.Replay
	lastRecv  time.Time
	lastSend  time.Time
	userData  [wire.UserDataBytes]byte
	iv        wire.IV
}

// Server is the Cute server state machine (cn_protocol_server). Its
// methods are safe for concurrent use, and no AEAD operation on a
// connection's packets runs under a lock shared by all connections:
//
//	Server.tick   serialises Update.
//	Server.mu     (RWMutex) guards the tables: slot identities, the address
//	              and id maps, the handshakes, the history, the counters,
//	              the challenge nonce and the tick time. Lookups take it for
//	              reading and release it before any packet of a connection
//	              is sealed or opened; handshake packets (tokens, challenges,
//	              denials) are handled under it.
//	slot.mu       guards one connection's keys, sequence, replay window and
//	              timers: its packets are sealed and opened under it alone.
//
// Lock order: tick → mu → slot.mu. A goroutine holding slot.mu alone
// releases it before taking mu.
type Server struct {
	tick sync.Mutex
	mu   sync.RWMutex
	cfg  ServerConfig
	rand entropy // safe for concurrent use (crypto/rand)
	// ivDirect draws the slots' IVs from rand itself (tests only).
	ivDirect bool
	timeout  uint32 // seconds, as sent

	slots    []slot
	count    int
	byAddr   map[netip.AddrPort]int // connected address → slot
	byID     map[uint64]int         // connected client id → slot
	pend     []pending              // in insertion order, as the C table's item array
	pendAddr map[netip.AddrPort]int // address → index in pend
	pendID   map[TokenID]int        // token → index in pend: one handshake per token
	// unanswered remembers, until they expire, the tokens whose handshake
	// reached HalfOpenTimeout: they may not start another.
	unanswered *history.Table[TokenID, struct{}]

	challengeNonce uint64
	// last is the time of the last Update. The C server counts the update
	// interval in which a packet arrived as time since it (its timers
	// advance after the receive loop), so timers restarted by a packet
	// start at the previous update, which keeps the keepalive schedule
	// packet for packet.
	last     time.Time
	stats    ServerStats
	draining atomic.Bool // deny every new connection (Drain)

	iv        wire.IV // handshake packets, under mu
	challenge [wire.ChallengeDataBytes]byte
	due       []slotRef // Update's scratch, under tick
}

// slotRef names one connection of a slot.
type slotRef struct {
	i   int
	gen uint64
}

// NewServer makes a server at time now (cn_protocol_server_start).
func NewServer(now time.Time, cfg ServerConfig) (*Server, error) {
	if cfg.MaxClients == 0 {
		cfg.MaxClients = DefaultMaxClients
	}
	if cfg.MaxPending == 0 {
		cfg.MaxPending = DefaultMaxPending
	}
	if cfg.ConnectionTimeout == 0 {
		cfg.ConnectionTimeout = DefaultConnectionTimeout
	}
	var zero [32]byte
	switch {
	case cfg.MaxClients < 1 || cfg.MaxClients > MaxMaxClients,
		cfg.MaxPending < 1,
		cfg.ConnectionTimeout < time.Second || cfg.ConnectionTimeout%time.Second != 0 || cfg.ConnectionTimeout/time.Second > 1<<32-1,
		cfg.History == nil,
		len(cfg.Addrs) == 0 || slices.ContainsFunc(cfg.Addrs, func(a netip.AddrPort) bool { return !a.IsValid() }),
		subtle.ConstantTimeCompare(cfg.SecretKey[:32], zero[:]) == 1,
		subtle.ConstantTimeCompare(cfg.SecretKey[32:], cfg.PublicKey[:]) != 1:
		return nil, ErrServerConfig
	}
	cfg.Addrs = slices.Clone(cfg.Addrs)
	return &Server{
		cfg:      cfg,
		rand:     systemEntropy,
		timeout:  uint32(cfg.ConnectionTimeout / time.Second),
		slots:    make([]slot, cfg.MaxClients),
		byAddr:   make(map[netip.AddrPort]int),
		byID:     make(map[uint64]int),
		pend:     make([]pending, 0, cfg.MaxPending),
		pendAddr: make(map[netip.AddrPort]int),
		pendID:   make(map[TokenID]int),
		unanswered: history.New[TokenID, struct{}](min(max(unansweredPerPending*cfg.MaxPending, minUnanswered), maxUnanswered),
			unixSeconds(now), math.MaxUint64),
		last: now,
	}, nil
}

// restart is the time a timer restarted by a packet at now counts from.
// Call with mu held (either way).
func (s *Server) restart(now time.Time) time.Time {
	if s.last.After(now) {
		return now
	}
	return s.last
}

// earlier lowers *next to t.
func earlier(next *time.Time, t time.Time) {
	if next.IsZero() || t.Before(*next) {
		*next = t
	}
}

// pendingNext is when the handshakes need an Update. Call with mu held.
func (s *Server) pendingNext(next *time.Time) {
	for i := range s.pend {
		p := &s.pend[i]
		switch {
		case p.owed && !p.sent:
			earlier(next, p.lastRecv)
		case p.owed:
			earlier(next, p.lastSend.Add(SendRate))
		}
		earlier(next, p.lastRecv.Add(p.handshake))
		earlier(next, p.deadline)
		earlier(next, time.Unix(int64(min(p.expires, 1<<62)), 0))
	}
}

// challengeBodyBytes is the size of a challenge's body: nonce and bytes.
const challengeBodyBytes = wire.ChallengeBytes - wire.HeaderBytes

// payloadFree returns nonce, or the next one if nonce's low 16 bits would
// make a challenge's body read as a payload: the type byte is not sealed,
// so a challenge request or response relabelled PAYLOAD would otherwise
// open as one, a 262-byte payload nobody sent (see Client.notPayload). The
// nonce is the server's to choose; the client only echoes it.
func payloadFree(nonce uint64) uint64 {
	if nonce&0xffff == challengeBodyBytes-2 {
		return nonce + 1
	}
	return nonce
}

// Stats returns the refusal counters.
func (s *Server) Stats() ServerStats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.stats
}

// ClientCount returns the number of connected clients.
func (s *Server) ClientCount() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.count
}

// PendingCount returns the number of handshakes in progress.
func (s *Server) PendingCount() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.pend)
}

// Receive processes one datagram (one pass of
// s_protocol_server_receive_packets' loop). data is decrypted in place;
// an EventPayload's Payload is a slice of it. out.Next is set when the
// datagram made an Update due sooner (a challenge to send, a new
// connection's keepalives), else zero.
func (s *Server) Receive(now time.Time, from netip.AddrPort, data []byte, out *ServerOutput) {
	out.reset()
	if len(data) < wire.HeaderBytes {
		return
	}
	switch t := wire.Type(data[0]); t {
	case wire.ConnectionAccepted, wire.ConnectionDenied, wire.ChallengeRequest:
		return
	case wire.ConnectToken:
		if len(data) == wire.TokenPacketBytes {
			s.receiveToken(now, from, data, out)
		}
		return
	default:
		if t > wire.Payload {
			return
		}
	}
	s.mu.RLock()
	i, connected := s.byAddr[from]
	var ref slotRef
	var start time.Time
	if connected {
		ref = slotRef{i, s.slots[i].gen}
		start = s.restart(now)
	}
	s.mu.RUnlock()
	if connected {
		s.receiveConnected(now, start, ref, data, out)
		return
	}
	s.receivePending(now, from, data, out)
}

// receiveConnected handles a packet from a connected client, under its
// slot's lock alone; start is when a timer it restarts counts from.
func (s *Server) receiveConnected(now, start time.Time, ref slotRef, data []byte, out *ServerOutput) {
	if wire.Type(data[0]) == wire.ChallengeResponse {
		return
	}
	c := &s.slots[ref.i]
	c.mu.Lock()
	if !c.connected || c.gen != ref.gen {
		c.mu.Unlock()
		return
	}
	var p wire.Packet
	if wire.Open(data, &c.c2s, &c.replay, &p) != nil {
		c.mu.Unlock()
		return
	}
	switch p.Type {
	case wire.KeepAlive:
		c.lastRecv = start
		c.confirmed = true
	case wire.Payload:
		c.lastRecv = start
		c.confirmed = true
		out.Events = append(out.Events, Event{Kind: EventPayload, Index: ref.i, Gen: ref.gen, ClientID: c.clientID, Addr: c.addr, Payload: p.Payload, Sequence: p.Sequence})
	}
	c.mu.Unlock()
	if p.Type == wire.Disconnect {
		s.mu.Lock()
		s.dropRef(ref, false, ReasonClient, out)
		s.mu.Unlock()
	}
}

// dropRef ends the connection ref names if it is still there. Call with mu.
func (s *Server) dropRef(ref slotRef, notify bool, reason string, out *ServerOutput) bool {
	c := &s.slots[ref.i]
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.connected || c.gen != ref.gen {
		return false
	}
	s.drop(ref.i, notify, reason, out)
	return true
}

// drop ends slot i's connection, first sending the redundant DISCONNECT
// packets if notify is set (s_protocol_server_disconnect_client). Call
// with mu and the slot's lock.
func (s *Server) drop(i int, notify bool, reason string, out *ServerOutput) {
	c := &s.slots[i]
	if notify {
		for range DisconnectPackets {
			buf, start := out.mark()
			c.ivs.draw(s.rand, s.ivDirect, &c.iv)
			buf = wire.AppendEmpty(buf, wire.Disconnect, c.seq, &c.s2c, &c.iv)
			c.seq++
			out.push(buf, start, c.addr)
		}
	}
	s.count--
	delete(s.byAddr, c.addr)
	delete(s.byID, c.clientID)
	out.Events = append(out.Events, Event{Kind: EventDisconnected, Index: i, Gen: c.gen, ClientID: c.clientID, Addr: c.addr, Reason: reason})
	c.conn = conn{gen: c.gen}
}

// Update expires handshakes, sends the challenge requests and keepalives
// that are due and ends the connections that timed out
// (cn_protocol_server_update after its receive loop). out.Next is when the
// next Update is due.
func (s *Server) Update(now time.Time, out *ServerOutput) {
	out.reset()
	s.tick.Lock()
	defer s.tick.Unlock()
	unix := unixSeconds(now)
	var next time.Time

	s.mu.Lock()
	// Handshakes expire by HalfOpenTimeout, their token's handshake
	// timeout and expiry; the C server never expires them (its sweep is
	// not called). A token whose handshake went unanswered may not start
	// another until it expires.
	s.unanswered.Expire(unix)
	for pi := 0; pi < len(s.pend); {
		p := &s.pend[pi]
		if p.expires <= unix || !now.Before(p.deadline) || now.Sub(p.lastRecv) >= p.handshake {
			// Only a handshake that was challenged had its chance.
			if p.sent && p.expires > unix && s.unanswered.Find(&p.id) == nil {
				s.unanswered.Add(&p.id, p.expires, struct{}{}) // nil when full: not remembered
			}
			s.removePending(pi)
			s.stats.PendingExpired++
			continue
		}
		pi++
	}
	for pi := range s.pend {
		p := &s.pend[pi]
		if !p.owed || p.sent && now.Sub(p.lastSend) < SendRate {
			continue
		}
		p.sent, p.owed = true, false
		p.lastSend = now
		s.rand(s.challenge[:])
		s.rand(s.iv[:])
		c := &p.challenges[p.nextChal]
		p.nextChal = (p.nextChal + 1) % challengeMemory
		s.challengeNonce = payloadFree(s.challengeNonce)
		*c = challenge{set: true, nonce: s.challengeNonce, data: s.challenge}
		buf, start := out.mark()
		buf = wire.AppendChallenge(buf, wire.ChallengeRequest, p.seq, &p.s2c, &s.iv, s.challengeNonce, &s.challenge)
		p.seq++
		s.challengeNonce++
		out.push(buf, start, p.addr)
	}
	s.pendingNext(&next)
	s.due = s.due[:0]
	for i := range s.slots {
		if c := &s.slots[i]; c.connected {
			s.due = append(s.due, slotRef{i, c.gen})
		}
	}
	s.mu.Unlock()

	// Keepalives, each under its connection's lock alone.
	timedOut := false
	for k, ref := range s.due {
		c := &s.slots[ref.i]
		c.mu.Lock()
		if !c.connected || c.gen != ref.gen {
			c.mu.Unlock()
			s.due[k].gen = 0
			continue
		}
		if now.Sub(c.lastSend) >= SendRate {
			c.lastSend = now
			if !c.confirmed {
				s.sendAccepted(&c.conn, out)
			}
			buf, start := out.mark()
			c.ivs.draw(s.rand, s.ivDirect, &c.iv)
			buf = wire.AppendEmpty(buf, wire.KeepAlive, c.seq, &c.s2c, &c.iv)
			c.seq++
			out.push(buf, start, c.addr)
		}
		if now.Sub(c.lastRecv) >= s.cfg.ConnectionTimeout {
			timedOut = true
		} else {
			s.due[k].gen = 0
			earlier(&next, c.lastSend.Add(SendRate))
			earlier(&next, c.lastRecv.Add(s.cfg.ConnectionTimeout))
		}
		c.mu.Unlock()
	}

	s.mu.Lock()
	if timedOut {
		for _, ref := range s.due {
			if ref.gen != 0 {
				if s.dropRef(ref, true, ReasonTimeout, out) {
					s.stats.ConnectionsTimedOut++
				}
			}
		}
	}
	s.last = now
	s.mu.Unlock()
	out.Next = next
}

// Errors of Server.Send.
var (
	ErrNoClient = errors.New("cute/core: no client in that slot")
)

// lookup returns a reference to the connection in slot i.
func (s *Server) lookup(i int) (slotRef, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if i < 0 || i >= len(s.slots) || !s.slots[i].connected {
		return slotRef{}, false
	}
	return slotRef{i, s.slots[i].gen}, true
}

// Send seals payload (0..MaxPayloadBytes bytes) to the client in slot i
// (cn_protocol_server_send_to_client), under that connection's lock alone:
// a client that has not confirmed its connection gets a
// CONNECTION_ACCEPTED first.
func (s *Server) Send(now time.Time, i int, payload []byte, out *ServerOutput) error {
	out.reset()
	ref, ok := s.lookup(i)
	if !ok {
		return ErrNoClient
	}
	_, err := s.send(now, ref, [][]byte{payload}, out)
	return err
}

// SendConn is Send to the connection of generation gen in slot i (an
// Event's Index and Gen): it fails with ErrNoClient once that connection
// has ended, even if another client holds the slot since.
func (s *Server) SendConn(now time.Time, i int, gen uint64, payload []byte, out *ServerOutput) error {
	_, err := s.SendConnBatch(now, i, gen, [][]byte{payload}, out)
	return err
}

// SendConnBatch is SendConn for each of ps in order, under one take of the
// connection's lock, their packets in out together (a batched write's). It
// seals all or none: it fails with ErrPayloadSize if any is too large,
// ErrNoClient once the connection has ended.
func (s *Server) SendConnBatch(now time.Time, i int, gen uint64, ps [][]byte, out *ServerOutput) (int, error) {
	out.reset()
	if i < 0 || i >= len(s.slots) {
		return 0, ErrNoClient
	}
	return s.send(now, slotRef{i, gen}, ps, out)
}

// send seals each of ps to the connection ref under its lock.
func (s *Server) send(now time.Time, ref slotRef, ps [][]byte, out *ServerOutput) (int, error) {
	if !payloadSizes(ps) {
		return 0, ErrPayloadSize
	}
	c := &s.slots[ref.i]
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.connected || c.gen != ref.gen {
		return 0, ErrNoClient
	}
	if !c.confirmed {
		s.sendAccepted(&c.conn, out)
	}
	for _, payload := range ps {
		buf, start := out.mark()
		c.ivs.draw(s.rand, s.ivDirect, &c.iv)
		buf = wire.AppendPayload(buf, c.seq, &c.s2c, &c.iv, payload)
		c.seq++
		out.push(buf, start, c.addr)
	}
	c.lastSend = now
	return len(ps), nil
}

// Disconnect ends the connection in slot i, with the redundant
// DISCONNECT packets if notify is set (cn_protocol_server_disconnect_client).
func (s *Server) Disconnect(now time.Time, i int, notify bool, out *ServerOutput) error {
	out.reset()
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < 0 || i >= len(s.slots) || !s.slots[i].connected {
		return ErrNoClient
	}
	s.dropRef(slotRef{i, s.slots[i].gen}, notify, ReasonServer, out)
	return nil
}

// DisconnectConn is Disconnect of the connection of generation gen in
// slot i: it does nothing, and returns ErrNoClient, once that connection
// has ended.
func (s *Server) DisconnectConn(now time.Time, i int, gen uint64, notify bool, out *ServerOutput) error {
	out.reset()
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < 0 || i >= len(s.slots) || !s.slots[i].connected || s.slots[i].gen != gen {
		return ErrNoClient
	}
	s.dropRef(slotRef{i, gen}, notify, ReasonServer, out)
	return nil
}

// DisconnectAll ends every connection, with DISCONNECT packets if notify
// is set, and forgets every handshake (cn_protocol_server_stop, which
// sends none).
func (s *Server) DisconnectAll(now time.Time, notify bool, out *ServerOutput) {
	out.reset()
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.slots {
		if s.slots[i].connected {
			s.dropRef(slotRef{i, s.slots[i].gen}, notify, ReasonServer, out)
		}
	}
	for len(s.pend) > 0 {
		s.removePending(len(s.pend) - 1)
	}
}
