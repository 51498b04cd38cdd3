package server

import (
	"net/netip"
	"testing"
	"time"

	"github.com/gonetcode/netcode/crypto"
	"github.com/gonetcode/netcode/protocol"
	"github.com/stretchr/testify/require"
)

// TestGoneClientsBounded: the kicked clients remembered are at most the
// ring's capacity, the oldest go first, and expired ones are forgotten as
// new ones come.
func TestGoneClientsBounded(t *testing.T) {
	kicked := func(i int, at time.Time) *Client {
		c := &Client{addr: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, 1, byte(i)}), 5000), timeout: 5 * time.Second}
		c.lastRecv.Store(at.UnixNano())
		return c
	}
	tests := []struct {
		name     string
		kicks    int
		every    time.Duration
		wantKept int
	}{
		{"fewer than the capacity", 3, 0, 3},
		{"more than the capacity", 20, 0, 8},
		{"expired ones go", 20, 2 * time.Second, 3}, // a 6 s window: the two before and the new one
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g goneClients
			at := epoch
			var cs []*Client
			for i := range tt.kicks {
				c := kicked(i, at)
				cs = append(cs, c)
				g.add(c, 8)
				at = at.Add(tt.every)
			}
			require.Equal(t, tt.wantKept, g.n)
			require.Len(t, g.byAddr, tt.wantKept)
			for i, c := range cs {
				_, kept := g.byAddr[c.addr]
				require.Equal(t, i >= tt.kicks-tt.wantKept, kept, "client %d", i)
			}
		})
	}
}

// recordSink collects the datagrams sent.
type recordSink struct{ Output }

// sizes are the sizes of the datagrams sent.
func (s *recordSink) sizes() []int {
	var n []int
	for _, m := range s.Datagrams {
		n = append(n, len(m.Buf))
	}
	return n
}

// FuzzAnswerGone feeds arbitrary datagrams from a kicked client's address:
// the server never panics, answers at most one datagram per datagram, never
// with more bytes than it received, and only to one that authenticates.
func FuzzAnswerGone(f *testing.F) {
	c2s, s2c := crypto.Key{1: 1}, crypto.Key{1: 2}
	send := crypto.NewPacketAEAD(&c2s, protocolID)
	f.Add(protocol.AppendKeepAlive(nil, send, 1000, 0, 0))
	f.Add(protocol.AppendPayload(nil, send, 1001, []byte{7}))
	f.Add(protocol.AppendDisconnect(nil, send, 1002))
	f.Add([]byte{0x14, 1, 2, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := New(Config{ProtocolID: protocolID, PrivateKey: privKey, MaxClients: 4, Now: epoch})
		require.NoError(t, err)
		c := &Client{srv: s, addr: other, timeout: 5 * time.Second, recv: crypto.NewPacketAEAD(&c2s, protocolID), replay: new(protocol.ReplayProtection)}
		c.lastRecv.Store(s.mono(epoch))
		c.sendLocked.send = *crypto.NewPacketAEAD(&s2c, protocolID)
		s.gone.add(c, s.maxClients)
		var out recordSink
		in := len(data)
		s.Receive(epoch.Add(time.Second), other, append([]byte(nil), data...), &out.Output)
		require.LessOrEqual(t, len(out.sizes()), 1)
		for _, n := range out.sizes() {
			require.LessOrEqual(t, n, in, "answer larger than the datagram")
			var p protocol.Packet
			r := protocol.Reader{ProtocolID: protocolID, Allowed: protocol.ServerAccepts}
			require.NoError(t, r.Read(append([]byte(nil), data...), 0, crypto.NewPacketAEAD(&c2s, protocolID), nil, &p), "answered a datagram that does not authenticate")
		}
	})
}
