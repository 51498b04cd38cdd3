package core

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"sync"
	"time"

	"github.com/gonetcode/netcode/cute/internal/wire"
)

// State is the client's state; the numbers are cute_net.h's (and the
// standard's).
type State int

// The client states. Negative states are failures and final.
const (
	ConnectTokenExpired       State = -6
	InvalidConnectToken       State = -5
	ConnectionTimedOut        State = -4
	ChallengeResponseTimedOut State = -3
	ConnectionRequestTimedOut State = -2
	ConnectionDenied          State = -1
	Disconnected              State = 0
	SendingConnectionRequest  State = 1
	SendingChallengeResponse  State = 2
	Connected                 State = 3
)

// String names the state as cute_net.h does.
func (s State) String() string {
	switch s {
	case ConnectTokenExpired:
		return "CONNECT_TOKEN_EXPIRED"
	case InvalidConnectToken:
		return "INVALID_CONNECT_TOKEN"
	case ConnectionTimedOut:
		return "CONNECTION_TIMED_OUT"
	case ChallengeResponseTimedOut:
		return "CHALLENGED_RESPONSE_TIMED_OUT"
	case ConnectionRequestTimedOut:
		return "CONNECTION_REQUEST_TIMED_OUT"
	case ConnectionDenied:
		return "CONNECTION_DENIED"
	case Disconnected:
		return "DISCONNECTED"
	case SendingConnectionRequest:
		return "SENDING_CONNECTION_REQUEST"
	case SendingChallengeResponse:
		return "SENDING_CHALLENGE_RESPONSE"
	case Connected:
		return "CONNECTED"
	}
	return "UNKNOWN"
}

// Errors of Client.Send.
var (
	ErrNotConnected = errors.New("cute/core: not connected")
	ErrPayloadSize  = errors.New("cute/core: payload larger than 1205 bytes")
)

// ClientOutput is what one call to a Client did. The caller owns it and
// passes the same ClientOutput to call after call: each call resets it and
// fills it, reusing its buffers, so a connected client allocates nothing.
type ClientOutput struct {
	// From and To are the states before and after the call.
	From, To State
	// Payload is the payload Receive accepted, or nil: a slice of the
	// datagram passed in (decrypted in place), valid until the caller
	// reuses that buffer. Sequence is its packet sequence.
	Payload  []byte
	Sequence uint64
	datagrams
	// Next is when Update is due; the zero Time once the state is final.
	Next time.Time
}

// Changed reports whether the call changed the state.
func (o *ClientOutput) Changed() bool { return o.From != o.To }

// Client is the Cute client state machine for one connect token
// (cn_protocol_client). Its methods are safe for concurrent use; they
// serialise on one mutex, held only while the client computes.
type Client struct {
	mu   sync.Mutex
	rand entropy
	ivs  ivSource
	// ivDirect draws the IVs from rand itself (tests only).
	ivDirect bool
	tok      wire.ClientToken
	// c2s and s2c are the token's keys, ready for packets.
	c2s, s2c wire.PacketKey

	state  State
	server int // index of the endpoint being tried
	// nextServer is set when a CONNECTION_DENIED arrived: the next Update
	// moves on, ending in failed if no server is left.
	nextServer bool
	failed     State // the state a handshake ends in (cn's goto_next_server_tentative_state)
	replay     wire.Replay
	seq        uint64
	lastSend   time.Time
	lastRecv   time.Time
	sendNow    bool // the next Update sends at once

	challengeNonce uint64
	challengeData  [wire.ChallengeDataBytes]byte
	clientID       uint64
	maxClients     uint32
	timeout        time.Duration // the connection timeout the server sent
	// accepted is the CONNECTION_ACCEPTED that connected: its sequence
	// and body, which relabelled packets are told apart by (see notPayload).
	acceptedSeq  uint64
	acceptedBody [acceptedBodyBytes]byte

	iv wire.IV
}

// NewClient starts connecting with the 1114-byte connect token at time now
// (cn_protocol_client_connect): the token is read for applicationID and its
// expiry judged on now's wall clock, and the first connect token packet
// goes out at the first Update. An unreadable token leaves the client in
// InvalidConnectToken, an expired one in ConnectTokenExpired; the error
// says why.
func NewClient(now time.Time, token []byte, applicationID uint64) (*Client, error) {
	c := &Client{rand: systemEntropy}
	if err := wire.ReadClientToken(token, applicationID, unixSeconds(now), &c.tok); err != nil {
		c.state = InvalidConnectToken
		if errors.Is(err, wire.ErrExpired) {
			c.state = ConnectTokenExpired
		}
		return c, err
	}
	c.c2s = wire.NewPacketKey(&c.tok.ClientToServer)
	c.s2c = wire.NewPacketKey(&c.tok.ServerToClient)
	c.state = SendingConnectionRequest
	c.failed = ConnectionRequestTimedOut
	c.sendNow = true
	c.lastRecv = now
	return c, nil
}

// unixSeconds is now's wall clock in Unix seconds, 0 before 1970.
func unixSeconds(now time.Time) uint64 {
	if s := now.Unix(); s > 0 {
		return uint64(s)
	}
	return 0
}

// begin takes the lock and starts out; finish ends the call.
func (c *Client) begin(out *ClientOutput) {
	c.mu.Lock()
	out.From, out.To = c.state, c.state
	out.Payload, out.Sequence = nil, 0
	out.reset()
	out.Next = time.Time{}
}

func (c *Client) finish(out *ClientOutput) {
	out.To = c.state
	out.Next = c.next()
	c.mu.Unlock()
}

// next is when Update has something to do: the next send, the handshake or
// connection timeout, the token's expiry; at once when a denial waits.
func (c *Client) next() time.Time {
	if c.state <= Disconnected {
		return time.Time{}
	}
	if c.nextServer || c.sendNow {
		return c.lastRecv
	}
	next := c.lastSend.Add(SendRate)
	if c.state < Connected {
		if t := c.lastRecv.Add(time.Duration(c.tok.HandshakeTimeout) * time.Second); t.Before(next) {
			next = t
		}
		if t := time.Unix(int64(min(c.tok.Expires, 1<<62)), 0); t.Before(next) {
			next = t
		}
	} else if t := c.lastRecv.Add(c.timeout); t.Before(next) {
		next = t
	}
	return next
}

// State returns the current state.
func (c *Client) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

// ServerAddr returns the server being tried or connected to.
func (c *Client) ServerAddr() netip.AddrPort {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.server >= len(c.tok.Endpoints) { // the token was not read
		return netip.AddrPort{}
	}
	return c.tok.Endpoints[c.server]
}

// ClientID and MaxClients are what the server sent in CONNECTION_ACCEPTED.
func (c *Client) ClientID() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clientID
}

// MaxClients is the server's slot count from CONNECTION_ACCEPTED.
func (c *Client) MaxClients() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return int(c.maxClients)
}

// Receive processes one datagram from from (one pass of
// s_protocol_receive_packets' loop). data is decrypted in place.
func (c *Client) Receive(now time.Time, from netip.AddrPort, data []byte, out *ClientOutput) {
	c.begin(out)
	defer c.finish(out)
	if c.state <= Disconnected || c.nextServer || from != c.tok.Endpoints[c.server] || len(data) < wire.HeaderBytes {
		return
	}
	switch t := wire.Type(data[0]); {
	case t > wire.Payload, t == wire.ConnectToken, t == wire.ChallengeResponse:
		return
	}
	var p wire.Packet
	if wire.Open(data, &c.s2c, &c.replay, &p) != nil {
		return
	}
	switch c.state {
	case SendingConnectionRequest:
		switch p.Type {
		case wire.ChallengeRequest:
			c.challengeNonce = p.ChallengeNonce
			copy(c.challengeData[:], p.ChallengeData)
			c.state = SendingChallengeResponse
			c.failed = ChallengeResponseTimedOut
			c.sendNow = true
			c.lastRecv = now
		case wire.ConnectionDenied:
			c.nextServer = true
			c.failed = ConnectionDenied
		}
	case SendingChallengeResponse:
		switch p.Type {
		case wire.ConnectionAccepted:
			c.clientID = p.ClientID
			c.maxClients = p.MaxClients
			c.timeout = time.Duration(p.ConnectionTimeout) * time.Second
			c.state = Connected
			c.lastRecv = now
			c.acceptedSeq = p.Sequence
			binary.LittleEndian.PutUint64(c.acceptedBody[0:], p.ClientID)
			binary.LittleEndian.PutUint32(c.acceptedBody[8:], p.MaxClients)
			binary.LittleEndian.PutUint32(c.acceptedBody[12:], p.ConnectionTimeout)
		case wire.ConnectionDenied:
			c.nextServer = true
			c.failed = ConnectionDenied
		}
	case Connected:
		switch p.Type {
		case wire.Payload:
			c.lastRecv = now
			if c.notPayload(&p) {
				return
			}
			out.Payload = p.Payload
			out.Sequence = p.Sequence
		case wire.KeepAlive:
			c.lastRecv = now
		case wire.Disconnect:
			// As the C client: no disconnect packets in answer.
			c.state = Disconnected
		}
	}
}

// acceptedBodyBytes is the size of a CONNECTION_ACCEPTED's body.
const acceptedBodyBytes = wire.AcceptedBytes - wire.HeaderBytes

// notPayload reports whether an authentic PAYLOAD is another packet of the
// server's relabelled on the way. The secretbox seals the body under the
// sequence alone, not the type byte, so a packet of another type whose body
// happens to read as a payload (a u16 equal to the length of the rest)
// opens as one, and would reach Read as bytes the server never sent as a
// payload. Two of the server's packets can:
//   - a CONNECTION_ACCEPTED, sent again with every keepalive and payload
//     until the client is confirmed, when the client id's low 16 bits
//     are 14: a 14-byte payload whose body is exactly the one that
//     connected this client (the fields do not change);
//   - a CHALLENGE_REQUEST, when its nonce's low 16 bits are 262: a
//     262-byte payload, sent during the handshake, so sequenced before
//     the CONNECTION_ACCEPTED that connected (the Go server never issues
//     such a nonce; the C server's counter reaches it).
//
// A real payload of those exact bytes, or of 262 bytes delayed past the
// CONNECTION_ACCEPTED it followed, is dropped as lost.
func (c *Client) notPayload(p *wire.Packet) bool {
	switch len(p.Payload) {
	case acceptedBodyBytes - 2:
		return binary.LittleEndian.Uint16(c.acceptedBody[:]) == acceptedBodyBytes-2 && string(p.Payload) == string(c.acceptedBody[2:])
	case challengeBodyBytes - 2:
		return p.Sequence < c.acceptedSeq
	}
	return false
}

// Update sends what is due, then applies the expiry and the timeouts
// (cn_protocol_client_update after its receive loop).
func (c *Client) Update(now time.Time, out *ClientOutput) {
	c.begin(out)
	defer c.finish(out)
	if c.state <= Disconnected {
		return
	}
	if c.sendNow || now.Sub(c.lastSend) >= SendRate {
		c.sendDue(now, out)
	}
	if c.state < Connected {
		timeout := now.Sub(c.lastRecv) >= time.Duration(c.tok.HandshakeTimeout)*time.Second
		switch {
		case c.tok.Expires <= unixSeconds(now):
			c.disconnect(now, ConnectTokenExpired, true, out)
		case timeout || c.nextServer:
			if c.server+1 < len(c.tok.Endpoints) {
				c.server++
				c.nextServer = false
				c.lastRecv = now
				c.sendNow = true
				c.state = SendingConnectionRequest
				// As the C client, the failure state carries over: a
				// token whose first server denied and whose last timed
				// out ends in ConnectionDenied.
				return
			}
			// The last server: the failure state, no disconnect packets.
			c.state = c.failed
		}
		return
	}
	if now.Sub(c.lastRecv) >= c.timeout {
		c.disconnect(now, ConnectionTimedOut, true, out)
	}
}

// sendDue sends the packet of the current state (s_protocol_send_packets).
func (c *Client) sendDue(now time.Time, out *ClientOutput) {
	buf, start := out.mark()
	to := c.tok.Endpoints[c.server]
	switch c.state {
	case SendingConnectionRequest:
		buf = append(buf, c.tok.Packet[:]...)
		c.seq++ // the C client spends a sequence number on it too
	case SendingChallengeResponse:
		c.ivs.draw(c.rand, c.ivDirect, &c.iv)
		buf = wire.AppendChallenge(buf, wire.ChallengeResponse, c.seq, &c.c2s, &c.iv, c.challengeNonce, &c.challengeData)
		c.seq++
	case Connected:
		c.ivs.draw(c.rand, c.ivDirect, &c.iv)
		buf = wire.AppendEmpty(buf, wire.KeepAlive, c.seq, &c.c2s, &c.iv)
		c.seq++
	default:
		return
	}
	out.push(buf, start, to)
	c.lastSend = now
	c.sendNow = false
}

// disconnect ends the connection attempt or connection in state s, first
// sending the redundant DISCONNECT packets if send is set (as the C client
// does on expiry and timeout, even before a connection exists).
func (c *Client) disconnect(now time.Time, s State, send bool, out *ClientOutput) {
	if send {
		to := c.tok.Endpoints[c.server]
		for range DisconnectPackets {
			buf, start := out.mark()
			c.ivs.draw(c.rand, c.ivDirect, &c.iv)
			buf = wire.AppendEmpty(buf, wire.Disconnect, c.seq, &c.c2s, &c.iv)
			c.seq++
			out.push(buf, start, to)
		}
		c.lastSend = now
	}
	c.state = s
}

// payloadSizes reports whether every one of ps fits a PAYLOAD packet.
func payloadSizes(ps [][]byte) bool {
	for _, p := range ps {
		if len(p) > wire.MaxPayloadBytes {
			return false
		}
	}
	return true
}

// Send seals payload (0..MaxPayloadBytes bytes) into one packet to the
// server (cn_protocol_client_send). Unlike the C client, which sends in any
// state, it requires a connection.
func (c *Client) Send(now time.Time, payload []byte, out *ClientOutput) error {
	_, err := c.SendBatch(now, [][]byte{payload}, out)
	return err
}

// SendBatch is Send for each of ps in order, under one take of the
// client's lock, their packets in out together (a batched write's). It
// seals all or none: it fails with ErrPayloadSize if any is too large,
// ErrNotConnected without a connection.
func (c *Client) SendBatch(now time.Time, ps [][]byte, out *ClientOutput) (int, error) {
	c.begin(out)
	defer c.finish(out)
	if !payloadSizes(ps) {
		return 0, ErrPayloadSize
	}
	if c.state != Connected {
		return 0, ErrNotConnected
	}
	for _, payload := range ps {
		buf, start := out.mark()
		c.ivs.draw(c.rand, c.ivDirect, &c.iv)
		buf = wire.AppendPayload(buf, c.seq, &c.c2s, &c.iv, payload)
		c.seq++
		out.push(buf, start, c.tok.Endpoints[c.server])
	}
	c.lastSend = now
	return len(ps), nil
}

// Disconnect ends the connection or the attempt with the redundant
// DISCONNECT packets (cn_protocol_client_disconnect). A client in a final
// state keeps it.
func (c *Client) Disconnect(now time.Time, out *ClientOutput) {
	c.begin(out)
	defer c.finish(out)
	if c.state <= Disconnected {
		return
	}
	c.disconnect(now, Disconnected, true, out)
}
