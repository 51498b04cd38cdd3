package core

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/gonetcode/netcode/cute/internal/wire"
	"github.com/gonetcode/netcode/internal/testing/vectortest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReceiverBehaviour injects the 15 datagrams of packets.json's
// receiver_behaviour into a connected client and server, each followed by
// an Update at the same time (the C driver's update with dt = 0), and
// compares the effects.
func TestReceiverBehaviour(t *testing.T) {
	var v struct {
		Receiver struct {
			C2S        hx     `json:"client_to_server_key"`
			S2C        hx     `json:"server_to_client_key"`
			ClientAddr string `json:"client_address"`
			ServerAddr string `json:"server_address"`
			Cases      []struct {
				What    string
				To      string
				From    string
				Bytes   hx
				Effects []string
			}
		} `json:"receiver_behaviour"`
	}
	require.NoError(t, vectortest.LoadCute(vectortest.CutePath("packets.json"), &v))
	r := v.Receiver
	require.Len(t, r.Cases, 15)
	serverAddr := netip.MustParseAddrPort(r.ServerAddr)
	clientAddr := netip.MustParseAddrPort(r.ClientAddr)

	// A client connected to serverAddr with the recorded keys.
	p := &wire.TokenParams{ApplicationID: testApp, Created: uint64(t0.Unix()), Expires: uint64(t0.Unix()) + 60,
		HandshakeTimeout: 5, Endpoints: []netip.AddrPort{serverAddr}, ClientID: 1}
	copy(p.ClientToServer[:], r.C2S)
	copy(p.ServerToClient[:], r.S2C)
	var tok [wire.TokenBytes]byte
	require.NoError(t, wire.WriteToken(&tok, p, &testSK, &wire.IV{}, &[32]byte{}))
	c, err := NewClient(t0, tok[:], testApp)
	require.NoError(t, err)
	c.state, c.timeout, c.lastSend, c.sendNow = Connected, DefaultConnectionTimeout, t0, false

	// A server with that client in slot 0.
	s, _ := newServer(t, func(cfg *ServerConfig) { cfg.Addrs = []netip.AddrPort{serverAddr} })
	s.slots[0].conn = conn{connected: true, confirmed: true, clientID: 1, addr: clientAddr,
		c2s: wire.NewPacketKey(&p.ClientToServer), s2c: wire.NewPacketKey(&p.ServerToClient), lastRecv: t0, lastSend: t0}
	s.count, s.byAddr[clientAddr], s.byID[1] = 1, 0, 0

	for _, tc := range r.Cases {
		effects := []string{}
		from := netip.MustParseAddrPort(tc.From)
		switch tc.To {
		case "client":
			var out ClientOutput
			c.Receive(t0, from, append([]byte(nil), tc.Bytes...), &out)
			if out.Payload != nil {
				effects = append(effects, fmt.Sprintf("client received payload of %d bytes, sequence %d", len(out.Payload), out.Sequence))
			}
			if out.Changed() {
				effects = append(effects, fmt.Sprintf("client state %s -> %s", out.From, out.To))
			}
			c.Update(t0, &out)
			assert.Empty(t, out.Datagrams, tc.What)
		case "server":
			var out ServerOutput
			before := s.ClientCount()
			s.Receive(t0, from, append([]byte(nil), tc.Bytes...), &out)
			for _, e := range out.Events {
				switch e.Kind {
				case EventPayload:
					effects = append(effects, fmt.Sprintf("server event PAYLOAD_PACKET, %d bytes", len(e.Payload)))
				case EventDisconnected:
					effects = append(effects, fmt.Sprintf("server event DISCONNECTED, client index %d", e.Index))
				}
			}
			if after := s.ClientCount(); after != before {
				effects = append(effects, fmt.Sprintf("server client count %d -> %d", before, after))
			}
			s.Update(t0, &out)
			assert.Empty(t, out.Datagrams, tc.What)
		}
		assert.Equal(t, tc.Effects, effects, tc.What)
	}
}
