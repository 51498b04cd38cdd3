package server

import (
	"time"

	"github.com/gonetcode/netcode/crypto"
)

// HandshakeTimeout is the longest a handshake may stay half-open: from
// the connection request that made its encryption mapping to the
// connection response that completes it. It runs from that first request
// and is not renewed by the requests sent again, so a flood that keeps
// resending its requests holds no mapping longer than this (a full table
// drops the oldest sooner: see handshakes). It is the same for every
// handshake, whatever its token's timeout, so that the oldest handshake is
// always the first to expire; it is long enough for a response that waits
// seconds in the queues of a server under load (a mapping that expires
// before its response is read fails the handshake).
const HandshakeTimeout = 10 * time.Second

// handshakes are the encryption mappings whose handshake is in progress
// (half-open), oldest first, and by token: a token is in at most one
// handshake at a time. Server.mu guards it.
//
// A handshake ends when it completes, when its HandshakeTimeout passes
// (Update's sweep walks from the oldest and stops at the first that is
// still due, so its work follows what expires), or when the mapping table
// is full and a new connection request needs the room: the oldest
// handshake in progress is then dropped. Dropping a handshake is safe (its
// client sends its request again, and its token was not recorded yet:
// see Receiver.recordToken); refusing the new request would let a flood of
// valid requests hold every mapping. So a flood of R valid requests per
// second leaves each handshake MappingsPerSlot × MaxClients / R to
// complete: 100 ms at 10,000 requests per second against 1,024 mappings,
// where a legitimate client needs one round trip.
type handshakes struct {
	head, tail *Client
	n          int
	byToken    map[[crypto.MACBytes]byte]*Client
}

// handshakeLink is a Client's place in the handshakes, set under
// Server.mu while its handshake is in progress.
type handshakeLink struct {
	prev, next *Client
	in         bool
	due        int64 // monotonic ns at which the half-open handshake expires
	// reuseCounted and reuseLogged: a request for its token from another
	// address was counted (Stats.TokenReuseRefused) and logged.
	reuseCounted, reuseLogged bool
}

// push files c, just made by a request at mono, as the newest handshake.
func (h *handshakes) push(c *Client, mono int64) {
	l := &c.hs
	*l = handshakeLink{in: true, due: mono + int64(HandshakeTimeout), prev: h.tail}
	if h.tail != nil {
		h.tail.hs.next = c
	} else {
		h.head = c
	}
	h.tail = c
	h.n++
	if h.byToken == nil {
		h.byToken = make(map[[crypto.MACBytes]byte]*Client)
	}
	h.byToken[c.tokenMAC] = c
}

// remove takes c out, if it is in.
func (h *handshakes) remove(c *Client) {
	l := &c.hs
	if !l.in {
		return
	}
	if l.prev != nil {
		l.prev.hs.next = l.next
	} else {
		h.head = l.next
	}
	if l.next != nil {
		l.next.hs.prev = l.prev
	} else {
		h.tail = l.prev
	}
	if h.byToken[c.tokenMAC] == c {
		delete(h.byToken, c.tokenMAC)
	}
	*l = handshakeLink{}
	h.n--
}

// clear forgets every handshake.
func (h *handshakes) clear() {
	for c := h.head; c != nil; {
		next := c.hs.next
		c.hs = handshakeLink{}
		c = next
	}
	*h = handshakes{byToken: h.byToken}
	clear(h.byToken)
}

// dropHandshake forgets the half-open handshake c and its mapping; s.mu
// is held.
func (s *Server) dropHandshake(c *Client) {
	s.handshakes.remove(c)
	if s.byAddr[c.addr] == c {
		delete(s.byAddr, c.addr)
	}
}

// sweepHandshakes forgets the half-open handshakes whose HandshakeTimeout
// passed by mono; s.mu is held. It walks from the oldest and stops at the
// first still in time: its time under the lock every reader takes follows
// what expires, not the handshakes in progress nor the connections.
func (s *Server) sweepHandshakes(mono int64) {
	for c := s.handshakes.head; c != nil && c.hs.due <= mono; c = s.handshakes.head {
		s.dropHandshake(c)
	}
}
