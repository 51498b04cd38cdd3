package scenario

import (
	"bytes"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/gonetcode/netcode/internal/client"
	"github.com/gonetcode/netcode/internal/server"
	"github.com/gonetcode/netcode/internal/testing/netsim"
	"github.com/gonetcode/netcode/protocol"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	srvAddr  = "10.0.0.1:40000"
	srvAddr2 = "10.0.0.2:40000"
	srvAddr3 = "[fd00::3]:40000"
)

func TestConnect(t *testing.T) {
	for _, tc := range []struct {
		name   string
		server string
		client string
		net    netsim.Config
	}{
		{"ipv4", srvAddr, "10.1.0.1:5000", netsim.Config{}},
		{"ipv6", srvAddr3, "[fd00::100]:5000", netsim.Config{}},
		{"latency", srvAddr, "10.1.0.1:5000", netsim.Config{Latency: 80 * time.Millisecond, Jitter: 20 * time.Millisecond}},
		{"lossy", srvAddr, "10.1.0.1:5000", netsim.Config{Latency: 30 * time.Millisecond, Loss: 0.3, Duplicate: 0.1, Reorder: 0.1, ReorderDelay: 50 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, tc.net)
			s := w.addServer(tc.server, 16)
			c := w.addClient(tc.client, w.tokenFor(7, 30, 5, tc.server))
			w.runUntil(5*time.Second, c.is(client.Connected))
			require.Equal(t, []client.State{client.SendingConnectionRequest, client.SendingConnectionResponse, client.Connected}, c.states)
			require.Len(t, s.connected, 1)
			sc := s.connected[0]
			assert.Equal(t, uint64(7), sc.ID())
			assert.Equal(t, c.addr, sc.Addr())
			assert.Equal(t, 0, c.core.ClientIndex())
			assert.Equal(t, 16, c.core.MaxClients())
			ud := sc.UserData()
			assert.Equal(t, "user 7", string(bytes.TrimRight(ud[:], "\x00")))

			// Payloads both ways.
			for i := range 20 {
				require.NoError(t, c.send(w.now, []byte{byte(i), 1}))
				require.NoError(t, s.send(sc, w.now, []byte{byte(i), 2}))
				w.step()
			}
			w.run(time.Second)
			if tc.net.Loss == 0 {
				assert.Len(t, s.payloads[sc], 20)
				assert.Len(t, c.payloads, 20)
			} else {
				assert.NotEmpty(t, s.payloads[sc])
				assert.NotEmpty(t, c.payloads)
			}
		})
	}
}

func TestKeepAliveHoldsIdleConnection(t *testing.T) {
	w := newWorld(t, netsim.Config{Latency: 20 * time.Millisecond})
	s := w.addServer(srvAddr, 4)
	var toServer, toClient int
	w.tap = func(from, to netip.AddrPort, b []byte) {
		if to == s.addr {
			toServer++
		} else {
			toClient++
		}
	}
	c := w.addClient("10.1.0.1:5000", w.tokenFor(1, 60, 2, srvAddr))
	w.runUntil(time.Second, c.is(client.Connected))
	toServer, toClient = 0, 0
	w.run(20 * time.Second) // ten times the timeout, no payloads
	assert.Equal(t, client.Connected, c.core.State())
	assert.Len(t, s.live(), 1)
	// 10 Hz each way, give or take a tick.
	assert.InDelta(t, 200, toServer, 10)
	assert.InDelta(t, 200, toClient, 10)
}

func TestMultipleClients(t *testing.T) {
	const n = 32
	w := newWorld(t, netsim.Config{Latency: 10 * time.Millisecond, Jitter: 10 * time.Millisecond})
	s := w.addServer(srvAddr, n)
	var cs []*cliNode
	for i := range n {
		cs = append(cs, w.addClient(fmt.Sprintf("10.1.0.%d:5000", i+1), w.tokenFor(uint64(100+i), 30, 5, srvAddr)))
	}
	w.runUntil(5*time.Second, func() bool {
		for _, c := range cs {
			if c.core.State() != client.Connected {
				return false
			}
		}
		return true
	})
	seen := map[int]bool{}
	for _, c := range cs {
		seen[c.core.ClientIndex()] = true
	}
	assert.Len(t, seen, n, "every client has its own slot")
	// Each client sends its id; the server must see each on the right client.
	for i, c := range cs {
		require.NoError(t, c.send(w.now, []byte(fmt.Sprint(100+i))))
	}
	w.run(time.Second)
	for _, sc := range s.live() {
		require.Len(t, s.payloads[sc], 1)
		assert.Equal(t, fmt.Sprint(sc.ID()), string(s.payloads[sc][0]))
	}
	assert.Len(t, s.live(), n)
}

func TestFallbackToLaterServers(t *testing.T) {
	w := newWorld(t, netsim.Config{Latency: 5 * time.Millisecond})
	// Only the third server exists; the first two time out in turn.
	s := w.addServer(srvAddr3, 4)
	c := w.addClient("[fd00::100]:5000", w.tokenFor(1, 30, 1, srvAddr, srvAddr2, srvAddr3))
	start := w.now
	w.runUntil(10*time.Second, c.is(client.Connected))
	assert.Len(t, s.connected, 1)
	assert.Equal(t, s.addr, c.core.ServerAddr())
	assert.GreaterOrEqual(t, w.now.Sub(start), 2*time.Second, "two request timeouts first")
	assert.Equal(t, []client.State{client.SendingConnectionRequest, client.SendingConnectionResponse, client.Connected}, c.states,
		"trying the next server does not leave SendingConnectionRequest")
}

func TestFallbackAfterDenied(t *testing.T) {
	w := newWorld(t, netsim.Config{Latency: 5 * time.Millisecond})
	full := w.addServer(srvAddr, 1)
	free := w.addServer(srvAddr2, 1)
	first := w.addClient("10.1.0.1:5000", w.tokenFor(1, 30, 5, srvAddr))
	w.runUntil(time.Second, first.is(client.Connected))
	second := w.addClient("10.1.0.2:5000", w.tokenFor(2, 30, 5, srvAddr, srvAddr2))
	w.runUntil(time.Second, second.is(client.Connected))
	assert.Len(t, full.live(), 1)
	assert.Len(t, free.live(), 1)
	assert.Equal(t, free.addr, second.core.ServerAddr())
}

func TestClientErrorStates(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(w *world) *cliNode
		want  client.State
	}{
		{"invalid connect token", func(w *world) *cliNode {
			return w.addClient("10.1.0.1:5000", make([]byte, 2048))
		}, client.InvalidConnectToken},
		{"connect token expired", func(w *world) *cliNode {
			// Nobody answers; the token lives 1 s, the timeout is 5 s.
			return w.addClient("10.1.0.1:5000", w.tokenFor(1, 1, 5, srvAddr))
		}, client.ConnectTokenExpired},
		{"connection request timed out", func(w *world) *cliNode {
			return w.addClient("10.1.0.1:5000", w.tokenFor(1, 30, 1, srvAddr, srvAddr2))
		}, client.ConnectionRequestTimedOut},
		{"connection response timed out", func(w *world) *cliNode {
			s := w.addServer(srvAddr, 4)
			c := w.addClient("10.1.0.1:5000", w.tokenFor(1, 30, 1, srvAddr))
			// Once the challenge is on its way, responses vanish.
			w.runUntil(time.Second, func() bool { return s.core.Stats().ChallengesSent > 0 })
			w.net.SetLink(c.addr, s.addr, netsim.Config{Loss: 1})
			return c
		}, client.ConnectionResponseTimedOut},
		{"connection denied", func(w *world) *cliNode {
			w.addServer(srvAddr, 1)
			c := w.addClient("10.1.0.1:5000", w.tokenFor(1, 30, 5, srvAddr))
			w.runUntil(time.Second, c.is(client.Connected))
			return w.addClient("10.1.0.2:5000", w.tokenFor(2, 30, 5, srvAddr))
		}, client.ConnectionDenied},
		{"connection timed out", func(w *world) *cliNode {
			s := w.addServer(srvAddr, 4)
			c := w.addClient("10.1.0.1:5000", w.tokenFor(1, 30, 1, srvAddr))
			w.runUntil(time.Second, c.is(client.Connected))
			w.net.SetLink(s.addr, c.addr, netsim.Config{Loss: 1})
			return c
		}, client.ConnectionTimedOut},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, netsim.Config{Latency: 5 * time.Millisecond})
			c := tc.setup(w)
			w.runUntil(10*time.Second, c.final())
			assert.Equal(t, tc.want, c.core.State())
			w.run(time.Second)
			assert.Equal(t, tc.want, c.core.State(), "error states are final")
		})
	}
}

func TestServerTimesOutSilentClient(t *testing.T) {
	w := newWorld(t, netsim.Config{Latency: 5 * time.Millisecond})
	s := w.addServer(srvAddr, 4)
	c := w.addClient("10.1.0.1:5000", w.tokenFor(1, 30, 2, srvAddr))
	w.runUntil(time.Second, c.is(client.Connected))
	w.net.SetLink(c.addr, s.addr, netsim.Config{Loss: 1})
	sc := s.connected[0]
	w.runUntil(3*time.Second, func() bool { _, gone := s.left[sc]; return gone })
	assert.Equal(t, server.ReasonTimedOut, s.left[sc])
	assert.Equal(t, 0, s.core.Stats().Connected)
}

func TestClientSideDisconnect(t *testing.T) {
	w := newWorld(t, netsim.Config{Latency: 5 * time.Millisecond, Loss: 0.5})
	s := w.addServer(srvAddr, 4)
	c := w.addClient("10.1.0.1:5000", w.tokenFor(1, 30, 10, srvAddr))
	w.runUntil(10*time.Second, c.is(client.Connected))
	sc := s.connected[0]
	c.disconnect()
	assert.Equal(t, client.Disconnected, c.core.State())
	// Ten redundant packets: at 50% loss one gets through, long before the
	// 10 s timeout.
	w.run(100 * time.Millisecond)
	assert.Equal(t, server.ReasonPeerDisconnected, s.left[sc])
}

func TestServerSideDisconnect(t *testing.T) {
	w := newWorld(t, netsim.Config{Latency: 5 * time.Millisecond})
	s := w.addServer(srvAddr, 4)
	c := w.addClient("10.1.0.1:5000", w.tokenFor(1, 30, 10, srvAddr))
	w.runUntil(time.Second, c.is(client.Connected))
	sc := s.connected[0]
	s.disconnect(sc)
	s.ev.collect()
	assert.Equal(t, server.ReasonLocal, s.left[sc])
	assert.ErrorIs(t, s.send(sc, w.now, []byte{1}), server.ErrClientGone)
	w.run(100 * time.Millisecond)
	assert.Equal(t, client.Disconnected, c.core.State())
}

func TestServerCloseDisconnectsAll(t *testing.T) {
	w := newWorld(t, netsim.Config{Latency: 5 * time.Millisecond})
	s := w.addServer(srvAddr, 8)
	var cs []*cliNode
	for i := range 8 {
		cs = append(cs, w.addClient(fmt.Sprintf("10.1.0.%d:5000", i+1), w.tokenFor(uint64(i+1), 30, 10, srvAddr)))
	}
	w.runUntil(time.Second, func() bool { return len(s.live()) == 8 })
	s.close()
	s.ev.collect()
	w.run(100 * time.Millisecond)
	for _, c := range cs {
		assert.Equal(t, client.Disconnected, c.core.State())
	}
}

func TestReconnect(t *testing.T) {
	w := newWorld(t, netsim.Config{Latency: 5 * time.Millisecond})
	s := w.addServer(srvAddr, 1)
	c := w.addClient("10.1.0.1:5000", w.tokenFor(1, 30, 5, srvAddr))
	w.runUntil(time.Second, c.is(client.Connected))
	c.disconnect()
	w.run(100 * time.Millisecond)
	require.Empty(t, s.live())
	// Same address, a fresh token: the single slot is free again.
	c2 := w.addClient("10.1.0.1:5000", w.tokenFor(1, 30, 5, srvAddr))
	w.runUntil(time.Second, c2.is(client.Connected))
	assert.Len(t, s.live(), 1)
	assert.Equal(t, 0, c2.core.ClientIndex())
}

func TestDisabledTimeout(t *testing.T) {
	w := newWorld(t, netsim.Config{Latency: 5 * time.Millisecond})
	s := w.addServer(srvAddr, 4)
	c := w.addClient("10.1.0.1:5000", w.tokenFor(1, 30, -1, srvAddr))
	w.runUntil(time.Second, c.is(client.Connected))
	w.net.SetLink(c.addr, s.addr, netsim.Config{Loss: 1})
	w.net.SetLink(s.addr, c.addr, netsim.Config{Loss: 1})
	w.run(60 * time.Second)
	assert.Equal(t, client.Connected, c.core.State())
	assert.Len(t, s.live(), 1)
}

func TestServerFull(t *testing.T) {
	w := newWorld(t, netsim.Config{Latency: 5 * time.Millisecond})
	s := w.addServer(srvAddr, 4)
	var cs []*cliNode
	for i := range 6 {
		cs = append(cs, w.addClient(fmt.Sprintf("10.1.0.%d:5000", i+1), w.tokenFor(uint64(i+1), 30, 5, srvAddr)))
	}
	w.runUntil(5*time.Second, func() bool {
		for _, c := range cs {
			if st := c.core.State(); st != client.Connected && st != client.ConnectionDenied {
				return false
			}
		}
		return true
	})
	counts := map[client.State]int{}
	for _, c := range cs {
		counts[c.core.State()]++
	}
	assert.Equal(t, 4, counts[client.Connected])
	assert.Equal(t, 2, counts[client.ConnectionDenied])
	assert.Positive(t, s.core.Stats().DeniedSent)
}

func TestTokenReuse(t *testing.T) {
	t.Run("from another address", func(t *testing.T) {
		w := newWorld(t, netsim.Config{Latency: 5 * time.Millisecond})
		s := w.addServer(srvAddr, 4)
		tok := w.tokenFor(1, 30, 1, srvAddr)
		// The first holder's requests reach the server, its answers never
		// come back: the token is in the history, bound to a's address.
		a := w.addClient("10.1.0.1:5000", tok)
		w.net.SetLink(s.addr, a.addr, netsim.Config{Loss: 1})
		w.runUntil(time.Second, func() bool { return s.core.Stats().ChallengesSent > 0 })
		b := w.addClient("10.1.0.2:5000", tok)
		w.runUntil(5*time.Second, b.final())
		assert.Equal(t, client.ConnectionRequestTimedOut, b.core.State())
		assert.Empty(t, s.live())
		assert.Positive(t, s.core.Stats().TokenReuseRefused)
	})
	t.Run("after its session ended", func(t *testing.T) {
		w := newWorld(t, netsim.Config{Latency: 5 * time.Millisecond})
		s := w.addServer(srvAddr, 4)
		tok := w.tokenFor(1, 30, 1, srvAddr)
		a := w.addClient("10.1.0.1:5000", tok)
		w.runUntil(time.Second, a.is(client.Connected))
		a.disconnect()
		w.run(100 * time.Millisecond)
		require.Empty(t, s.live())
		again := w.addClient("10.1.0.1:5000", tok)
		w.runUntil(5*time.Second, again.final())
		assert.Equal(t, client.ConnectionRequestTimedOut, again.core.State())
		assert.Empty(t, s.live())
	})
}

func TestReplayedPacketsAreDropped(t *testing.T) {
	w := newWorld(t, netsim.Config{Latency: 5 * time.Millisecond})
	s := w.addServer(srvAddr, 4)
	c := w.addClient("10.1.0.1:5000", w.tokenFor(1, 30, 5, srvAddr))
	w.runUntil(time.Second, c.is(client.Connected))
	sc := s.connected[0]
	var captured [][]byte
	w.tap = func(from, to netip.AddrPort, b []byte) {
		if to == s.addr {
			if typ, ok := protocol.PeekType(b); ok && typ == protocol.Payload {
				captured = append(captured, append([]byte(nil), b...))
			}
		}
	}
	for i := range 5 {
		require.NoError(t, c.send(w.now, []byte{byte(i)}))
	}
	w.run(50 * time.Millisecond)
	require.Len(t, captured, 5)
	require.Len(t, s.payloads[sc], 5)
	w.tap = nil
	before := s.core.Stats().Replayed
	for _, p := range captured {
		w.net.Send(w.now, c.addr, s.addr, p)
	}
	w.run(50 * time.Millisecond)
	assert.Len(t, s.payloads[sc], 5, "replays are not delivered")
	assert.Equal(t, before+5, s.core.Stats().Replayed)
}

func TestSpoofedAddressNeverConnects(t *testing.T) {
	w := newWorld(t, netsim.Config{Latency: 5 * time.Millisecond})
	s := w.addServer(srvAddr, 4)
	spoofed := netip.MustParseAddrPort("10.9.9.9:6000")
	// Capture a real client's request, then stop that client.
	var request []byte
	w.tap = func(from, to netip.AddrPort, b []byte) {
		if typ, ok := protocol.PeekType(b); ok && typ == protocol.ConnectionRequest && request == nil {
			request = append([]byte(nil), b...)
		}
	}
	tok := w.tokenFor(1, 30, 1, srvAddr)
	_ = tok
	// The attacker has the token (it is not secret from the client) but not
	// the victim's address: it sends the request with a spoofed source and
	// never sees the challenge.
	victim := &cliNode{addr: netip.MustParseAddrPort("10.1.0.1:5000")}
	victim.sink = sink{w, victim.addr}
	victim.start(w, tok)
	victim.core.Update(w.now, &victim.out)
	victim.apply(sink{w, spoofed}) // the request leaves from the spoofed address
	w.run(50 * time.Millisecond)
	require.NotNil(t, request)
	assert.Equal(t, uint64(1), s.core.Stats().ChallengesSent)
	// The spoofed address is a black hole: nobody answers the challenge.
	w.run(server.HandshakeTimeout + time.Second)
	st := s.core.Stats()
	assert.Equal(t, 0, st.Connected)
	assert.Empty(t, s.connected)
	assert.Equal(t, 0, st.Mappings, "the half-open handshake expired (server.HandshakeTimeout)")
}

func TestTokenForAnotherServerIsIgnored(t *testing.T) {
	w := newWorld(t, netsim.Config{Latency: 5 * time.Millisecond})
	s := w.addServer(srvAddr, 4)
	// The token names srvAddr2 only; the packets reach srvAddr anyway.
	tok := w.tokenFor(1, 30, 1, srvAddr2)
	c := &cliNode{addr: netip.MustParseAddrPort("10.1.0.1:5000")}
	c.start(w, tok)
	w.net.Send(w.now, c.addr, s.addr, firstRequest(t, c.core, w.now))
	w.run(50 * time.Millisecond)
	st := s.core.Stats()
	assert.Equal(t, uint64(1), st.AddressNotInToken)
	assert.Zero(t, st.ChallengesSent)
}

func firstRequest(t *testing.T, c *client.Client, now time.Time) []byte {
	var out client.Output
	c.Update(now, &out)
	require.Len(t, out.Datagrams, 1)
	require.Len(t, out.Datagrams[0].Buf, 1078, "a connection request")
	return out.Datagrams[0].Buf
}

func TestHandshakeRepliesNeverAmplify(t *testing.T) {
	w := newWorld(t, netsim.Config{})
	s := w.addServer(srvAddr, 1)
	maxRatio := 0.0
	sizes := map[netip.AddrPort]int{}
	w.tap = func(from, to netip.AddrPort, b []byte) {
		typ, _ := protocol.PeekType(b)
		switch {
		case to == s.addr && (typ == protocol.ConnectionRequest || typ == protocol.ConnectionResponse):
			sizes[from] = len(b)
		case from == s.addr && (typ == protocol.ConnectionChallenge || typ == protocol.ConnectionDenied):
			if r := float64(len(b)) / float64(sizes[to]); r > maxRatio {
				maxRatio = r
			}
		}
	}
	a := w.addClient("10.1.0.1:5000", w.tokenFor(1, 30, 5, srvAddr))
	b := w.addClient("10.1.0.2:5000", w.tokenFor(2, 30, 5, srvAddr))
	w.runUntil(2*time.Second, func() bool { return a.core.State() == client.Connected || b.core.State() == client.Connected })
	w.run(time.Second)
	require.Positive(t, maxRatio)
	assert.Less(t, maxRatio, 1.0)
}

// TestNoNonceReuseAcrossRestarts dials one token twice: a session, a server
// restart (which forgets the token history), and a second session from the
// same address, as a client that retries does. Both sides seal under the
// token's keys in both sessions, so no sequence number may repeat in either
// direction: a repeat is a reused nonce.
func TestNoNonceReuseAcrossRestarts(t *testing.T) {
	tests := []struct {
		name string
		gap  time.Duration // from the end of the first session to the redial
	}{
		{"quick retry", 200 * time.Millisecond},
		{"after a while", 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld(t, netsim.Config{Latency: 5 * time.Millisecond})
			tok := w.tokenFor(1, 60, 30, srvAddr)
			srv := netip.MustParseAddrPort(srvAddr)
			type use struct {
				toServer bool
				seq      uint64
			}
			seen := map[use]int{}
			session := 1
			w.tap = func(from, to netip.AddrPort, b []byte) {
				typ := protocol.PacketType(b[0] & 0x0f)
				if typ == protocol.ConnectionRequest || typ == protocol.ConnectionChallenge || typ == protocol.ConnectionDenied {
					return // not sealed with a per-connection sequence
				}
				n := int(b[0] >> 4)
				var seq uint64
				for i := range n {
					seq |= uint64(b[1+i]) << (8 * i)
				}
				u := use{to == srv, seq}
				if first, ok := seen[u]; ok && first != session {
					t.Errorf("session %d reuses sequence %d (to server: %v) of session %d", session, seq, u.toServer, first)
				}
				seen[u] = session
			}
			exchange := func(c *cliNode, s *srvNode) {
				for i := range 20 {
					require.NoError(t, c.send(w.now, []byte{byte(i)}))
					require.NoError(t, s.send(s.live()[0], w.now, []byte{byte(i)}))
					w.run(30 * time.Millisecond)
				}
			}

			s := w.addServer(srvAddr, 4)
			c := w.addClient("10.1.0.1:5000", tok)
			w.runUntil(time.Second, c.is(client.Connected))
			exchange(c, s)
			w.run(500 * time.Millisecond) // keep-alives too
			s.close()
			w.order = nil // the first client is gone with its socket
			w.run(tt.gap)

			session = 2
			s = w.addServer(srvAddr, 4) // restarted: an empty token history
			c = w.addClient("10.1.0.1:5000", tok)
			w.runUntil(time.Second, c.is(client.Connected))
			exchange(c, s)
			w.run(500 * time.Millisecond)
			require.NotEmpty(t, seen)
		})
	}
}
