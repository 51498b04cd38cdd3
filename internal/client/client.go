// Package client is the I/O-free netcode 1.02 client: the connection state
// machine with its numbered states, fallback through the token's servers,
// keep-alives and timeouts. It owns no goroutine, socket or clock: the adapter
// feeds it datagrams and the current time, and it answers through a Sink and
// reports through a Handler.
//
// All methods are safe for concurrent use; they serialise on one mutex, and
// Handler methods run with it held (they must not call back into the Client).
package client

import (
	"encoding/binary"
	"errors"
	"log/slog"
	"math"
	"net/netip"
	"sync"
	"time"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/protocol"
	"github.com/gonetcode/netcode/token"
)

// Protocol timing, as in the reference implementation.
const (
	// SendInterval is the rate of connection requests, responses and
	// keep-alives (10 Hz).
	SendInterval = 100 * time.Millisecond
	// DisconnectPackets is how many redundant disconnect packets the client
	// sends when it disconnects.
	DisconnectPackets = 10
)

// State is the client's state; the numbers are the reference's.
type State int

// The client states. Negative states are errors and final.
const (
	ConnectTokenExpired        State = -6
	InvalidConnectToken        State = -5
	ConnectionTimedOut         State = -4
	ConnectionResponseTimedOut State = -3
	ConnectionRequestTimedOut  State = -2
	ConnectionDenied           State = -1
	Disconnected               State = 0
	SendingConnectionRequest   State = 1
	SendingConnectionResponse  State = 2
	Connected                  State = 3
)

// String names the state as the reference does in its logs.
func (s State) String() string {
	switch s {
	case ConnectTokenExpired:
		return "connect token expired"
	case InvalidConnectToken:
		return "invalid connect token"
	case ConnectionTimedOut:
		return "connection timed out"
	case ConnectionResponseTimedOut:
		return "connection response timed out"
	case ConnectionRequestTimedOut:
		return "connection request timed out"
	case ConnectionDenied:
		return "connection denied"
	case Disconnected:
		return "disconnected"
	case SendingConnectionRequest:
		return "sending connection request"
	case SendingConnectionResponse:
		return "sending connection response"
	case Connected:
		return "connected"
	}
	return "unknown"
}

// Errors returned by Send.
var (
	ErrNotConnected = errors.New("netcode/client: not connected")
	ErrPayloadSize  = errors.New("netcode/client: payload must be 1 to 1200 bytes")
)

// Sink sends datagrams. Send must have finished with b when it returns.
type Sink interface {
	Send(to netip.AddrPort, b []byte)
}

// Handler receives the client's events, with the client's mutex held.
type Handler interface {
	// StateChanged reports every change of state.
	StateChanged(from, to State)
	// Payload delivers one payload; p is valid only during the call.
	Payload(p []byte)
}

// Client is the netcode client state machine for one connect token.
type Client struct {
	mu      sync.Mutex
	h       Handler
	log     *slog.Logger
	tok     *token.ConnectToken
	servers []netip.AddrPort
	server  int

	state      State
	pending    State // error state to enter at the next Update (denied)
	send, recv *crypto.PacketAEAD
	reader     protocol.Reader
	replay     protocol.ReplayProtection
	seq        uint64

	expireAfter  time.Duration // connect token lifetime: expire - create
	timeout      time.Duration // <= 0: none
	connectStart time.Time
	lastSend     time.Time
	lastRecv     time.Time

	challengeSeq   uint64
	challengeToken [token.ChallengeTokenBytes]byte
	clientIndex    int
	maxClients     int

	buf [protocol.MaxPacketBytes + 64]byte
}

// New starts connecting with connectToken at time now. An unreadable token
// leaves the client in InvalidConnectToken; State tells.
func New(now time.Time, connectToken []byte, h Handler, log *slog.Logger) *Client {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Client{h: h, log: log, state: Disconnected}
	tok, err := token.Parse(connectToken)
	if err != nil {
		log.Debug("netcode: invalid connect token", "err", err)
		c.setState(InvalidConnectToken)
		return c
	}
	c.tok = tok
	c.servers = make([]netip.AddrPort, len(tok.ServerAddrs))
	for i, a := range tok.ServerAddrs {
		c.servers[i] = netip.AddrPortFrom(a.Addr().Unmap(), a.Port())
	}
	c.send = crypto.NewPacketAEAD(&tok.ClientToServerKey, tok.ProtocolID)
	c.recv = crypto.NewPacketAEAD(&tok.ServerToClientKey, tok.ProtocolID)
	c.reader = protocol.Reader{ProtocolID: tok.ProtocolID, Allowed: protocol.ClientAccepts}
	secs := tok.ExpireTimestamp - tok.CreateTimestamp
	if secs > math.MaxInt64/uint64(time.Second) {
		c.expireAfter = math.MaxInt64
	} else {
		c.expireAfter = time.Duration(secs) * time.Second
	}
	if tok.TimeoutSeconds > 0 {
		c.timeout = time.Duration(tok.TimeoutSeconds) * time.Second
	}
	c.connectStart = now
	c.seq = firstSequence(now, tok.CreateTimestamp)
	c.startServer(now)
	return c
}

// maxTimeSequence bounds the clock-derived first sequence number (about 12
// days of microseconds, five bytes on the wire).
const maxTimeSequence = 1 << 40

// firstSequence picks the client's first packet sequence number. The
// reference starts at 0, so dialing the same token twice (a retry, or a
// reconnect to a restarted server, which no longer remembers the token)
// seals different packets under the same key and nonce. Starting at the
// microseconds elapsed since the token was created keeps every dial of a
// token above all sequence numbers an earlier dial of it can have used, as
// no client sends a packet per microsecond. A clock that puts the creation
// in the future or weeks in the past gives no such order; a random start
// then makes a collision unlikely instead of certain.
func firstSequence(now time.Time, createTimestamp uint64) uint64 {
	if createTimestamp <= math.MaxInt64/uint64(time.Second) {
		elapsed := now.Sub(time.Unix(int64(createTimestamp), 0))
		if us := elapsed.Microseconds(); elapsed >= 0 && us < maxTimeSequence {
			return uint64(us)
		}
	}
	var b [8]byte
	if crypto.RandomBytes(b[:5]) != nil {
		return 0
	}
	return binary.LittleEndian.Uint64(b[:])
}

// SetSequence sets the sequence number of the next packet the client
// sends. It is for tests and tools that reproduce the reference's packets,
// which start at 0; call it before the first Update.
func (c *Client) SetSequence(seq uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq = seq
}

// startServer begins the handshake with c.servers[c.server]. The packet
// sequence is not reset: the keys are the same for every server in the
// token, so a fresh count would reuse nonces.
func (c *Client) startServer(now time.Time) {
	c.replay.Reset()
	c.pending = Disconnected
	c.challengeSeq = 0
	c.clientIndex, c.maxClients = 0, 0
	c.lastSend = now.Add(-time.Second) // send at once
	c.lastRecv = now
	c.log.Debug("netcode: connecting", "server", c.servers[c.server])
	c.setState(SendingConnectionRequest)
}

// nextServer moves to the next server in the token, if any.
func (c *Client) nextServer(now time.Time) bool {
	if c.server+1 >= len(c.servers) {
		return false
	}
	c.server++
	c.startServer(now)
	return true
}

func (c *Client) setState(s State) {
	if s == c.state {
		return
	}
	old := c.state
	c.state = s
	c.log.Debug("netcode: client state", "from", old.String(), "to", s.String())
	if c.h != nil {
		c.h.StateChanged(old, s)
	}
}

// State returns the current state.
func (c *Client) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// ServerAddr returns the address of the server being tried or connected.
func (c *Client) ServerAddr() netip.AddrPort {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tok == nil {
		return netip.AddrPort{}
	}
	return c.servers[c.server]
}

// ServerAddrs returns every server address in the token, in order.
func (c *Client) ServerAddrs() []netip.AddrPort {
	return c.servers
}

// ClientIndex and MaxClients are what the server said in its first
// keep-alive; valid once connected.
func (c *Client) ClientIndex() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clientIndex
}

// MaxClients is the server's slot count, valid once connected.
func (c *Client) MaxClients() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.maxClients
}

// ClientToServerKey and the token fields are exposed for tools.
func (c *Client) Token() *token.ConnectToken { return c.tok }

// Receive processes one datagram. Datagrams from anywhere but the current
// server are ignored. data is decrypted in place.
func (c *Client) Receive(now time.Time, from netip.AddrPort, data []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state <= Disconnected || from != c.servers[c.server] {
		return
	}
	var p protocol.Packet
	if err := c.reader.Read(data, 0, c.recv, &c.replay, &p); err != nil {
		return
	}
	switch p.Type {
	case protocol.ConnectionDenied:
		if c.state == SendingConnectionRequest || c.state == SendingConnectionResponse {
			c.pending = ConnectionDenied
			c.lastRecv = now
		}
	case protocol.ConnectionChallenge:
		if c.state == SendingConnectionRequest && len(p.ChallengeToken) == token.ChallengeTokenBytes {
			c.challengeSeq = p.ChallengeSequence
			copy(c.challengeToken[:], p.ChallengeToken)
			c.lastRecv = now
			c.lastSend = now.Add(-time.Second) // answer at the next Update
			c.setState(SendingConnectionResponse)
		}
	case protocol.KeepAlive:
		switch c.state {
		case Connected:
			c.lastRecv = now
		case SendingConnectionResponse:
			c.clientIndex = int(p.ClientIndex)
			c.maxClients = int(p.MaxClients)
			c.lastRecv = now
			// The server gave us a slot: a denial that arrived earlier
			// (an answer to an older response, reordered on the way) is
			// stale and must not send us on to the next server.
			c.pending = Disconnected
			c.setState(Connected)
		}
	case protocol.Payload:
		if c.state == Connected {
			c.lastRecv = now
			if c.h != nil {
				c.h.Payload(p.Payload)
			}
		}
	case protocol.Disconnect:
		// In Connected, as the reference. In SendingConnectionResponse
		// too, which the reference ignores: the server sends disconnects
		// only to a connection it accepted, so one that arrives before
		// any keep-alive means we were accepted and at once kicked (or
		// the server closed). Ignoring it would let a keep-alive delayed
		// behind it move us to Connected with a server that has
		// forgotten us, to time out long after. The packet is sealed
		// with the token's server-to-client key and passed the replay
		// check, exactly as a keep-alive must to connect us; the wire
		// format is the reference's.
		if c.state == Connected || c.state == SendingConnectionResponse {
			c.lastRecv = now
			c.pending = Disconnected
			c.setState(Disconnected)
		}
	}
}

// Update sends what is due and applies the timeouts. Call it often (every
// 10 ms or so).
func (c *Client) Update(now time.Time, sink Sink) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state <= Disconnected {
		return
	}
	if c.pending != Disconnected && c.state < Connected {
		failed := c.pending
		if !c.nextServer(now) {
			c.setState(failed)
		}
		return
	}
	if c.state < Connected && now.Sub(c.connectStart) >= c.expireAfter {
		c.setState(ConnectTokenExpired)
		return
	}
	if c.timeout > 0 && now.Sub(c.lastRecv) >= c.timeout {
		switch c.state {
		case SendingConnectionRequest:
			if !c.nextServer(now) {
				c.setState(ConnectionRequestTimedOut)
			}
		case SendingConnectionResponse:
			if !c.nextServer(now) {
				c.setState(ConnectionResponseTimedOut)
			}
		case Connected:
			c.setState(ConnectionTimedOut)
		}
		return
	}
	if now.Sub(c.lastSend) < SendInterval {
		return
	}
	var pkt []byte
	switch c.state {
	case SendingConnectionRequest:
		pkt = protocol.AppendConnectionRequest(c.buf[:0], c.tok.ProtocolID, c.tok.ExpireTimestamp, &c.tok.Nonce, c.tok.PrivateData[:])
	case SendingConnectionResponse:
		pkt = protocol.AppendResponse(c.buf[:0], c.send, c.seq, c.challengeSeq, c.challengeToken[:])
	case Connected:
		pkt = protocol.AppendKeepAlive(c.buf[:0], c.send, c.seq, 0, 0)
	}
	c.seq++
	c.lastSend = now
	sink.Send(c.servers[c.server], pkt)
}

// Send seals payload into one packet to the server. It fails with
// ErrNotConnected unless the client is connected.
func (c *Client) Send(now time.Time, payload []byte, sink Sink) error {
	if len(payload) < 1 || len(payload) > protocol.MaxPayloadBytes {
		return ErrPayloadSize
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != Connected {
		return ErrNotConnected
	}
	pkt := protocol.AppendPayload(c.buf[:0], c.send, c.seq, payload)
	c.seq++
	c.lastSend = now
	sink.Send(c.servers[c.server], pkt)
	return nil
}

// Disconnect ends the connection: it sends the redundant disconnect packets
// (during the handshake too, as the reference does: the server may already
// have accepted the connection); the state becomes Disconnected. A client in
// an error state keeps it.
func (c *Client) Disconnect(sink Sink) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state <= Disconnected {
		return
	}
	if sink != nil {
		for range DisconnectPackets {
			pkt := protocol.AppendDisconnect(c.buf[:0], c.send, c.seq)
			c.seq++
			sink.Send(c.servers[c.server], pkt)
		}
	}
	c.setState(Disconnected)
}
