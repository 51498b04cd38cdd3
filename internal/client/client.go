// Package client is the I/O-free netcode 1.02 client: the connection state
// machine with its numbered states, fallback through the token's servers,
// keep-alives and timeouts. It owns no goroutine, socket or clock: the adapter
// feeds it datagrams and the current time, and each call reports what
// happened in an Output the caller passes in: the change of state, the
// payload received, the datagrams to send and when Update is due next. The
// adapter acts on the Output after the call returns, so none of its code
// runs under the Client's lock.
//
// All methods are safe for concurrent use; they serialise on one mutex,
// which is held only while the Client computes (no I/O, no callbacks).
package client

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"log/slog"
	"math"
	"net/netip"
	"sync"
	"time"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/tokenwire"
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

// Client is the netcode client state machine for one connect token.
type Client struct {
	mu      sync.Mutex
	log     *slog.Logger
	recs    []Record // made under mu, handed out by finish (or New)
	tok     *token.ConnectToken
	servers []netip.AddrPort
	server  int

	state      State
	pending    State // error state to enter at the next Update (denied)
	send, recv *crypto.PacketAEAD
	reader     protocol.Reader
	replay     protocol.ReplayProtection
	seq        uint64

	expireAfter time.Duration // connect token lifetime: expire - create
	timeout     time.Duration // <= 0: none
	// requestTimeout bounds the time until a server first answers a
	// connection request (answered); <= 0: none.
	requestTimeout time.Duration
	answered       bool
	connectStart   time.Time
	lastSend       time.Time
	lastRecv       time.Time

	challengeSeq   uint64
	challengeToken [tokenwire.ChallengeTokenBytes]byte
	clientIndex    int
	maxClients     int
}

// New starts connecting with connectToken at time now: the client is in
// SendingConnectionRequest, and the first request goes out at the first
// Update. An unreadable token leaves the client in InvalidConnectToken;
// State tells.
func New(now time.Time, connectToken []byte, log *slog.Logger) *Client {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Client{log: log, state: Disconnected}
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
	c.Log(&Output{Records: c.recs}) // no lock is held yet
	c.recs = c.recs[:0]
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
	if _, err := rand.Read(b[:5]); err != nil {
		return 0
	}
	return binary.LittleEndian.Uint64(b[:])
}

// SetRequestTimeout bounds the time the client sends connection requests
// before any of the token's servers answers one (with a challenge or a
// denial): past d from New, the client fails with
// ConnectionRequestTimedOut. A server answers only a token it can open, so
// this stops a forged token early, whatever timeout the token's public part
// claims. d <= 0 means no bound but the token's own. Call it before the
// first Update.
func (c *Client) SetRequestTimeout(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requestTimeout = d
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
	c.replay = protocol.ReplayProtection{}
	c.pending = Disconnected
	c.challengeSeq = 0
	c.clientIndex, c.maxClients = 0, 0
	c.lastSend = now.Add(-time.Second) // send at once
	c.lastRecv = now
	c.recs = append(c.recs, Record{Server: c.servers[c.server]})
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
	c.recs = append(c.recs, Record{From: c.state, To: s})
	c.state = s
}

// Log writes the log records of out to the Client's logger. Call it after
// the call that filled out, as the adapter does with the rest of it.
func (c *Client) Log(out *Output) {
	ctx := context.Background()
	if len(out.Records) == 0 || !c.log.Enabled(ctx, slog.LevelDebug) {
		return
	}
	for _, r := range out.Records {
		if r.Server.IsValid() {
			c.log.LogAttrs(ctx, slog.LevelDebug, "netcode: connecting", slog.String("server", r.Server.String()))
		} else {
			c.log.LogAttrs(ctx, slog.LevelDebug, "netcode: client state", slog.String("from", r.From.String()), slog.String("to", r.To.String()))
		}
	}
}

// begin takes the lock and starts out for a call; finish ends the call.
func (c *Client) begin(out *Output) {
	c.mu.Lock()
	out.reset(c.state)
}

// finish records the state the call leaves and when Update is due next,
// and releases the lock.
func (c *Client) finish(out *Output) {
	out.To = c.state
	out.Next = c.next()
	if len(c.recs) > 0 {
		out.Records = append(out.Records, c.recs...)
		clear(c.recs)
		c.recs = c.recs[:0]
	}
	c.mu.Unlock()
}

// next is when Update has something to do: the earliest of the next send,
// the timeout and the token's expiry, each due when Update's test of it
// first passes; the zero Time in a final state.
func (c *Client) next() time.Time {
	if c.state <= Disconnected {
		return time.Time{}
	}
	if c.pending != Disconnected && c.state < Connected {
		return c.lastRecv // a denial to act on: at once
	}
	next := c.lastSend.Add(SendInterval)
	if c.state < Connected {
		if t := c.connectStart.Add(c.expireAfter); t.Before(next) {
			next = t
		}
	}
	if c.requestTimeout > 0 && !c.answered {
		if t := c.connectStart.Add(c.requestTimeout); t.Before(next) {
			next = t
		}
	}
	if c.timeout > 0 {
		if t := c.lastRecv.Add(c.timeout); t.Before(next) {
			next = t
		}
	}
	return next
}

// Next returns when Update is due, as Output.Next does after a call.
func (c *Client) Next() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.next()
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

// Token returns the parsed connect token (nil if it was unreadable), for
// tools.
func (c *Client) Token() *token.ConnectToken { return c.tok }

// Receive processes one datagram; out tells what it did. Datagrams from
// anywhere but the current server are ignored. data is decrypted in place,
// and out.Payload is a slice of it.
func (c *Client) Receive(now time.Time, from netip.AddrPort, data []byte, out *Output) {
	c.begin(out)
	defer c.finish(out)
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
			c.answered = true
		}
	case protocol.ConnectionChallenge:
		if c.state == SendingConnectionRequest && len(p.ChallengeToken) == tokenwire.ChallengeTokenBytes {
			c.challengeSeq = p.ChallengeSequence
			copy(c.challengeToken[:], p.ChallengeToken)
			c.lastRecv = now
			c.lastSend = now.Add(-time.Second) // answer at the next Update
			c.answered = true
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
			out.Payload = p.Payload
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

// Update sends what is due and applies the timeouts; out tells what it did.
// Call it at out.Next (calling it earlier or more often is harmless).
func (c *Client) Update(now time.Time, out *Output) {
	c.begin(out)
	defer c.finish(out)
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
	if c.requestTimeout > 0 && !c.answered && now.Sub(c.connectStart) >= c.requestTimeout {
		c.setState(ConnectionRequestTimedOut)
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
	start := out.Mark(outputBuf)
	switch c.state {
	case SendingConnectionRequest:
		out.Buf = protocol.AppendConnectionRequest(out.Buf, c.tok.ProtocolID, c.tok.ExpireTimestamp, &c.tok.Nonce, c.tok.PrivateData[:])
	case SendingConnectionResponse:
		out.Buf = protocol.AppendResponse(out.Buf, c.send, c.seq, c.challengeSeq, c.challengeToken[:])
	case Connected:
		out.Buf = protocol.AppendKeepAlive(out.Buf, c.send, c.seq, 0, 0)
	}
	out.Push(c.servers[c.server], start)
	c.seq++
	c.lastSend = now
}

// Send seals payload into one packet to the server, which it puts in
// out.Datagrams. It fails with ErrNotConnected unless the client is
// connected.
func (c *Client) Send(now time.Time, payload []byte, out *Output) error {
	c.begin(out)
	defer c.finish(out)
	if len(payload) < 1 || len(payload) > protocol.MaxPayloadBytes {
		return ErrPayloadSize
	}
	if c.state != Connected {
		return ErrNotConnected
	}
	c.seal(now, payload, out)
	return nil
}

// SendBatch seals each of payloads into one packet to the server, in
// order, as that many Sends would, and puts them in out.Datagrams; the
// packets take consecutive sequence numbers under one hold of the lock.
// It returns how many it sealed: fewer than len(payloads) when one has a
// size Send refuses (ErrPayloadSize), none unless the client is connected
// (ErrNotConnected).
func (c *Client) SendBatch(now time.Time, payloads [][]byte, out *Output) (int, error) {
	c.begin(out)
	defer c.finish(out)
	if c.state != Connected {
		return 0, ErrNotConnected
	}
	for i, p := range payloads {
		if len(p) < 1 || len(p) > protocol.MaxPayloadBytes {
			return i, ErrPayloadSize
		}
		c.seal(now, p, out)
	}
	return len(payloads), nil
}

// seal appends payload's packet to out; c.mu is held and c is connected.
func (c *Client) seal(now time.Time, payload []byte, out *Output) {
	start := out.Mark(outputBuf)
	out.Buf = protocol.AppendPayload(out.Buf, c.send, c.seq, payload)
	out.Push(c.servers[c.server], start)
	c.seq++
	c.lastSend = now
}

// Disconnect ends the connection: it puts the redundant disconnect packets
// in out.Datagrams (during the handshake too, as the reference does: the
// server may already have accepted the connection); the state becomes
// Disconnected. A client in an error state keeps it.
func (c *Client) Disconnect(out *Output) {
	c.begin(out)
	defer c.finish(out)
	if c.state <= Disconnected {
		return
	}
	for range DisconnectPackets {
		start := out.Mark(outputBuf)
		out.Buf = protocol.AppendDisconnect(out.Buf, c.send, c.seq)
		out.Push(c.servers[c.server], start)
		c.seq++
	}
	c.setState(Disconnected)
}
