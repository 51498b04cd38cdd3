package core

import (
	"crypto/subtle"
	"net/netip"
	"slices"
	"time"

	"github.com/gonetcode/netcode/cute/internal/wire"
)

// pending is a handshake in progress (cn_protocol_encryption_state_t).
type pending struct {
	addr      netip.AddrPort
	seq       uint64
	expires   uint64 // token expiry, Unix seconds
	handshake time.Duration
	// deadline ends the handshake if it has not completed by then:
	// HalfOpenTimeout after the token first arrived. Resent tokens do not
	// move it.
	deadline time.Time
	lastRecv time.Time
	lastSend time.Time
	sent     bool // a challenge request went out
	// owed is set by each connect token from the address and spent by the
	// challenge request that answers it: the server answers, it never
	// volunteers (the C server challenges every 0.1 s whether or not the
	// address sends anything, an amplifier for spoofed sources).
	owed     bool
	clientID uint64
	c2s, s2c wire.PacketKey
	id       TokenID
	userData [wire.UserDataBytes]byte
	// The last challenges sent: a response must echo one of them.
	challenges [challengeMemory]challenge
	nextChal   int
}

// challengeMemory is how many recent challenges a handshake remembers: a
// response may echo one of the last few if later ones were lost or
// reordered.
const challengeMemory = 4

// challenge is a challenge request's nonce and bytes.
type challenge struct {
	set   bool
	nonce uint64
	data  [wire.ChallengeDataBytes]byte
}

// echoes reports whether a challenge response carries one of the
// handshake's recent challenges.
func (p *pending) echoes(nonce uint64, data []byte) bool {
	for i := range p.challenges {
		c := &p.challenges[i]
		if c.set && c.nonce == nonce && subtle.ConstantTimeCompare(c.data[:], data) == 1 {
			return true
		}
	}
	return false
}

// receivePending handles a packet from an address that is handshaking.
func (s *Server) receivePending(now time.Time, from netip.AddrPort, data []byte, out *ServerOutput) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pi, ok := s.pendAddr[from]
	if !ok {
		return
	}
	p := &s.pend[pi]
	if p.expires <= unixSeconds(now) {
		s.removePending(pi)
		s.stats.PendingExpired++
		return
	}
	var pkt wire.Packet
	if wire.Open(data, &p.c2s, nil, &pkt) != nil {
		return
	}
	if pkt.Type != wire.ChallengeResponse {
		p.lastRecv = s.restart(now)
		return
	}
	// The C server does not check the echo, so a token holder could
	// complete a handshake for an address it does not receive at (a
	// spoofed victim, which then gets the connection's keepalives).
	if !p.echoes(pkt.ChallengeNonce, pkt.ChallengeData) {
		return
	}
	p.lastRecv = s.restart(now)
	if _, taken := s.byID[p.clientID]; taken {
		return
	}
	if s.full() {
		s.deny(pi, out)
		return
	}
	s.connect(now, pi, out)
}

// receiveToken handles a 1024-byte connect token packet. The signature and
// the secret section are checked before any lock is taken.
func (s *Server) receiveToken(now time.Time, from netip.AddrPort, data []byte, out *ServerOutput) {
	if s.refusedEarly(from, (*TokenID)(data[wire.PublicBytes:])) {
		return
	}
	unix := unixSeconds(now)
	var t wire.ServerToken
	if wire.ReadServerToken(data, &s.cfg.PublicKey, &s.cfg.SecretKey, s.cfg.ApplicationID, unix, &t) != nil {
		return
	}
	if !slices.ContainsFunc(t.Endpoints[:t.EndpointCount], func(e netip.AddrPort) bool { return slices.Contains(s.cfg.Addrs, e) }) {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	defer clear(t.ClientToServer[:])
	defer clear(t.ServerToClient[:])
	if _, ok := s.byAddr[from]; ok {
		return
	}
	if _, ok := s.byID[t.ClientID]; ok {
		return
	}
	if s.cfg.History.Consumed(&t.ID, unix) {
		s.stats.TokenReplayed++
		return
	}
	pi, ok := s.pendAddr[from]
	if s.full() {
		if ok {
			s.deny(pi, out)
			return
		}
		// Full: deny with the token's key and sequence 0, as the C server
		// does with the handshake state it creates first, but create
		// none: nothing more goes to this address (the C server goes on
		// sending it challenge requests).
		buf, start := out.mark()
		s.rand(s.iv[:])
		s2c := wire.NewPacketKey(&t.ServerToClient)
		buf = wire.AppendEmpty(buf, wire.ConnectionDenied, 0, &s2c, &s.iv)
		s2c.Clear()
		out.push(buf, start, from)
		s.stats.Denied++
		return
	}
	if ok {
		s.pend[pi].lastRecv = s.restart(now)
		s.pend[pi].owed = true
		out.Next = now
		return
	}
	if s.refusedLocked(from, &t.ID) {
		return
	}
	if len(s.pend) >= s.cfg.MaxPending {
		s.stats.PendingFull++
		return
	}
	s.pendAddr[from] = len(s.pend)
	s.pendID[t.ID] = len(s.pend)
	s.pend = append(s.pend, pending{
		addr:      from,
		expires:   t.Expires,
		handshake: time.Duration(t.HandshakeTimeout) * time.Second,
		deadline:  now.Add(HalfOpenTimeout),
		lastRecv:  s.restart(now),
		owed:      true,
		clientID:  t.ClientID,
		c2s:       wire.NewPacketKey(&t.ClientToServer),
		s2c:       wire.NewPacketKey(&t.ServerToClient),
		id:        t.ID,
		userData:  t.UserData,
	})
	out.Next = now
}

// refusedEarly refuses, before its signature is checked, a token that
// refusedLocked would refuse after: the check is on the token's ID, the
// secretbox header of its secret section, and a forged packet carrying a
// real token's ID is refused only where the real token would be, so the
// flood of a token already refused costs a lookup, not a signature check.
//
// A full table refuses early too, unless the address is handshaking (a
// resend refreshes its handshake) or connected, or every slot is taken
// (the token is then answered with CONNECTION_DENIED).
func (s *Server) refusedEarly(from netip.AddrPort, id *TokenID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refusedLocked(from, id) {
		return true
	}
	_, pending := s.pendAddr[from]
	_, connected := s.byAddr[from]
	if len(s.pend) >= s.cfg.MaxPending && !pending && !connected && !s.full() {
		s.stats.PendingFull++
		return true
	}
	return false
}

// refusedLocked refuses a token that may not start a handshake from from:
// one handshaking from another address (one handshake per token: the same
// token resent from other source ports would otherwise fill the table;
// the first address keeps it, as netcode's history binds a token to its
// first address), or one whose handshake went unanswered. Call with mu.
func (s *Server) refusedLocked(from netip.AddrPort, id *TokenID) bool {
	if pi, ok := s.pendID[*id]; ok && s.pend[pi].addr != from {
		s.stats.TokenInUse++
		return true
	}
	if s.unanswered.Find(id) != nil {
		s.stats.TokenUnanswered++
		return true
	}
	return false
}

// deny answers a handshake with CONNECTION_DENIED (the server is full or
// draining) and forgets it, so that nothing more is sent to the address.
// Call with mu.
func (s *Server) deny(pi int, out *ServerOutput) {
	p := &s.pend[pi]
	buf, start := out.mark()
	s.rand(s.iv[:])
	buf = wire.AppendEmpty(buf, wire.ConnectionDenied, p.seq, &p.s2c, &s.iv)
	p.seq++
	out.push(buf, start, p.addr)
	s.stats.Denied++
	s.removePending(pi)
}

// removePending deletes pend[pi] as the C hash table does: the last item
// moves into its place. Call with mu.
func (s *Server) removePending(pi int) {
	last := len(s.pend) - 1
	delete(s.pendAddr, s.pend[pi].addr)
	delete(s.pendID, s.pend[pi].id)
	if pi != last {
		s.pend[pi] = s.pend[last]
		s.pendAddr[s.pend[pi].addr] = pi
		s.pendID[s.pend[pi].id] = pi
	}
	s.pend[last] = pending{}
	s.pend = s.pend[:last]
}

// connect gives the handshake pend[pi] a slot
// (s_protocol_server_connect_client). Call with mu.
func (s *Server) connect(now time.Time, pi int, out *ServerOutput) {
	p := &s.pend[pi]
	i := 0
	for i < len(s.slots) && s.slots[i].connected {
		i++
	}
	if i == len(s.slots) {
		return
	}
	unix := unixSeconds(now)
	if s.cfg.History.Consumed(&p.id, unix) {
		// The same token, handshaking from two addresses: the other one
		// connected first.
		s.stats.TokenReplayed++
		s.removePending(pi)
		return
	}
	if !s.cfg.History.Consume(&p.id, p.expires, unix) {
		s.stats.HistoryFull++
		return
	}
	c := &s.slots[i]
	start := s.restart(now)
	c.mu.Lock()
	gen := c.gen + 1
	c.conn = conn{
		connected: true,
		gen:       gen,
		clientID:  p.clientID,
		addr:      p.addr,
		seq:       p.seq,
		c2s:       p.c2s,
		s2c:       p.s2c,
		lastRecv:  start,
		lastSend:  start,
		userData:  p.userData,
	}
	s.count++
	s.stats.ConnectionsOpened++
	s.byAddr[c.addr] = i
	s.byID[c.clientID] = i
	s.removePending(pi)
	out.Events = append(out.Events, Event{Kind: EventConnected, Index: i, Gen: c.gen, ClientID: c.clientID, Addr: c.addr, UserData: c.userData})
	s.sendAccepted(&c.conn, out)
	out.Next = start.Add(SendRate)
	c.mu.Unlock()
}

// sendAccepted sends the connection a CONNECTION_ACCEPTED. Call with its
// slot's lock.
func (s *Server) sendAccepted(c *conn, out *ServerOutput) {
	buf, start := out.mark()
	s.rand(c.iv[:])
	buf = wire.AppendAccepted(buf, c.seq, &c.s2c, &c.iv, c.clientID, uint32(len(s.slots)), s.timeout)
	c.seq++
	out.push(buf, start, c.addr)
}
