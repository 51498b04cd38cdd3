package server

import (
	"encoding/binary"
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/aead"
	"github.com/gonetcode/netcode/internal/packetq"
	"github.com/gonetcode/netcode/internal/tokenwire"
	"github.com/gonetcode/netcode/protocol"
)

// Receiver is one reading goroutine's state: its packet reader (the AEADs
// it uses are not safe for concurrent use), its refusal log limiter and
// scratch space. Each goroutine that calls Receive concurrently needs its
// own.
type Receiver struct {
	s         *Server
	reader    protocol.Reader
	challenge *aead.AEAD
	priv      tokenwire.Private
	refusals  refusalLog
	chTok     [tokenwire.ChallengeTokenBytes]byte
}

// NewReceiver returns a Receiver for s.
func (s *Server) NewReceiver() *Receiver {
	r := &Receiver{s: s, challenge: aead.New(&s.challenge)}
	r.reader = protocol.Reader{ProtocolID: s.cfg.ProtocolID, Allowed: protocol.ServerAccepts, TokenAEAD: crypto.NewPrivateTokenAEAD(s.tokenKeys[0])}
	if s.tokenKeys[1] != nil {
		r.reader.PreviousTokenAEAD = crypto.NewPrivateTokenAEAD(s.tokenKeys[1])
	}
	return r
}

// Receive processes one datagram from addr with the server's own Receiver
// (serialised); see Receiver.Receive.
func (s *Server) Receive(now time.Time, from netip.AddrPort, data []byte, out *Output) *Client {
	s.mainMu.Lock()
	defer s.mainMu.Unlock()
	return s.main.Receive(now, from, data, out)
}

// Receive processes one datagram from addr. data is decrypted in place. It
// returns the client this datagram connected, if it completed a handshake:
// the adapter makes its connection for it. Payloads go to their client's
// Queue; replies and log records are appended to out.
func (r *Receiver) Receive(now time.Time, from netip.AddrPort, data []byte, out *Output) *Client {
	s := r.s
	if len(data) == 0 {
		s.stats.ignored.Add(1)
		return nil
	}
	if data[0] == byte(protocol.ConnectionRequest) {
		r.request(now, from, data, out)
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
		if !r.answerGone(now, from, data, out) {
			s.stats.ignored.Add(1)
		}
		return nil
	}
	if !c.live.Load() {
		return r.response(now, c, data, out)
	}
	// A connected client: its packets decrypt under its own lock.
	var p protocol.Packet
	c.rmu.Lock()
	if t := protocol.PacketType(data[0] & 0x0f); t != protocol.KeepAlive && t != protocol.Payload && t != protocol.Disconnect {
		c.rmu.Unlock()
		s.stats.ignored.Add(1) // a handshake packet after the handshake
		return nil
	}
	err := r.reader.Read(data, 0, c.recv, c.replay, &p) // no token: no expiry to check
	c.rmu.Unlock()
	if err != nil {
		if err == protocol.ErrReplayed {
			s.stats.replayed.Add(1)
		} else {
			s.stats.ignored.Add(1)
		}
		return nil
	}
	c.lastRecv.Store(s.mono(now))
	switch p.Type {
	case protocol.KeepAlive:
		c.confirm()
	case protocol.Payload:
		c.confirm()
		c.queue.Push(netip.AddrPort{}, p.Payload)
	case protocol.Disconnect:
		s.end(c, ReasonPeerDisconnected, out, false)
	}
	return nil
}

// Why requests are refused, as the log records name it.
const (
	refusedKey         = "the private connect token does not decrypt: the token was minted with another private key"
	refusedProtocolID  = "wrong protocol id"
	refusedExpired     = "the connect token expired"
	refusedInvalid     = "the private connect token is malformed"
	refusedNotInToken  = "the token's server list does not name this server"
	refusedReusedHere  = "the connect token was already connected with, from this address (netcode allows one connection per token)"
	refusedReusedThere = "the connect token is in use from another address"
	refusedHistoryFull = "the token history is full"
	refusedIDConnected = "a client with this client id is connected"
)

// refusedMsg is the message of every refusal's log record; why tells the
// reason.
const refusedMsg = "netcode: connection request refused"

// requestRefusal names why a connection request failed to read, or ""
// for a datagram too malformed to name (not logged).
func requestRefusal(err error) string {
	switch {
	case errors.Is(err, protocol.ErrDecrypt):
		return refusedKey
	case errors.Is(err, protocol.ErrProtocolID):
		return refusedProtocolID
	case errors.Is(err, protocol.ErrExpired):
		return refusedExpired
	}
	return ""
}

// refuse records that a request from addr was refused for why, at Debug,
// if this Receiver has not logged a refusal of addr this second (and has
// logged fewer than refusalsPerSecond refusals in all this second).
func (r *Receiver) refuse(now time.Time, addr netip.AddrPort, why string, out *Output) {
	if r.refusals.allow(addr, r.s.mono(now)/int64(time.Second)) {
		out.record(slog.LevelDebug, refusedMsg, addr, why)
	}
}

// request processes a connection request. The private token is opened
// before any lock is taken; the tables are consulted and changed under the
// server's lock; the challenge is sealed after it, under the client's send
// lock.
func (r *Receiver) request(now time.Time, from netip.AddrPort, data []byte, out *Output) {
	s := r.s
	wall := s.wall(now)
	var p protocol.Packet
	if err := r.reader.Read(data, unixSeconds(wall), nil, nil, &p); err != nil {
		s.stats.ignored.Add(1)
		if why := requestRefusal(err); why != "" {
			r.refuse(now, from, why, out)
		}
		return
	}
	// The token's MAC, the last 16 bytes of the datagram (in-place
	// decryption leaves it), identifies the token in the history.
	var mac [crypto.MACBytes]byte
	copy(mac[:], data[len(data)-crypto.MACBytes:])
	priv := &r.priv
	if err := tokenwire.ParsePrivate(p.PrivateToken, priv); err != nil {
		s.stats.ignored.Add(1)
		r.refuse(now, from, refusedInvalid, out)
		return
	}
	if len(s.cfg.Addrs) > 0 && !s.knowsAny(priv.ServerAddrs) {
		s.stats.addressNotInToken.Add(1)
		r.refuse(now, from, refusedNotInToken, out)
		return
	}

	mono := s.mono(now)
	s.mu.Lock()
	s.sweepHandshakes(mono) // O(what expired): none outlives its timeout
	c := s.byAddr[from]
	switch {
	case s.closed:
		s.mu.Unlock()
		return
	case c != nil && c.live.Load():
		s.mu.Unlock()
		s.stats.ignored.Add(1) // already connected from this address: a late resend
		return
	case s.byID[priv.ClientID] != nil:
		s.mu.Unlock()
		s.stats.ignored.Add(1) // this client id is connected (from elsewhere)
		r.refuse(now, from, refusedIDConnected, out)
		return
	case !r.checkToken(now, wall, &mac, from, out):
		s.mu.Unlock()
		return
	}
	full := len(s.free) == 0 || s.draining.Load()
	if full {
		// Full or draining: say so, keeping no state. The denial is
		// smaller than the request, and sealed with the token's key so
		// only its holder can read it.
		seq := s.globalSeq
		s.globalSeq++
		s.mu.Unlock()
		s.stats.deniedSent.Add(1)
		key := crypto.NewPacketAEAD(&priv.ServerToClientKey, s.cfg.ProtocolID)
		start := out.Mark(outputBuf)
		out.Buf = protocol.AppendDenied(out.Buf, key, seq)
		out.Push(from, start)
		return
	}
	if c == nil || c.c2s != priv.ClientToServerKey || c.s2c != priv.ServerToClientKey {
		if c != nil {
			s.dropHandshake(c) // another token's handshake from this address
		}
		if len(s.byAddr) >= s.maxMaps {
			// Full, so mostly of handshakes in progress: connections
			// hold at most one mapping in MappingsPerSlot. The oldest
			// handshake makes room, so that no flood holds the table
			// (see handshakes).
			s.stats.mappingsFull.Add(1)
			s.dropHandshake(s.handshakes.head)
		}
		c = &Client{
			srv:     s,
			addr:    from,
			c2s:     priv.ClientToServerKey,
			s2c:     priv.ServerToClientKey,
			recv:    crypto.NewPacketAEAD(&priv.ClientToServerKey, s.cfg.ProtocolID),
			replay:  new(protocol.ReplayProtection),
			expire:  p.ExpireTimestamp,
			timeout: time.Duration(priv.TimeoutSeconds) * time.Second,
		}
		c.sendLocked.send = *crypto.NewPacketAEAD(&priv.ServerToClientKey, s.cfg.ProtocolID)
		c.lastRecv.Store(mono)
		c.tokenMAC = mac
		s.byAddr[from] = c
		s.handshakes.push(c, mono)
	}
	seq, chSeq := s.globalSeq, s.challengeSeq
	s.globalSeq++
	s.challengeSeq++
	s.mu.Unlock()

	s.stats.challengesSent.Add(1)
	ch := tokenwire.Challenge{ClientID: priv.ClientID, UserData: priv.UserData}
	sealed := tokenwire.AppendChallenge(r.chTok[:0], r.challenge, chSeq, &ch)
	c.sealChallenge(seq, chSeq, sealed, out)
}

// response processes a packet from an address in the handshake: only a
// connection response that opens under its keys and carries a valid
// challenge token completes it.
func (r *Receiver) response(now time.Time, c *Client, data []byte, out *Output) *Client {
	s := r.s
	if protocol.PacketType(data[0]&0x0f) != protocol.ConnectionResponse {
		s.stats.ignored.Add(1)
		return nil
	}
	var p protocol.Packet
	var ch tokenwire.Challenge
	c.rmu.Lock()
	err := r.reader.Read(data, 0, c.recv, nil, &p)
	if err == nil {
		err = tokenwire.OpenChallenge(r.challenge, p.ChallengeSequence, p.ChallengeToken, &ch)
	}
	c.rmu.Unlock()
	if err != nil {
		s.stats.ignored.Add(1)
		return nil
	}

	mono := s.mono(now)
	s.mu.Lock()
	if s.closed || s.byAddr[c.addr] != c || c.live.Load() || s.byID[ch.ClientID] != nil {
		s.mu.Unlock()
		s.stats.ignored.Add(1) // replaced, or already connected
		return nil
	}
	c.lastRecv.Store(mono)
	sec := unixSeconds(s.wall(now))
	if c.expire <= sec {
		s.mu.Unlock()
		s.stats.ignored.Add(1) // the token expired since the request
		return nil
	}
	if e := s.history.Find(&c.tokenMAC); e != nil {
		// Connected with already, from here or elsewhere, since this
		// handshake began.
		count := !e.Value.counted
		e.Value.counted = true
		s.mu.Unlock()
		if count {
			s.stats.tokenReuseRefused.Add(1)
		} else {
			s.stats.ignored.Add(1)
		}
		return nil
	}
	if len(s.free) == 0 || s.draining.Load() {
		seq := s.globalSeq
		s.globalSeq++
		s.mu.Unlock()
		s.stats.deniedSent.Add(1)
		c.sealDenied(seq, out)
		return nil
	}
	// The client proved it holds the token's keys: the token is recorded
	// now, and connects.
	s.history.Expire(sec)
	if s.history.Add(&c.tokenMAC, c.expire, tokenUse{addr: c.addr}) == nil {
		s.mu.Unlock()
		s.stats.historyFull.Add(1)
		r.refuse(now, c.addr, refusedHistoryFull, out)
		return nil
	}
	idx := s.popSlot()
	c.index = idx
	c.id = ch.ClientID
	c.userData = ch.UserData
	c.queue = packetq.NewCounted(s.cfg.ReadQueue, &s.stats.payloadsDropped)
	c.sendLocked.seq = s.connectionSequence(s.wall(now))
	c.sendLocked.lastSend.Store(mono)
	s.slots[idx] = c
	s.byID[c.id] = c
	c.live.Store(true)
	s.handshakes.remove(c)
	s.wheel.mu.Lock()
	s.wheel.file(c, c.deadline())
	s.wheel.mu.Unlock()
	s.mu.Unlock()

	s.stats.connectionsOpened.Add(1)
	out.recordClient(slog.LevelDebug, "netcode: client connected", c, "")
	c.keepAlive(mono, out, true)
	return c
}

// MappingsPerSlot is how many encryption mappings (handshakes in progress
// and connections) the server holds per client slot. A request that needs
// one more drops the oldest handshake in progress to make room, and is
// counted in Stats.MappingsFull (see handshakes).
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

// checkToken tells whether a connection request with the token whose MAC
// is mac may go on to a challenge, or refuses it, counts and logs why;
// s.mu is held.
//
// A token is good for one connection, and is remembered from the moment
// it connects until it expires: a token connected with never connects
// again to this server, whatever else arrives. A reuse is counted once per
// token (not per resent request) and logged once per token and kind (from
// its own address, from another). While its handshake is in progress, a
// token is good for that handshake's address only, until the handshake
// ends (HandshakeTimeout at most).
//
// A token is recorded only when the client answers the challenge with
// the token's keys (Receiver.response), not at the request: so only a
// client that holds a token's keys and completes the handshake can make
// the history remember the token, and a flood of requests, however many
// valid tokens it holds, fills no history. Recording later reopens no
// reuse: every packet the server seals before the connection (challenges,
// denials) takes a fresh global sequence, whatever the token; a token
// connects once, by the first response that completes its handshake, under
// the lock that records it; and a request or a response with a recorded
// token is refused. The C reference records a token at the request (and
// evicts the oldest when its table is full); a request replayed by an
// on-path attacker from another address then holds the token there for
// good, where here it holds it for one handshake timeout.
//
// When the history is full, new tokens are refused rather than old ones
// forgotten: here, before a mapping is made for a request whose response
// could not be recorded.
//
// A token already connected with is refused even from the address it was
// first used from. The C reference accepts it again there once the session
// has ended; but a reference client starts its packet sequence at 0 on
// every connection, so that second session would seal its packets under
// the first one's keys and nonces.
func (r *Receiver) checkToken(now, wall time.Time, mac *[crypto.MACBytes]byte, from netip.AddrPort, out *Output) bool {
	s := r.s
	if e := s.history.Find(mac); e != nil {
		if !e.Value.counted {
			e.Value.counted = true
			s.stats.tokenReuseRefused.Add(1)
		}
		switch {
		case e.Value.addr == from && !e.Value.loggedHere:
			// The likeliest mistake, a client run twice with one token,
			// is said at Info.
			e.Value.loggedHere = true
			out.record(slog.LevelInfo, refusedMsg, from, refusedReusedHere)
		case e.Value.addr != from && !e.Value.loggedElsewhere:
			e.Value.loggedElsewhere = true
			out.record(slog.LevelDebug, refusedMsg, from, refusedReusedThere)
		}
		return false
	}
	if c := s.handshakes.byToken[*mac]; c != nil && c.addr != from {
		if !c.hs.reuseCounted {
			c.hs.reuseCounted = true
			s.stats.tokenReuseRefused.Add(1)
		}
		if !c.hs.reuseLogged {
			c.hs.reuseLogged = true
			out.record(slog.LevelDebug, refusedMsg, from, refusedReusedThere)
		}
		return false
	}
	s.history.Expire(unixSeconds(wall))
	if s.history.Len() >= s.history.Limit() {
		s.stats.historyFull.Add(1)
		r.refuse(now, from, refusedHistoryFull, out)
		return false
	}
	return true
}

// refusalLog limits a Receiver's refusal records to one per address and
// second, and refusalsPerSecond in all per second: hostile input can make
// many, each from a new address. It remembers the last address logged in
// each of refusalSlots slots (by a hash of the address); an address that
// shares a slot with another may be logged again within the second.
type refusalLog struct {
	sec  int64 // the second of n
	n    int   // records allowed in second sec
	last [refusalSlots]struct {
		addr netip.AddrPort
		sec  int64
	}
}

const (
	refusalSlots      = 256
	refusalsPerSecond = 64
)

// allow reports whether a refusal of addr in second sec (monotonic) may be
// logged, and notes it if so.
func (l *refusalLog) allow(addr netip.AddrPort, sec int64) bool {
	if sec != l.sec {
		l.sec, l.n = sec, 0
	}
	if l.n >= refusalsPerSecond {
		return false
	}
	b := addr.Addr().As16()
	h := binary.LittleEndian.Uint64(b[:8])*0x9e3779b97f4a7c15 ^ binary.LittleEndian.Uint64(b[8:])*0xc2b2ae3d27d4eb4f ^ uint64(addr.Port())
	e := &l.last[(h^h>>32)%refusalSlots]
	if e.addr == addr && e.sec == sec {
		return false
	}
	e.addr, e.sec = addr, sec
	l.n++
	return true
}
