package client

import (
	"net/netip"
	"testing"
	"time"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/internal/testing/tokentest"
	"github.com/gonetcode/netcode/internal/tokenwire"
	"github.com/gonetcode/netcode/protocol"
	"github.com/gonetcode/netcode/token"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const protocolID = 0x1122334455667788

var (
	epoch    = time.Unix(1_800_000_000, 0)
	srvA     = netip.MustParseAddrPort("10.0.0.1:40000")
	srvB     = netip.MustParseAddrPort("10.0.0.2:40000")
	c2sKey   = crypto.Key{1: 1}
	s2cKey   = crypto.Key{1: 2}
	privKey  = crypto.Key{0: 9, 31: 9}
	tokNonce = [crypto.TokenNonceBytes]byte{3: 3}
)

// driver runs a Client as an adapter would, keeping what its Outputs said.
type driver struct {
	c        *Client
	out      Output
	states   []State // every state the client passed through
	to       []netip.AddrPort
	pkts     [][]byte
	payloads [][]byte
}

// take records what the last call put in d.out.
func (d *driver) take() {
	if d.out.Changed() {
		d.states = append(d.states, d.out.To)
	}
	if d.out.Payload != nil {
		d.payloads = append(d.payloads, append([]byte(nil), d.out.Payload...))
	}
	for _, m := range d.out.Datagrams {
		d.to = append(d.to, m.Addr)
		d.pkts = append(d.pkts, append([]byte(nil), m.Buf...))
	}
}

func (d *driver) Update(now time.Time) { d.c.Update(now, &d.out); d.take() }

func (d *driver) Receive(now time.Time, from netip.AddrPort, b []byte) {
	d.c.Receive(now, from, b, &d.out)
	d.take()
}

func (d *driver) Send(now time.Time, p []byte) error {
	err := d.c.Send(now, p, &d.out)
	d.take()
	return err
}

func (d *driver) Disconnect() { d.c.Disconnect(&d.out); d.take() }

// serverPackets seals packets as the server of the token would.
type serverPackets struct {
	key *crypto.PacketAEAD
	seq uint64
}

func (s *serverPackets) next(build func(dst []byte, key *crypto.PacketAEAD, seq uint64) []byte) []byte {
	s.seq++
	return build(nil, s.key, s.seq)
}

func (s *serverPackets) challenge() []byte {
	return s.next(func(dst []byte, key *crypto.PacketAEAD, seq uint64) []byte {
		return protocol.AppendChallenge(dst, key, seq, 7, make([]byte, tokenwire.ChallengeTokenBytes))
	})
}

func (s *serverPackets) denied() []byte { return s.next(protocol.AppendDenied) }

func (s *serverPackets) keepAlive() []byte {
	return s.next(func(dst []byte, key *crypto.PacketAEAD, seq uint64) []byte {
		return protocol.AppendKeepAlive(dst, key, seq, 2, 16)
	})
}

func testToken(t testing.TB, servers ...netip.AddrPort) []byte {
	t.Helper()
	tok, err := tokentest.GenerateWith(token.Params{
		ProtocolID:     protocolID,
		ClientID:       42,
		PrivateKey:     privKey,
		ServerAddrs:    servers,
		ExpireSeconds:  30,
		TimeoutSeconds: 5,
	}, uint64(epoch.Unix()), tokNonce, c2sKey, s2cKey)
	require.NoError(t, err)
	return tok
}

func newTestClient(t *testing.T, servers ...netip.AddrPort) *driver {
	t.Helper()
	c := New(epoch, testToken(t, servers...), nil)
	require.Equal(t, SendingConnectionRequest, c.State())
	return &driver{c: c, states: []State{c.State()}}
}

// TestStaleDenialAfterConnect covers a denial and a keep-alive from the same
// server arriving before one Update, in either order. The server answered
// two connection responses differently (it was full for the first, had a
// free slot for the second, and the network reordered the answers). The
// keep-alive proves the server holds a slot for us: the client must stay
// connected to it, and never enter Connected twice.
func TestStaleDenialAfterConnect(t *testing.T) {
	tests := []struct {
		name      string
		deniedFst bool
		want      State
		wantPath  []State
	}{
		{
			name:      "denied then keep-alive",
			deniedFst: true,
			want:      Connected,
			wantPath:  []State{SendingConnectionRequest, SendingConnectionResponse, Connected},
		},
		{
			name:      "keep-alive then denied",
			deniedFst: false,
			want:      Connected,
			wantPath:  []State{SendingConnectionRequest, SendingConnectionResponse, Connected},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestClient(t, srvA, srvB)
			srv := &serverPackets{key: crypto.NewPacketAEAD(&s2cKey, protocolID)}
			now := epoch
			c.Update(now)
			c.Receive(now, srvA, srv.challenge())
			require.Equal(t, SendingConnectionResponse, c.c.State())
			now = now.Add(10 * time.Millisecond)
			c.Update(now)

			d, k := srv.denied(), srv.keepAlive()
			if tt.deniedFst {
				c.Receive(now, srvA, d)
				c.Receive(now, srvA, k)
			} else {
				c.Receive(now, srvA, k)
				c.Receive(now, srvA, d)
			}
			for range 50 {
				now = now.Add(10 * time.Millisecond)
				c.Update(now)
			}
			require.Equal(t, tt.want, c.c.State())
			require.Equal(t, srvA, c.c.ServerAddr(), "moved on from the server that holds our slot")
			require.Equal(t, tt.wantPath, c.states)
			require.Equal(t, 2, c.c.ClientIndex())
			require.Equal(t, 16, c.c.MaxClients())
			for _, to := range c.to {
				require.Equal(t, srvA, to, "sent to a server other than the one we are connected to")
			}
		})
	}
}

// TestDeniedFallsBack: a denial with no keep-alive moves on to the next
// server, and to ConnectionDenied after the last one.
func TestDeniedFallsBack(t *testing.T) {
	c := newTestClient(t, srvA, srvB)
	srv := &serverPackets{key: crypto.NewPacketAEAD(&s2cKey, protocolID)}
	now := epoch
	c.Update(now)
	c.Receive(now, srvA, srv.denied())
	now = now.Add(10 * time.Millisecond)
	c.Update(now)
	require.Equal(t, SendingConnectionRequest, c.c.State())
	require.Equal(t, srvB, c.c.ServerAddr())

	c.Receive(now, srvB, srv.denied())
	now = now.Add(10 * time.Millisecond)
	c.Update(now)
	require.Equal(t, ConnectionDenied, c.c.State())
	require.Equal(t, []State{SendingConnectionRequest, ConnectionDenied}, c.states)
}

func TestFirstSequence(t *testing.T) {
	create := uint64(epoch.Unix())
	tests := []struct {
		name     string
		now      time.Time
		want     uint64
		fromTime bool // false: a random start below 2^40
	}{
		{"at creation", epoch, 0, true},
		{"1.5 s later", epoch.Add(1500 * time.Millisecond), 1_500_000, true},
		{"a day later", epoch.Add(24 * time.Hour), 86_400_000_000, true},
		{"clock behind the token", epoch.Add(-time.Minute), 0, false},
		{"clock weeks ahead", epoch.Add(30 * 24 * time.Hour), 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := firstSequence(tt.now, create)
			if tt.fromTime {
				require.Equal(t, tt.want, got)
				return
			}
			require.Less(t, got, uint64(maxTimeSequence))
			// Random: two draws agreeing is a 2^-40 event.
			require.NotEqual(t, got, firstSequence(tt.now, create))
		})
	}
	require.Less(t, firstSequence(epoch, 1<<63), uint64(maxTimeSequence), "a create timestamp past time.Time's range")
}

func (s *serverPackets) disconnect() []byte { return s.next(protocol.AppendDisconnect) }

// TestDisconnectDuringHandshake: an authenticated disconnect from the
// current server ends the connection in "sending connection response" as
// in "connected" (the server sends disconnects only to a connection it
// accepted); one that is forged, replayed, from another address, or that
// arrives before any challenge is ignored.
func TestDisconnectDuringHandshake(t *testing.T) {
	otherKey := crypto.Key{1: 3}
	tests := []struct {
		name     string
		from     netip.AddrPort
		key      *crypto.Key
		replay   bool // send a keep-alive first, then a disconnect with its sequence
		noChal   bool // no challenge yet: still sending connection requests
		want     State
		wantPath []State
	}{
		{"in sending connection response", srvA, &s2cKey, false, false, Disconnected,
			[]State{SendingConnectionRequest, SendingConnectionResponse, Disconnected}},
		{"in sending connection request", srvA, &s2cKey, false, true, SendingConnectionRequest,
			[]State{SendingConnectionRequest}},
		{"sealed with another key", srvA, &otherKey, false, false, SendingConnectionResponse,
			[]State{SendingConnectionRequest, SendingConnectionResponse}},
		{"from another address", srvB, &s2cKey, false, false, SendingConnectionResponse,
			[]State{SendingConnectionRequest, SendingConnectionResponse}},
		{"replayed sequence once connected", srvA, &s2cKey, true, false, Connected,
			[]State{SendingConnectionRequest, SendingConnectionResponse, Connected}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newTestClient(t, srvA)
			srv := &serverPackets{key: crypto.NewPacketAEAD(&s2cKey, protocolID)}
			now := epoch
			c.Update(now)
			if !tt.noChal {
				c.Receive(now, srvA, srv.challenge())
			}
			if tt.replay {
				c.Receive(now, srvA, srv.keepAlive())
				srv.seq-- // the disconnect reuses the keep-alive's sequence
			}
			d := (&serverPackets{key: crypto.NewPacketAEAD(tt.key, protocolID), seq: srv.seq}).disconnect()
			c.Receive(now, tt.from, d)
			for range 10 {
				now = now.Add(10 * time.Millisecond)
				c.Update(now)
			}
			require.Equal(t, tt.want, c.c.State())
			require.Equal(t, tt.wantPath, c.states)
		})
	}
}

// TestRequestTimeout covers SetRequestTimeout: a client whose servers never
// answer its requests (a forged token: no server can open it) fails with
// ConnectionRequestTimedOut at the bound, across all the token's servers,
// long before the token's own timeout; a server that answers lifts the
// bound for the rest of the handshake.
func TestRequestTimeout(t *testing.T) {
	const bound = 800 * time.Millisecond
	tests := []struct {
		name   string
		answer bool
		want   State // at epoch + 2 s
	}{
		{"never answered", false, ConnectionRequestTimedOut},
		{"answered", true, SendingConnectionResponse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newTestClient(t, srvA, srvB)
			d.c.SetRequestTimeout(bound)
			srv := serverPackets{key: crypto.NewPacketAEAD(&s2cKey, protocolID)}
			now := epoch
			for now.Before(epoch.Add(2 * time.Second)) {
				d.Update(now)
				if tt.answer && now.Equal(epoch.Add(100*time.Millisecond)) {
					d.Receive(now, srvA, srv.challenge())
				}
				if d.c.State() <= Disconnected {
					break
				}
				next := d.c.Next()
				require.False(t, next.After(epoch.Add(bound)) && !tt.answer && now.Before(epoch.Add(bound)),
					"Update due at %v, past the bound", next.Sub(epoch))
				now = next
			}
			require.Equal(t, tt.want, d.c.State())
			if !tt.answer {
				assert.Equal(t, epoch.Add(bound), now, "failed at the bound, not later")
				assert.LessOrEqual(t, len(d.pkts), int(bound/SendInterval)+1, "requests sent")
			}
		})
	}
}
