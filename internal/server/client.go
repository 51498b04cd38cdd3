package server

import (
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/packetq"
	"github.com/gonetcode/netcode/protocol"
	"github.com/gonetcode/netcode/token"
)

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
	lastRecv  atomic.Int64 // monotonic ns (Server.mono) of the last packet received
	confirmed atomic.Bool  // a keep-alive or payload arrived
	rmu       sync.Mutex   // guards recv and replay
	recv      *crypto.PacketAEAD
	replay    *protocol.ReplayProtection

	// Set under srv.mu by the request that made or renewed the mapping.
	c2s, s2c crypto.Key
	expire   uint64 // token expire timestamp (Unix seconds, wall clock)
	tokenMAC [crypto.MACBytes]byte
	hs       handshakeLink // its place among the half-open handshakes

	// Set under srv.mu when the handshake completes; read-only after.
	id       uint64
	userData [token.UserDataBytes]byte
	loopback bool // a loopback client: no address, keys or packets
	queue    *packetq.Queue
	peer     *packetq.Queue // a loopback client's own end

	reason atomic.Int32 // why it left, once it has
}

// sendState is a client's send side, all of it read for every keep-alive.
// Its lock is held only while packets are sealed into an Output.
type sendState struct {
	mu       sync.Mutex
	closed   atomic.Bool // no more packets; set under mu, or alone by a timeout
	seq      uint64
	lastSend atomic.Int64 // monotonic ns; read without mu by Update
	send     crypto.PacketAEAD
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
// client has not yet confirmed the connection) and appends it to
// out.Datagrams. now is the current time, for keep-alive scheduling. A
// loopback client's payloads are pushed to its LoopbackQueue instead.
func (c *Client) Send(now time.Time, payload []byte, out *Output) error {
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
	if s.closed.Load() {
		return ErrClientGone
	}
	if !c.confirmed.Load() {
		start := out.Mark(outputBuf)
		out.Buf = protocol.AppendKeepAlive(out.Buf, &s.send, s.seq, uint32(c.index), uint32(c.srv.maxClients))
		out.Push(c.addr, start)
		s.seq++
	}
	start := out.Mark(outputBuf)
	out.Buf = protocol.AppendPayload(out.Buf, &s.send, s.seq, payload)
	out.Push(c.addr, start)
	s.seq++
	s.lastSend.Store(c.srv.mono(now))
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

// keepAlive seals a keep-alive into out if nothing was sent for
// KeepAliveInterval (or at once, with force). mono is now on the server's
// monotonic clock.
func (c *Client) keepAlive(mono int64, out *Output, force bool) {
	s := &c.sendLocked
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() || (!force && mono-s.lastSend.Load() < int64(KeepAliveInterval)) {
		return
	}
	start := out.Mark(outputBuf)
	out.Buf = protocol.AppendKeepAlive(out.Buf, &s.send, s.seq, uint32(c.index), uint32(c.srv.maxClients))
	out.Push(c.addr, start)
	s.seq++
	s.lastSend.Store(mono)
}

// shut stops sends; with out, it first seals the redundant disconnects
// into it.
func (c *Client) shut(out *Output) {
	s := &c.sendLocked
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return
	}
	if out != nil && !c.loopback {
		for range DisconnectPackets {
			start := out.Mark(outputBuf)
			out.Buf = protocol.AppendDisconnect(out.Buf, &s.send, s.seq)
			out.Push(c.addr, start)
			s.seq++
		}
	}
	s.closed.Store(true)
}

// sealChallenge seals a challenge to c's address into out, under c's send
// lock. The sequence was handed out under the server's lock.
func (c *Client) sealChallenge(seq, challengeSeq uint64, sealedToken []byte, out *Output) {
	s := &c.sendLocked
	s.mu.Lock()
	defer s.mu.Unlock()
	start := out.Mark(outputBuf)
	out.Buf = protocol.AppendChallenge(out.Buf, &s.send, seq, challengeSeq, sealedToken)
	out.Push(c.addr, start)
}

// sealDenied seals a denial to c's address into out, under c's send lock.
func (c *Client) sealDenied(seq uint64, out *Output) {
	s := &c.sendLocked
	s.mu.Lock()
	defer s.mu.Unlock()
	start := out.Mark(outputBuf)
	out.Buf = protocol.AppendDenied(out.Buf, &s.send, seq)
	out.Push(c.addr, start)
}
