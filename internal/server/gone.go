package server

import (
	"net/netip"
	"time"

	"github.com/gonetcode/netcode/protocol"
)

// Reminding kicked clients. When the server ends a connection right after
// accepting it, its disconnect packets can reach the client while it is
// still in "sending connection response", where the reference client ignores
// them; a keep-alive delayed behind them then connects it to a server that
// has forgotten it, and it times out seconds later. (This module's client
// accepts those disconnects; a reference client does not.) So for a short
// while after a kick the server keeps the client's keys, and answers each
// authenticated keep-alive or payload from its address (the packets of a
// client that believes it is connected) with one more disconnect packet:
// at most goneReplies of them, never one larger than the packet answered,
// only until the client would have timed out anyway, and for at most
// MaxClients kicked clients at once. The packets continue the connection's
// own sequence, so no nonce is used twice. Connection responses are not
// answered: a reference client ignores disconnects while it sends them.

// goneReplies bounds the reminders sent to one kicked client.
const goneReplies = DisconnectPackets

// goneGrace is added to the client's timeout (or to goneDefaultWindow when
// it has none) for the packets in flight.
const (
	goneGrace         = time.Second
	goneDefaultWindow = 5 * time.Second
)

type goneClient struct {
	c       *Client
	expire  int64 // monotonic ns
	replies int
}

// goneClients is a bounded FIFO of recently kicked clients, found by
// address. Guarded by Server.mu.
type goneClients struct {
	byAddr map[netip.AddrPort]*goneClient
	ring   []*goneClient // capacity MaxClients, allocated on first use
	start  int
	n      int
}

// add remembers c, which the server just kicked. It forgets the oldest
// entries when they have expired or the ring is full.
func (g *goneClients) add(c *Client, capacity int) {
	window := c.timeout
	if window <= 0 {
		window = goneDefaultWindow
	}
	// c.lastRecv is the latest time the server knows of here (Disconnect
	// takes none); it is at most a keep-alive interval behind a live
	// client's now.
	now := c.lastRecv.Load()
	e := &goneClient{c: c, expire: now + int64(window+goneGrace), replies: goneReplies}
	if g.ring == nil {
		g.ring = make([]*goneClient, capacity)
		g.byAddr = make(map[netip.AddrPort]*goneClient)
	}
	for g.n > 0 && (g.n == len(g.ring) || g.ring[g.start].expire <= now) {
		g.pop()
	}
	g.ring[(g.start+g.n)%len(g.ring)] = e
	g.n++
	g.byAddr[c.addr] = e
}

func (g *goneClients) pop() {
	e := g.ring[g.start]
	g.ring[g.start] = nil
	g.start = (g.start + 1) % len(g.ring)
	g.n--
	if g.byAddr[e.c.addr] == e {
		delete(g.byAddr, e.c.addr)
	}
}

// answerGone answers a packet from an address without an encryption
// mapping, if the address is a recently kicked client's and the packet is
// authenticated with its key, fresh by its replay window, and a
// keep-alive or payload. It reports whether it sealed a disconnect packet
// into out.
// data is decrypted in place, under the client's receive lock; the
// reminder is sealed under its send lock; the server's lock is held only
// to find the entry and to take one reply from its budget.
func (r *Receiver) answerGone(now time.Time, from netip.AddrPort, data []byte, out *Output) bool {
	s := r.s
	s.mu.RLock()
	e := s.gone.byAddr[from]
	s.mu.RUnlock()
	if e == nil || s.mono(now) >= e.expire {
		return false
	}
	size := len(data)
	var p protocol.Packet
	c := e.c
	c.rmu.Lock()
	err := r.reader.Read(data, 0, c.recv, c.replay, &p)
	c.rmu.Unlock()
	if err != nil {
		return false
	}
	switch p.Type {
	case protocol.KeepAlive, protocol.Payload:
	default:
		return false
	}
	s.mu.Lock()
	ok := e.replies > 0
	if ok {
		e.replies--
	}
	s.mu.Unlock()
	return ok && c.remindDisconnect(out, size)
}

// remindDisconnect seals one more disconnect packet into out after the
// connection ended, in its sequence, if it is no larger than limit bytes.
func (c *Client) remindDisconnect(out *Output, limit int) bool {
	s := &c.sendLocked
	s.mu.Lock()
	defer s.mu.Unlock()
	start := out.Mark(outputBuf)
	out.Buf = protocol.AppendDisconnect(out.Buf, &s.send, s.seq)
	if len(out.Buf)-start > limit {
		out.Buf = out.Buf[:start]
		return false
	}
	out.Push(c.addr, start)
	s.seq++
	return true
}
